"""What a benchmark ran on (library versions, the device) and how its result JSON is written, shared by
every benchmark."""
from __future__ import annotations

import datetime as _dt
import json
import platform
import sys
from pathlib import Path

#: where results go without --out: a new folder per run under it (default_out)
BENCH_OUT = Path("bench_out")


def default_out(kind: str) -> Path:
    """./bench_out/<kind>-<UTC date>-<time>: a new folder per run, so a run never writes over an earlier one's."""
    return BENCH_OUT / f"{kind}-{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%d-%H%M%S')}"


def open_out(out_dir: Path | None, kind: str, names: tuple[str, ...]) -> Path:
    """The folder of a run that is about to measure: out_dir, else a new default_out(kind) (said on stdout). Made only
    now, so a run stopped by its arguments, the GPU or the library leaves nothing; `names`, the files of an earlier
    run there, are removed, so that an interrupted run (or one without matplotlib's PNGs) does not leave its JSON
    beside another run's tables and charts."""
    if out_dir is None:
        out_dir = default_out(kind)
        print(f"kda2 bench {kind}: results go to {out_dir} (--out DIR to choose)", flush=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        (out_dir / name).unlink(missing_ok=True)
    return out_dir


def write_result(result: dict, path: Path) -> None:
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")


def fail(message: str, code: int) -> int:
    """Say why the run stopped before it measured anything, in the CLI's one line `kda2: error: ...` on stderr;
    returns `code`. Nothing is written: --out keeps an earlier run's results whole (open_out)."""
    print(f"kda2: error: {message}", file=sys.stderr)
    return code


def start_peer(result: dict, key: str, label: str, use: bool, make, describe, flag: str) -> object | None:
    """A peer implementation for the same-process comparison (`make()`), or None with the reason recorded in
    result[key] and result["notes"]; `describe(peer)` adds what the JSON says about the entry used."""
    if not use:
        result[key] = {"available": False, "error": f"disabled with {flag}"}
        return None
    try:
        peer = make()
        result[key] = {"available": True, **describe(peer)}
        return peer
    except Exception as exc:  # noqa: BLE001 - the run goes on without the peer, saying why
        result[key] = {"available": False, "error": f"{type(exc).__name__}: {exc}"}
        result["notes"].append(f"{label} not benchmarked: {type(exc).__name__}: {exc}")
        print(f"{label} not benchmarked: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def start_fla(result: dict, use_fla: bool, make, describe) -> object | None:
    """The FLA baseline for the same-process comparison (`make()`), or None with the reason recorded in
    result["fla"] and result["notes"]; `describe(fla)` adds what the JSON says about the FLA entry used."""
    return start_peer(result, "fla", "FLA", use_fla, make, describe, "--no-fla")


def versions(torch) -> dict:
    from importlib import metadata

    import kda2

    v = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
         "kda2": kda2.__version__}
    for dist in ("triton", "fla-core", "flash-linear-attention", "cuda-bindings", "cuda-core", "nvidia-cudnn-frontend"):
        try:
            v[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        from cuda.bindings import driver as cu

        err, ver = cu.cuDriverGetVersion()
        v["cuda_driver"] = f"{ver // 1000}.{ver % 1000 // 10}"
    except Exception:  # noqa: BLE001 - informational only
        pass
    return v


def device(torch) -> dict:
    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "capability": f"{p.major}.{p.minor}", "sms": p.multi_processor_count,
            "memory_GB": round(p.total_memory / 1e9, 1), "l2_bytes": getattr(p, "L2_cache_size", None)}
