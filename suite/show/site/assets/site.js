// Legend: clicking a provider hides or shows its marks in every chart of the page.
// Hover: the nearest point's text (from the page's JSON table of hover texts) next to the pointer.
// asv's site, opened from disk: its links say what it needs instead of opening a page that cannot load.
(function () {
  // asv's pages fetch their JSON, which browsers refuse to pages opened from disk ("Error fetching
  // content"): there, a link to them explains how to serve the site, and points to its own history pages.
  if (location.protocol === "file:") {
    document.addEventListener("click", function (event) {
      var link = event.target.closest && event.target.closest("a[data-asv]");
      if (!link) return;
      event.preventDefault();
      var note = document.querySelector(".offline");
      var nav = document.querySelector("nav a");  // the overview: the site's root, whatever page this is
      var root = decodeURIComponent(new URL(nav ? nav.getAttribute("href") : ".", location.href).pathname)
        .replace(/index\.html$/, "").replace(/\/$/, "");
      var target = link.href.slice(new URL(nav ? nav.getAttribute("href") : ".", location.href).href
        .replace(/index\.html$/, "").length);
      note.textContent = "asv's site loads its results with fetch(), which browsers refuse for pages opened " +
        "from disk. This site's own history pages (the history link above) show the same series offline. To browse " +
        "asv's site, serve this folder:\n    python -m http.server --directory '" + root + "'\n" +
        "and open http://localhost:8000/" + target;
      note.hidden = false;
      note.scrollIntoView({block: "nearest"});
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-lg]");
    if (!button) return;
    var name = button.getAttribute("data-lg");
    var off = !button.classList.contains("off");
    button.classList.toggle("off", off);
    button.setAttribute("aria-pressed", off ? "false" : "true");
    document.querySelectorAll("[data-s]").forEach(function (el) {
      if (el.getAttribute("data-s") === name) el.classList.toggle("off", off);
    });
  });

  var table = document.getElementById("hovers");
  if (!table) return;
  var H = JSON.parse(table.textContent);
  var tip = document.createElement("div");
  tip.className = "tip";
  tip.hidden = true;
  document.body.appendChild(tip);
  var cache = new WeakMap();

  // A series path is "M x y x y ..." or "M x yM x y ...": its numbers are the points, in data-i's order.
  function points(path) {
    var pts = cache.get(path);
    if (!pts) {
      var nums = (path.getAttribute("d").match(/-?[\d.]+/g) || []).map(Number);
      var ids = path.getAttribute("data-i").split(" ");
      pts = ids.map(function (id, i) { return [nums[2 * i], nums[2 * i + 1], +id]; });
      cache.set(path, pts);
    }
    return pts;
  }

  function num(v) {
    return Math.abs(v) >= 1000 ? v.toFixed(0) : String(+v.toPrecision(3));
  }

  // A measurement's row (see model.RecordHovers): [provider, case, value, median, p10, p90, speedup,
  // baseline, rel. error, SOL, bound, MiB, FLOP/B, TFLOP/s, unit]; names are indexes into H.P, H.C, H.B,
  // H.D, H.U (a row's own unit, where a page holds several families).
  function describe(r) {
    var has = function (i) { return r[i] !== undefined && r[i] !== null; };
    var s = H.P[r[0]] + " · " + H.C[r[1]] + "\n";
    if (has(2)) s += num(r[2]) + " " + (has(14) ? H.U[r[14]] : H.u) + " · ";
    s += "median " + num(r[3]) + " ms";
    if (has(5)) s += " (p10–p90 " + num(r[4]) + "–" + num(r[5]) + ")";
    if (has(6)) s += " · " + r[6].toFixed(2) + "× " + H.B[r[7]];
    if (has(8)) s += "\nrel. error " + num(r[8]);
    // Above 1 a SOL is no fraction of its ceiling (a median in doubt): said in words, never as "112%".
    if (has(9)) s += r[9] > 1 ? " · above its " + H.D[r[10]] + " ceiling"
      : " · " + Math.round(100 * r[9]) + "% of the " + H.D[r[10]] + " ceiling";
    if (has(11)) s += " · " + num(r[11]) + " MiB";
    if (has(12)) s += "\n" + num(r[12]) + " FLOP/B, " + num(r[13]) + " TFLOP/s";
    return s;
  }

  // A history point's row (see charts.CommitHovers): [machine, commit, value].
  function commit(r) {
    var k = H.K[r[1]];
    return H.M[r[0]] + " · " + k[0] + " (" + k[1] + "): " + num(r[2]) + " " + H.u;
  }

  document.addEventListener("mousemove", function (event) {
    var svg = event.target.closest && event.target.closest("svg.chart");
    if (!svg) { tip.hidden = true; return; }
    var p = svg.createSVGPoint();
    p.x = event.clientX;
    p.y = event.clientY;
    p = p.matrixTransform(svg.getScreenCTM().inverse());
    var best = null, bestD = 100;  // within 10 chart units
    svg.querySelectorAll("path[data-i]").forEach(function (path) {
      if (path.closest(".off")) return;
      points(path).forEach(function (pt) {
        var d = (pt[0] - p.x) * (pt[0] - p.x) + (pt[1] - p.y) * (pt[1] - p.y);
        if (d < bestD) { bestD = d; best = pt; }
      });
    });
    if (!best) { tip.hidden = true; return; }
    tip.textContent = H.K ? commit(H.R[best[2]]) : describe(H.R[best[2]]);
    tip.hidden = false;
    tip.style.left = Math.min(event.pageX + 14, window.scrollX + document.documentElement.clientWidth - 470) + "px";
    tip.style.top = (event.pageY + 14) + "px";
  });
})();
