"""Create empty folders for the packages pyproject.toml lists but a checkout lacks, so old commits build.

git keeps no empty folder, so a commit made before a package got its first file has no folder for it and
setuptools refuses to build ("package directory ... does not exist"). Standard library only: asv runs it
by path, with the Python of the environment it is building (see asv.conf.json's build_command).

    python fill_package_dirs.py BUILD_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path


def add_missing_package_dirs(src: Path) -> list[Path]:
    """The folders created (none on Python 3.10, which has no TOML reader)."""
    try:
        import tomllib
    except ImportError:
        return []
    pyproject = src / "pyproject.toml"
    if not pyproject.exists():
        return []
    tool = tomllib.loads(pyproject.read_text()).get("tool", {}).get("setuptools", {})
    mapping = tool.get("package-dir", {})
    packages = tool.get("packages", [])
    made = []
    for package in packages if isinstance(packages, list) else []:
        parent, rest = package, []
        while parent and parent not in mapping:
            parent, _, child = parent.rpartition(".")
            rest.insert(0, child)
        folder = (src / mapping[parent] if parent else src).joinpath(*rest)
        if not folder.exists():
            folder.mkdir(parents=True)
            made.append(folder)
    return made


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    for made in add_missing_package_dirs(Path(sys.argv[1])):
        print(f"created empty package folder {made}")
