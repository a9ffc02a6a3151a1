"""What a benchmark ran on: library versions and the device, recorded in every result JSON."""
from __future__ import annotations

import platform


def versions(torch) -> dict:
    from importlib import metadata

    import kda2

    v = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
         "kda2": kda2.__version__}
    for dist in ("triton", "fla-core", "flash-linear-attention", "cuda-bindings", "cuda-core"):
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
