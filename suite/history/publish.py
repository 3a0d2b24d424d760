"""History that is never lost: benchmark definitions per machine, asv's site published for every machine, and
published pages that work offline.

- `asv run` rewrites results/asv/benchmarks.json with the benchmarks it found on *this* machine, and `asv
  publish` draws only the results whose benchmark version matches that file: a nightly on a second machine
  (another device, so other cases and versions) would hide the first machine's history and delete its
  graphs. So each machine keeps its own definitions in results/asv/<machine>/benchmarks.json (asv skips that
  name when it reads results), and the top-level file is their merge: per benchmark the union of its
  parameters, the version of the entry it had before (or of the first machine that defines it).
- `publish` runs asv publish on a view of the results (a temporary folder) in which each machine's results
  carry the version of the merged definition where they match that machine's own definition: every
  machine's current series is drawn; results of an older version stay hidden, as asv hides them.
- asv's pages load jQuery, flot, bootstrap and two small plugins from CDNs. `publish` puts copies in the
  published folder's vendor/ (taken from the npm packages of those versions, cached in .asv/www-vendor, or
  kept from the previous publish) and points the pages at them, so the site opens from disk.
- Publishing rewrites nothing that did not change in meaning: asv publishes into a staging folder (so a
  failed publish leaves the site as it was), and `sync_tree` then writes only the files whose content
  differs once the stamps of when they were made (asv's info.json timestamp and feed `updated`, the
  comparison site's "generated" footer) are set aside. Publishing unchanged results twice leaves every
  committed file as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from .asvresults import NOT_RESULTS
from .asvtool import AsvConfig, AsvError, run_asv

DEFINITIONS = "benchmarks.json"
VENDOR = "vendor"
# CDN address in asv's index.html -> (npm package@version, file in the package, local name).
VENDORED = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js", "jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": (
        "flot@0.8.3",
        "jquery.flot.js",
        "jquery.flot.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": (
        "flot@0.8.3",
        "jquery.flot.time.js",
        "jquery.flot.time.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js": (
        "flot@0.8.3",
        "jquery.flot.selection.js",
        "jquery.flot.selection.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js": (
        "flot@0.8.3",
        "jquery.flot.categories.js",
        "jquery.flot.categories.js",
    ),
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": (
        "flot-orderbars@1.0.0",
        "js/jquery.flot.orderBars.js",
        "jquery.flot.orderBars.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": (
        "stupid-table-plugin@1.1.3",
        "stupidtable.min.js",
        "stupidtable.min.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": (
        "blueimp-md5@2.19.0",
        "js/md5.min.js",
        "md5.min.js",
    ),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": (
        "bootstrap@3.1.1",
        "dist/js/bootstrap.min.js",
        "bootstrap.min.js",
    ),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css": (
        "bootstrap@3.1.1",
        "dist/css/bootstrap.min.css",
        "css/bootstrap.min.css",
    ),
}
# Files the vendored CSS refers to (relative to it), from the same package.
EXTRA_FILES = {
    "bootstrap@3.1.1": [
        (f"dist/fonts/glyphicons-halflings-regular.{ext}", f"fonts/glyphicons-halflings-regular.{ext}")
        for ext in ("eot", "svg", "ttf", "woff")
    ]
}


# -- definitions ---------------------------------------------------------------------------------------------


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=4, sort_keys=True) + "\n")
    tmp.replace(path)


def machine_definitions(results_dir: Path) -> dict[str, dict]:
    """Per machine with results, its benchmark definitions (its own file; none for a machine without one)."""
    out = {}
    folders = sorted(p for p in results_dir.iterdir() if (p / "machine.json").exists()) if results_dir.is_dir() else []
    for folder in folders:
        defs = _read(folder / DEFINITIONS)
        out[folder.name] = {k: v for k, v in defs.items() if isinstance(v, dict)}
    return out


def merge_definitions(previous: dict, per_machine: dict[str, dict]) -> dict:
    """The top-level definitions: every machine's benchmarks; a benchmark defined by several machines gets
    the union of their parameter values and keeps its previous entry's version (else the first machine's)."""
    merged = {k: v for k, v in previous.items() if k == "version" or isinstance(v, dict)}
    for machine in sorted(per_machine):
        for name, entry in per_machine[machine].items():
            merged[name] = _union_params(merged[name], entry) if name in merged else json.loads(json.dumps(entry))
    if "version" in previous or per_machine:
        merged["version"] = previous.get("version", 2)
    return merged


def _union_params(into: dict, other: dict) -> dict:
    mine, theirs = into.get("params") or [], other.get("params") or []
    if len(mine) != len(theirs) or into.get("param_names") != other.get("param_names"):
        return into  # differently shaped: the first definition stands
    out = dict(into)
    out["params"] = [list(a) + [v for v in b if v not in a] for a, b in zip(mine, theirs)]
    return out


def record_definitions(results_dir: Path, machine: str, previous: dict) -> None:
    """After `asv run` on `machine`: its definitions into <machine>/benchmarks.json, the top-level file
    restored to the merge of every machine's (asv has just replaced it with this machine's alone)."""
    top = results_dir / DEFINITIONS
    found = {k: v for k, v in _read(top).items() if isinstance(v, dict)}
    folder = results_dir / machine
    if found and folder.is_dir():
        own = {k: v for k, v in _read(folder / DEFINITIONS).items() if isinstance(v, dict)}
        own.update(found)
        _write(folder / DEFINITIONS, {**own, "version": 2})
    per_machine = machine_definitions(results_dir)
    # A machine without a definitions file of its own (history from before they existed) keeps the entries
    # of the previous top-level file.
    merged = merge_definitions(previous, {m: d for m, d in per_machine.items() if d})
    if merged:
        _write(top, merged)


def snapshot(results_dir: Path) -> dict:
    """The top-level definitions before an asv run (to merge back afterwards)."""
    return _read(results_dir / DEFINITIONS)


# -- publishing ----------------------------------------------------------------------------------------------


def _merged_version(versions: set[str]) -> str:
    if len(versions) == 1:
        return next(iter(versions))
    return "merged-" + hashlib.sha256("\0".join(sorted(versions)).encode()).hexdigest()[:12]


def publish_view(results_dir: Path, view: Path) -> Path:
    """A copy of the results in which every machine's current series matches the merged definitions."""
    top = _read(results_dir / DEFINITIONS)
    per_machine = machine_definitions(results_dir)
    legacy = {k: v for k, v in top.items() if isinstance(v, dict)}
    own = {m: (d or legacy) for m, d in per_machine.items()}
    versions: dict[str, set[str]] = {}
    for defs in own.values():
        for name, entry in defs.items():
            if entry.get("version"):
                versions.setdefault(name, set()).add(entry["version"])
    merged = merge_definitions(top, {m: d for m, d in per_machine.items() if d})
    for name, vs in versions.items():
        if name in merged:
            merged[name] = {**merged[name], "version": _merged_version(vs)}
    view.mkdir(parents=True, exist_ok=True)
    _write(view / DEFINITIONS, merged)
    for machine, defs in own.items():
        src, dest = results_dir / machine, view / machine
        dest.mkdir()
        shutil.copy(src / "machine.json", dest / "machine.json")
        for path in sorted(src.glob("*.json")):
            if path.name in NOT_RESULTS:
                continue
            (dest / path.name).write_text(_retag(path.read_text(), defs, merged))
    return view


