"""Text from records made safe to show: control characters and bidirectional controls shown, not obeyed.

A record (a provider name, a reason, a device name, a run id) may hold `\\x1b[2J`, an OSC title sequence, or
U+202E (right-to-left override), which would clear a terminal, retitle it, or reverse the text after it
on a page. Views write such characters as their escapes; the site also isolates untrusted text
(`<bdi>`, or FSI ... PDI where no markup can go) so that right-to-left names keep to themselves.
"""

from __future__ import annotations

import contextlib
import re
import sys
import unicodedata
import warnings
from collections.abc import Iterator

# C0 and C1 control characters except tab and newline, and DEL: a record may hold `\x1b[2J` or an OSC title.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Bidirectional embeddings, overrides and isolates (LRE, RLE, PDF, LRO, RLO; LRI, RLI, FSI, PDI).
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
FSI, PDI = "\u2068", "\u2069"


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def unbidi(text: str) -> str:
    """The text with every bidirectional control written as its escape (\\u202e)."""
    return _BIDI.sub(_escaped, str(text))


def plain(text: str) -> str:
    """The text with every control character, bidirectional ones included, written as its escape (\\x1b)."""
    return _CONTROL.sub(_escaped, unbidi(text))


def isolate(text: str) -> str:
    """Plain text isolated from what surrounds it (FSI ... PDI) where it holds right-to-left characters:
    for titles, SVG text and script data, where no <bdi> can go."""
    text = unbidi(text)
    if any(unicodedata.bidirectional(c) in ("R", "AL", "AN") for c in text):
        return f"{FSI}{text}{PDI}"
    return text


@contextlib.contextmanager
def warnings_as_lines(prog: str) -> Iterator[None]:
    """Warnings (a damaged record, an unreadable file) printed as one plain line each: `prog: warning: ...`."""
    shown = warnings.showwarning

    def show(message: Warning | str, *args: object, **kwargs: object) -> None:
        print(f"{prog}: warning: {plain(str(message))}", file=sys.stderr)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown
