"""`kda2 cache info | prune`: the local content-addressed cache (`cache/`, or $KDA2_CACHE_DIR) that every build
fills and nothing else empties. Every signature change (a kda2 upgrade, an edit to build code, another toolkit)
leaves the old entries behind, so the directory only grows.

Layout (kda2.compile.cache, SCons' CacheDir): `<dir>/<2 hex>/<signature>` and its `<signature>.sha256` sidecar,
written after the entry; an entry without its sidecar is a miss (a push in flight, or one that died). A sidecar's
mtime is the entry's last use: the build sets it when it pushes the entry or retrieves it (verified).

Pruning removes whole entries, least recently used first, sidecar before entry, so a build reading the cache at the
same time sees a miss, never half an entry; nothing used in the last `GRACE_S` seconds is removed (a concurrent
build may be about to copy it), nor a sidecar-less entry that young (its writer may still be pushing). Only what the
build writes is touched: the prefix directories SCons' `config` names, entries and sidecars named by a signature,
and the temporaries of pushes and fetches that died (`_TEMP`, SCons' `tmp*` directories); anything else there is
counted and left, and no link is followed. Stdlib only.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

#: what `kda2 cache prune` never removes: entries used, and pushes begun, this recently (seconds)
GRACE_S = 600
_SIG = re.compile(r"[0-9a-f]{64}")
#: temporaries next to an entry: a sidecar being written (compile/cache.py _write_sidecar), a remote fetch's
#: object and its sidecar (compile/remote.py fetch)
_TEMP = re.compile(r"[0-9a-f]{64}\.(sha256\.\d+|remote\.\d+\.\d+(\.sha256)?)")
_TEMP_DIR = re.compile(r"tmp\w+")   # SCons' push: a TemporaryDirectory inside the prefix directory
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:iB|B)?", re.I)
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class CacheToolError(ValueError):
    """A bad argument or an unusable cache directory; the message says which and what is allowed."""


@dataclass(frozen=True)
class Stray:
    path: Path
    size: int
    mtime: float


@dataclass(frozen=True)
class Entry:
    path: Path
    size: int           # the entry and its sidecar: file sizes, what --max-size bounds
    disk: int           # the same on disk (allocated blocks: small files take a whole block each)
    last_used: float    # the sidecar's mtime (the entry's own mtime where it has none)
    paired: bool        # its sidecar is there (else a miss for every build)


def default_dir(top: str | os.PathLike = ".") -> Path:
    """Where the build of the checkout at `top` puts its cache (the SConstruct, run there): $KDA2_CACHE_DIR
    (relative: to `top`), else `top`/cache."""
    return Path(top) / (os.environ.get("KDA2_CACHE_DIR") or "cache")


#: what --max-size and --older-than take, as their errors and `kda2 cache --help` say it
SIZE_UNITS = "K, M, G, T: powers of 1024, an optional B or iB after them; a bare number is bytes"
AGE_UNITS = "s, m, h, d, w; lower case; a unit is required"


def parse_size(text: str) -> int:
    m = _SIZE.fullmatch(text.strip())
    if not m:
        negative = "negative; allowed: a size >= 0" if text.strip().startswith("-") else "a size"
        raise CacheToolError(f"--max-size {text!r}: {negative} such as 500M, 2G or 1.5G ({SIZE_UNITS})")
    return int(float(m[1]) * _UNITS[m[2].upper()])


def parse_age(text: str) -> float:
    m = _AGE.fullmatch(text.strip())
    if not m:
        negative = "negative; allowed: an age >= 0" if text.strip().startswith("-") else "an age"
        raise CacheToolError(f"--older-than {text!r}: {negative} such as 30d, 2w, 12h or 45m ({AGE_UNITS})")
    return float(m[1]) * _SECONDS[m[2].lower()]


def _tree_size(path: Path) -> tuple[int, float]:
    size, mtime = 0, path.lstat().st_mtime
    for dirpath, _, files in os.walk(path):   # os.walk follows no link by default
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            size, mtime = size + st.st_size, max(mtime, st.st_mtime)
    return size, mtime


def _disk(st: os.stat_result) -> int:
    """Bytes allocated to a file (st_blocks is in 512-byte units on every POSIX system); its size where the
    platform has no st_blocks."""
    blocks = getattr(st, "st_blocks", None)
    return st.st_size if blocks is None else blocks * 512


def scan(root: Path) -> tuple[list[Entry], list[Stray], int]:
    """The entries under `root`; the stray files (sidecars without their entry, temporaries of dead pushes and
    fetches); and how many other files lie in the prefix directories (left alone)."""
    if not root.is_dir():
        raise CacheToolError(f"{root}: no cache directory here (a build makes it; $KDA2_CACHE_DIR, -C or --dir names "
                             f"another)")
    try:
        prefix = json.loads((root / "config").read_text())["prefix_len"]
        assert isinstance(prefix, int) and 0 < prefix <= 4
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        raise CacheToolError(f"{root}: not a kda2 / SCons cache (no config file with a prefix_len); refusing to "
                             f"touch it") from None
    name_re = re.compile(f"[0-9A-F]{{{prefix}}}")
    entries, stray, other = [], [], 0
    for sub in sorted(root.iterdir()):
        if sub.is_symlink() or not sub.is_dir() or not name_re.fullmatch(sub.name):
            continue
        items = {p.name: p for p in sub.iterdir()}
        for name, p in sorted(items.items()):
            if p.is_symlink():
                other += 1
            elif p.is_dir():
                if _TEMP_DIR.fullmatch(name):
                    stray.append(Stray(p, *_tree_size(p)))
                else:
                    other += 1
            elif _SIG.fullmatch(name):
                side = items.get(name + ".sha256")
                side = side if side is not None and side.is_file() and not side.is_symlink() else None
                st, sst = p.stat(), (side.stat() if side else None)
                entries.append(Entry(p, st.st_size + (sst.st_size if sst else 0),
                                     _disk(st) + (_disk(sst) if sst else 0),
                                     sst.st_mtime if sst else st.st_mtime, side is not None))
            elif (name.endswith(".sha256") and _SIG.fullmatch(name[:-7]) and name[:-7] not in items) \
                    or _TEMP.fullmatch(name):
                st = p.stat()
                stray.append(Stray(p, st.st_size, st.st_mtime))
            elif not (name.endswith(".sha256") and _SIG.fullmatch(name[:-7])):
                other += 1
    return entries, stray, other


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _ago(t: float, now: float) -> str:
    s = max(0.0, now - t)
    return f"{s / 86400:.1f} d" if s >= 86400 else f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"


def info(root: Path) -> str:
    entries, stray, other = scan(root)
    now = time.time()
    total = sum(e.size for e in entries)
    lines = [f"{root}: {len(entries)} entries, {_human(total)} ({_human(sum(e.disk for e in entries))} on disk: "
             f"most entries are smaller than a block)"]
    if entries:
        lines.append(f"  last used: newest {_ago(max(e.last_used for e in entries), now)} ago, oldest "
                     f"{_ago(min(e.last_used for e in entries), now)} ago")
    unpaired = [e for e in entries if not e.paired]
    if unpaired:
        lines.append(f"  {len(unpaired)} without their sha256 sidecar (a miss for every build until one makes them "
                     f"again)")
    if stray:
        lines.append(f"  {len(stray)} stray files ({_human(sum(x.size for x in stray))}: sidecars without an entry, "
                     f"temporaries of dead pushes and fetches)")
    if other:
        lines.append(f"  {other} other files or links in the prefix directories (not the build's: left alone)")
    lines.append("  `kda2 cache prune --max-size SIZE | --older-than AGE` removes the least recently used")
    return "\n".join(lines)


def prune(root: Path, max_bytes: int | None = None, older_than_s: float | None = None, dry_run: bool = False,
          now: float | None = None) -> tuple[list[Entry], list[Stray], int]:
    """Remove entries last used more than `older_than_s` ago, then the least recently used until the cache holds
    at most `max_bytes`; and the stray files as old (older than GRACE_S in any case). Returns (entries removed,
    strays removed, bytes the entries left take)."""
    if max_bytes is None and older_than_s is None:
        raise CacheToolError("prune needs --max-size SIZE and/or --older-than AGE (what to keep)")
    now = time.time() if now is None else now
    entries, stray, _ = scan(root)
    keep_s = max(GRACE_S, older_than_s or 0)
    stray = [x for x in stray if now - x.mtime > keep_s]
    old = sorted(entries, key=lambda e: e.last_used)
    left = sum(e.size for e in entries)
    gone = []
    for e in old:
        if now - e.last_used <= GRACE_S:
            break
        stale = older_than_s is not None and now - e.last_used > older_than_s
        if not stale and (max_bytes is None or left <= max_bytes):
            break
        gone.append(e)
        left -= e.size
    if not dry_run:
        for e in gone:
            for p in (e.path.with_name(e.path.name + ".sha256"), e.path):   # the sidecar first: a miss, not half
                p.unlink(missing_ok=True)
        for x in stray:
            if x.path.is_dir() and not x.path.is_symlink():
                shutil.rmtree(x.path, ignore_errors=True)
            else:
                x.path.unlink(missing_ok=True)
    return gone, stray, left


def prune_report(root: Path, gone: list[Entry], stray: list[Stray], left: int, dry_run: bool,
                 max_bytes: int | None, show: int = 10) -> str:
    verb = "would remove" if dry_run else "removed"
    lines = [f"kda2 cache: {root}: {verb} {len(gone)} entries ({_human(sum(e.size for e in gone))}) and "
             f"{len(stray)} stray files ({_human(sum(x.size for x in stray))}); the entries left take {_human(left)}"]
    if max_bytes is not None and left > max_bytes:
        lines[0] += (f" (over {_human(max_bytes)}: the rest was used in the last {GRACE_S // 60} min, which prune "
                     f"keeps)")
    if dry_run:
        paths = [str(x.path) for x in stray] + [str(e.path) for e in gone]
        lines += [f"  {p}" for p in paths[:show]]
        if len(paths) > show:
            lines.append(f"  … and {len(paths) - show} more")
    return "\n".join(lines)