def _retag(text: str, defs: dict, merged: dict) -> str:
    """A result file whose benchmarks of this machine's current version carry the merged version."""
    try:
        data = json.loads(text)
        column = data["result_columns"].index("version")
    except (json.JSONDecodeError, KeyError, ValueError, AttributeError):
        return text  # not a result file asv can read either: left as it is
    for name, row in data.get("results", {}).items():
        mine, theirs = defs.get(name, {}).get("version"), merged.get(name, {}).get("version")
        if isinstance(row, list) and len(row) > column and mine and row[column] == mine and theirs:
            row[column] = theirs
    return json.dumps(data)


def publish(config: AsvConfig) -> Path:
    """asv publish of every machine's history into the html dir, with the vendored scripts for offline use;
    staged, then only files changed in meaning written (`sync_tree`)."""
    html = config.html_dir
    with tempfile.TemporaryDirectory(prefix="tierbench-publish-") as tmp:
        view = publish_view(config.results_dir, Path(tmp) / "results")
        staged = Path(tmp) / "html"
        variant = config.variant(Path(tmp) / "config", results_dir=str(view), html_dir=str(staged))
        if run_asv(["publish"], variant):
            raise AsvError("asv publish failed (the published site is left as it was)")
        kept = html / VENDOR if (html / VENDOR).is_dir() else None
        make_offline(staged, vendor_cache(config.root), kept)
        sync_tree(staged, html, delete=True)
    return html


# -- writing only what changed ---------------------------------------------------------------------------------

# Stamps of when a file was made, not of what it says: set aside when deciding whether a file changed.
VOLATILE = (
    re.compile(rb'"timestamp": \d+'),  # asv's info.json
    re.compile(rb"<updated>[^<]*</updated>"),  # asv's regressions.xml feed
    re.compile(rb"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC"),  # the comparison site's footer
)


def same_meaning(old: bytes, new: bytes) -> bool:
    if old == new:
        return True
    for stamp in VOLATILE:
        old, new = stamp.sub(b"", old), stamp.sub(b"", new)
    return old == new


