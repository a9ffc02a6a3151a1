"""`kda2 cache info | prune`: the local content-addressed cache (`cache/`, or $KDA2_CACHE_DIR) that every build
fills and nothing else empties. Every signature change (a kda2 upgrade, an edit to build code, another toolkit)
leaves the old entries behind, so the directory only grows.

Layout (kda2.compile.cache, SCons' CacheDir): `<dir>/<2 hex>/<signature>` and its `<signature>.sha256` sidecar,
written after the entry; an entry without its sidecar is a miss (a push in flight, or one that died). A sidecar's
mtime is the entry's last use: the build sets it when it pushes the entry or retrieves it (verified).

Pruning removes whole entries, least recently used first, sidecar before entry, so a build reading the cache at the
same time sees a miss, never half an entry; nothing used in the last `GRACE_S` seconds is removed (a concurrent
build may be about to copy it), nor a sidecar-less entry that young (its writer may still be pushing). Stdlib only.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

#: what `kda2 cache prune` never removes: entries used, and pushes begun, this recently (seconds)
GRACE_S = 600
_SIG = re.compile(r"[0-9a-f]{32,128}")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", re.I)
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])", re.I)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class CacheToolError(ValueError):
    """A bad argument or an unusable cache directory; the message says which and what is allowed."""


@dataclass(frozen=True)
class Entry:
    path: Path
    size: int           # the entry and its sidecar
    last_used: float    # the sidecar's mtime (the entry's own mtime where it has none)
    paired: bool        # its sidecar is there (else a miss for every build)


def default_dir() -> Path:
    """Where builds put the cache: $KDA2_CACHE_DIR, else ./cache (the SConstruct's default)."""
    return Path(os.environ.get("KDA2_CACHE_DIR") or "cache")


def parse_size(text: str) -> int:
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise CacheToolError(f"--max-size {text!r}: a size such as 500M, 2G or 1.5G (K, M, G, T: powers of 1024)")
    return int(float(m[1]) * _UNITS[m[2].upper()])


def parse_age(text: str) -> float:
    m = _AGE.fullmatch(text.strip())
    if not m:
        raise CacheToolError(f"--older-than {text!r}: an age such as 30d, 12h or 45m (s, m, h, d)")
    return float(m[1]) * _SECONDS[m[2].lower()]


def scan(root: Path) -> tuple[list[Entry], list[Path]]:
    """The entries under `root`, and the stray files: sidecars without their entry, dead temporaries."""
    if not root.is_dir():
        raise CacheToolError(f"{root}: no cache directory here (a build makes it; $KDA2_CACHE_DIR or --dir names "
                             f"another)")
    if not (root / "config").is_file():
        raise CacheToolError(f"{root}: not a kda2 / SCons cache (no config file); refusing to touch it")
    entries, stray = [], []
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and len(p.name) <= 4):
        names = {p.name: p for p in sub.iterdir() if p.is_file()}
        for name, p in names.items():
            if name.endswith(".sha256"):
                if name[:-7] not in names:
                    stray.append(p)
                continue
            if not _SIG.fullmatch(name):
                stray.append(p)   # SCons' and kda2's temporaries of a push that died
                continue
            side = names.get(name + ".sha256")
            st = p.stat()
            entries.append(Entry(p, st.st_size + (side.stat().st_size if side else 0),
                                 side.stat().st_mtime if side else st.st_mtime, side is not None))
    return entries, stray


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
    entries, stray = scan(root)
    now = time.time()
    total = sum(e.size for e in entries)
    lines = [f"{root}: {len(entries)} entries, {_human(total)}"]
    if entries:
        lines.append(f"  last used: newest {_ago(max(e.last_used for e in entries), now)} ago, oldest "
                     f"{_ago(min(e.last_used for e in entries), now)} ago")
    unpaired = [e for e in entries if not e.paired]
    if unpaired:
        lines.append(f"  {len(unpaired)} without their sha256 sidecar (a miss for every build until one makes them "
                     f"again)")
    if stray:
        lines.append(f"  {len(stray)} stray files (sidecars without an entry, temporaries of dead pushes)")
    lines.append("  `kda2 cache prune --max-size SIZE | --older-than AGE` removes the least recently used")
    return "\n".join(lines)


def prune(root: Path, max_bytes: int | None = None, older_than_s: float | None = None, dry_run: bool = False,
          now: float | None = None) -> tuple[list[Entry], list[Path], int]:
    """Remove entries last used more than `older_than_s` ago, then the least recently used until the cache holds
    at most `max_bytes`; and stray files. Returns (entries removed, strays removed, bytes left)."""
    if max_bytes is None and older_than_s is None:
        raise CacheToolError("prune needs --max-size SIZE and/or --older-than AGE (what to keep)")
    now = time.time() if now is None else now
    entries, stray = scan(root)
    stray = [p for p in stray if now - p.stat().st_mtime > GRACE_S]
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
        for p in stray:
            p.unlink(missing_ok=True)
    return gone, stray, left


def prune_report(root: Path, gone: list[Entry], stray: list[Path], left: int, dry_run: bool,
                 max_bytes: int | None) -> str:
    verb = "would remove" if dry_run else "removed"
    text = (f"kda2 cache: {root}: {verb} {len(gone)} entries ({_human(sum(e.size for e in gone))}) and "
            f"{len(stray)} stray files; {_human(left)} left")
    if max_bytes is not None and left > max_bytes:
        text += (f" (over {_human(max_bytes)}: the rest was used in the last {GRACE_S // 60} min, which prune "
                 f"keeps)")
    return text
