"""Text from records made safe for a terminal: control characters (escape sequences, bells) shown, not run."""

from __future__ import annotations

import re

# C0 and C1 control characters except tab and newline, and DEL: a record may hold `\x1b[2J` or an OSC title.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(text: str) -> str:
    """The text with every control character written as its escape (\\x1b), so it prints as itself."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))
