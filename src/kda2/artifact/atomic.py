"""Atomic file writes (stdlib only, so the runtime may use it too).

Written to a temporary name beside the target, then renamed: a killed process never leaves a
half-written file under the real name. The temporary name carries the process and thread id because
SCons runs Python actions in threads of one process.
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path


def write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8", newline="\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def probe_dir(directory: str | os.PathLike) -> None:
    """Raise OSError unless a file can be created in `directory`: a temporary file, removed at once (os.access says
    yes for root, and for /proc)."""
    fd, probe = tempfile.mkstemp(prefix=".kda2-probe-", dir=directory)
    os.close(fd)
    os.unlink(probe)
