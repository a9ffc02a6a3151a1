"""What a benchmark ran on (library versions, the device) and how its result JSON is written, shared by
every benchmark."""
from __future__ import annotations

import json
import platform
import sys
from pathlib import Path


def write_result(result: dict, path: Path) -> None:
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")


def fail(result: dict, path: Path, message: str, code: int) -> int:
    """Record why the run stopped in the result JSON (it is still written), say it on stderr; returns `code`."""
    result["error"] = message
    write_result(result, path)
    print(message, file=sys.stderr)
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