def sync_tree(staged: Path, dest: Path, delete: bool = False, skip: tuple[str, ...] = ()) -> list[Path]:
    """Bring `dest` to `staged`'s content, writing only files that changed in meaning (each by rename, so no
    reader sees half a file); with `delete`, files `staged` lacks go too. Top-level names in `skip` are left
    alone. Returns the paths written or deleted."""
    changed = []
    for src in sorted(p for p in staged.rglob("*") if p.is_file() or p.is_symlink()):
        rel = src.relative_to(staged)
        if rel.parts[0] in skip or src.is_symlink():
            continue
        target = dest / rel
        data = src.read_bytes()
        if target.is_file() and same_meaning(target.read_bytes(), data):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
        changed.append(target)
    if delete and dest.is_dir():
        for old in sorted(p for p in dest.rglob("*") if p.is_file()):
            rel = old.relative_to(dest)
            if rel.parts[0] not in skip and not (staged / rel).is_file():
                old.unlink()
                changed.append(old)
        for folder in sorted((p for p in dest.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            if not any(folder.iterdir()):
                folder.rmdir()
    return changed


# -- offline pages -------------------------------------------------------------------------------------------


def vendor_cache(config_root: Path) -> Path:
    return config_root / ".asv" / "www-vendor"


def fetch_package(spec: str, cache: Path) -> Path:
    """The unpacked npm package `name@version` under `cache` (npm pack, once)."""
    target = cache / spec.replace("/", "_")
    if (target / "package").is_dir():
        return target / "package"
    if not shutil.which("npm"):
        raise AsvError(f"npm is not installed: cannot fetch {spec} for the offline asv pages")
    with tempfile.TemporaryDirectory(prefix="tierbench-npm-") as tmp:
        out = subprocess.run(
            ["npm", "pack", spec, "--silent", "--pack-destination", tmp],
            capture_output=True,
            text=True,
            timeout=300,
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if out.returncode or not tarballs:
            raise AsvError(f"npm pack {spec} failed: {out.stderr.strip()[-500:]}")
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarballs[0]) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(target, filter="data")
            else:
                tar.extractall(target)  # noqa: S202 - a registry package of a pinned version
    return target / "package"


def vendor_files(dest: Path, cache: Path, kept: Path | None = None) -> list[str]:
    """Put every vendored file into `dest` (from `kept`, else the npm cache); the names it could not get."""
    missing = []
    wanted: dict[str, list[tuple[str, str]]] = {}
    for spec, inside, local in VENDORED.values():
        wanted.setdefault(spec, []).append((inside, local))
    for spec, extra in EXTRA_FILES.items():
        wanted.setdefault(spec, []).extend(extra)
    for spec, files in wanted.items():
        need = [(inside, local) for inside, local in files if not (kept and (kept / local).is_file())]
        for _, local in files:
            if kept and (kept / local).is_file():
                (dest / local).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(kept / local, dest / local)
        if not need:
            continue
        try:
            package = fetch_package(spec, cache)
        except (AsvError, OSError, subprocess.SubprocessError) as exc:
            missing += [f"{local} ({exc})" for _, local in need]
            continue
        for inside, local in need:
            (dest / local).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(package / inside, dest / local)
    return missing


_TAG = re.compile(r"<(script|link)\b[^>]*?(?:src|href)=\"(https://[^\"]+)\"[^>]*>")


def localize(page: str, available: set[str]) -> str:
    """asv's page with each vendored CDN reference pointing at vendor/ (integrity and crossorigin dropped:
    a page opened from disk has no origin to check against)."""

    def swap(m: re.Match) -> str:
        url = m.group(2)
        if url not in VENDORED or VENDORED[url][2] not in available:
            return m.group(0)
        tag = m.group(0).replace(url, f"{VENDOR}/{VENDORED[url][2]}")
        tag = re.sub(r'\s(integrity|crossorigin|referrerpolicy)="[^"]*"', "", tag)
        return tag

    return _TAG.sub(swap, page)


def make_offline(html: Path, cache: Path, kept: Path | None = None) -> list[str]:
    """Vendor the scripts into the published site and point its pages at them; returns what is missing."""
    if not (html / "index.html").is_file():
        return []
    dest = html / VENDOR
    dest.mkdir(exist_ok=True)
    missing = vendor_files(dest, cache, kept)
    available = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}
    for page in html.glob("*.html"):
        page.write_text(localize(page.read_text(encoding="utf-8"), available), encoding="utf-8")
    if missing:
        print(
            "tierbench publish: warning: the asv pages still load from the network: could not vendor "
            + "; ".join(missing),
            flush=True,
        )
    return missing
