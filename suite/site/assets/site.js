// Clicking a provider in the legend hides or shows its marks in every chart of the page.
(function () {
  function toggle(button) {
    var name = button.getAttribute("data-lg");
    var off = !button.classList.contains("off");
    button.classList.toggle("off", off);
    button.setAttribute("aria-pressed", off ? "false" : "true");
    document.querySelectorAll("[data-s]").forEach(function (el) {
      if (el.getAttribute("data-s") === name) el.classList.toggle("off", off);
    });
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-lg]");
    if (button) toggle(button);
  });
})();
