"""Which GPU we are on, and which built archs can run on it."""
from __future__ import annotations

import sys

from kda2.runtime.errors import ArtifactError


def no_device_error(cause: BaseException, load: str = "lib = kda2.load(<build or bundle directory>, arch='sm_90a')"
                    ) -> ArtifactError:
    """No GPU is visible (`cause`: the driver's or pathfinder's error): say what runs where, and how to load a
    build anyway (`load`: a kda2.load(..., arch=...) call; the loader names the build's own path and archs)."""
    return ArtifactError(
        f"cannot determine the GPU's compute capability ({type(cause).__name__}: {cause}): no CUDA device is "
        "visible. The kernels run only on an NVIDIA GPU, with every tensor argument on it (device 'cuda'). To load "
        f"a build without one, name its arch: {load}; fused_recurrent_kda / chunk_kda take no arch=, pass them "
        "library=lib")


def arch_preference(capability: tuple[int, int]) -> list[str]:
    """Built archs that run on a device of this compute capability, best first.

    SASS runs only on its own major version, so an sm_80 cubin serves every 8.x part but nothing newer;
    sm_90a (Hopper-only instructions) is preferred over plain sm_90 on a 9.0 part.
    """
    major, minor = capability
    if (major, minor) == (9, 0):
        return ["sm_90a", "sm_90", "sm_80"]  # sm_80 SASS does not run on 9.0, but PTX-carrying builds may
    if major == 8:
        exact = f"sm_8{minor}"
        return [exact, "sm_80"] if exact != "sm_80" else ["sm_80"]
    return []


def current_capability(device_index: int | None = None) -> tuple[int, int]:
    """Compute capability of `device_index` (default: torch's current device, else device 0).

    Uses torch when it is already imported (cheap, and it honours torch's current device); otherwise
    the CUDA driver through cuda.bindings, so a deployment without torch can still pick an arch.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        idx = torch.cuda.current_device() if device_index is None else device_index
        return tuple(torch.cuda.get_device_capability(idx))  # type: ignore[return-value]
    try:
        from cuda.bindings import driver as cu

        def ok(res):
            err, *vals = res
            if err != cu.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"{cu.cuGetErrorName(err)[1]!r}")
            return vals[0] if vals else None

        ok(cu.cuInit(0))
        dev = ok(cu.cuDeviceGet(device_index or 0))
        attr = cu.CUdevice_attribute
        major = ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
        minor = ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        return int(major), int(minor)
    except Exception as exc:  # noqa: BLE001 - no driver raises a pathfinder error, not a CUresult
        raise no_device_error(exc) from exc
