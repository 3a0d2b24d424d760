"""The site's templates (assets/*.html.j2) and the filters and styles every page renders with.

Templates autoescape everything they are given, so a reason, a provider or a case name from the records
renders as text whatever it holds; the few fragments built in Python (chart SVG, matrix cells) escape their
own strings and are then marked safe. Bidirectional controls in any of them are written as escapes (every
template value passes through text.unbidi), and names from the records are shown in <bdi>, so a right-to-left
name cannot reorder the text around it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from .... import tiers as tier_records
from .... import units
from ....ceilings import sol_text
from ....text import unbidi
from ...presentation import Presentation
from .. import charts
from ..runs import slug

ASSETS = Path(__file__).parent.parent / "assets"


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(ASSETS),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_no_bidi_controls,
    )
    env.filters["bdi"] = bdi
    env.filters["text"] = text
    builtin = Presentation()
    env.globals.update(
        css=Markup(
            (ASSETS / "site.css").read_text()
            + tier_css(builtin, [])
            + ".t-other{border-left:5px solid #999;background:#eee}"
        ),
        js=Markup((ASSETS / "site.js").read_text()),
        tier_class=tier_class,
        icon=lambda style: Markup(charts.marker_icon(style)),
        quantity=units.quantity,
        sol_text=sol_text,
        kernel_note=_kernel_note,
    )
    return env


def _kernel_note(run: Any) -> Markup:
    """Beside a run's name: whether the Triton kernels changed since its commit (the statement on hover)."""
    age = run.kernels
    if age is None or not age.short():
        return Markup("")
    return Markup(' <span class="stale" title="{}">{}</span>').format(unbidi(age.words()), unbidi(age.short()))


def _no_bidi_controls(value: Any) -> Any:
    """Every value a template writes (text and attributes alike): its bidirectional controls as escapes."""
    return unbidi(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def bdi(text: Any) -> Markup:
    """Untrusted text as an isolated, escaped HTML fragment."""
    return Markup("<bdi>%s</bdi>") % unbidi(str(text))


def text(value: Any) -> Markup:
    """Prose for an element's content (never an attribute's): its bidirectional controls as escapes and `&`,
    `<` and `>` escaped; quotes, which mean nothing there, stay as written (a view's panel note)."""
    escaped = unbidi(str(value)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(escaped)


def _tint(color: str, amount: float = 0.28) -> str:
    """color mixed with white: a cell background light enough to read black text on."""
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - (255 - c) * amount):02x}" for c in rgb)


def tier_css(shown: Presentation, names: list[str]) -> str:
    """A class per tier (index cells are colored by tier): the built-in ones, or those of `names` that are
    not built in; colors are checked hex values."""
    known = [n for n in names if n not in tier_records.BUILTIN] if names else list(tier_records.BUILTIN)
    return "".join(
        f".t-{slug(t)}{{border-left:5px solid {c};background:{_tint(c)}}}" for t in known for c in [shown.tier_color(t)]
    )


def tier_class(tier: str) -> str:
    return f"t-{slug(tier)}"


def render(template: str, **context: Any) -> str:
    context.setdefault("root", "")
    return _env().get_template(template).render(**context)
