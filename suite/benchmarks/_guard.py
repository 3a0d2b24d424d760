"""Guards an offline history run against measuring a mix of two commits."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ._settings import BUILD_ENV


def check_build() -> None:
    """With TIERBENCH_ASV_BUILD set (offline history runs), every tierbench module must come from there.

    A build of an old commit lacks newer modules; an editable install elsewhere on the path would then
    supply them silently and the history would measure a mix of two commits.
    """
    build = os.environ.get(BUILD_ENV)
    if not build:
        return
    root = Path(build).resolve()
    strays = sorted(
        (name, module.__file__)
        for name, module in list(sys.modules.items())
        if name.startswith("tierbench.")
        and getattr(module, "__file__", None)
        and not Path(module.__file__).resolve().is_relative_to(root)
    )
    if strays:
        listed = ", ".join(f"{name} ({path})" for name, path in strays[:5])
        raise ImportError(
            f"{BUILD_ENV}={build} but tierbench modules come from elsewhere: {listed}"
            f"{' ...' if len(strays) > 5 else ''}; the build lacks them or another install shadows it"
        )
