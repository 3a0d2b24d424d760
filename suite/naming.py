"""Names safe for files, URLs and CSS classes, shared by every part that derives one from a device or case."""

from __future__ import annotations

import re


def slug(text: str, empty: str = "") -> str:
    """Lower-case letters and digits joined by single dashes; `empty` where nothing is left."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or empty
