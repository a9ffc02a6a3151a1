"""A loaded `lib<spec>.<arch>.so`: its manifest facts, bound C functions, and the raw launch entry.

Construction (in `kda2.runtime.loader`) has already verified the files; this module only binds and
cross-checks. The hot path (`Library._fwd`, `Library.args`) is kept to plain attributes so that the
torch API spends its per-call budget on validation, not on lookups.
"""
from __future__ import annotations

import ctypes
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from kda2.artifact.manifest import MANIFEST_ONLY_ROW_FIELDS  # stdlib only: safe for the runtime
from kda2.runtime import abi
from kda2.runtime.errors import ArtifactError, KDA2LaunchError

#: CUDA_ERROR_NO_BINARY_FOR_GPU (= cudaErrorNoKernelImageForDevice): no code for this GPU in the .so.
_CUDA_NO_KERNEL_IMAGE = 209


@dataclass(frozen=True)
class Features:
    """What the library was compiled to accept (manifest `features`)."""

    gate_modes: tuple[str, ...]
    qk_l2norm: bool
    beta_sigmoid: bool
    gva_ratios: tuple[int, ...]
    varlen: bool
    state_dtype: str
    state_layouts: tuple[str, ...]
    input_dtypes: tuple[str, ...] = ("bf16",)
    bf16_decode_state: bool = False

    @classmethod
    def from_manifest(cls, f: Mapping[str, Any], where: str) -> "Features":
        try:
            return cls(
                gate_modes=tuple(f["gate_modes"]),
                qk_l2norm=bool(f["qk_l2norm"]),
                beta_sigmoid=bool(f["beta_sigmoid"]),
                gva_ratios=tuple(int(r) for r in f["gva_ratios"]),
                varlen=bool(f["varlen"]),
                state_dtype=str(f["state_dtype"]),
                state_layouts=tuple(f["state_layouts"]),
                input_dtypes=tuple(f.get("input_dtypes", ("bf16",))),  # manifests before issue 13: bf16
                bf16_decode_state=bool(f.get("bf16_decode_state", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"{where}: field 'features' is malformed ({exc!r})") from exc


#: Kernel families this runtime can drive (manifest `family`).
FAMILIES = ("recurrent", "chunk")


class Library:
    """One loaded KDA library (family recurrent or chunk). Use `kda2.runtime.load(...)` to get one (it caches)."""

    def __init__(self, manifest_path: Path, manifest: Mapping[str, Any], so_path: Path):
        self.manifest_path = manifest_path
        self.root = manifest_path.parent
        self.manifest = manifest
        self.so_path = so_path
        where = str(manifest_path)
        try:
            self.spec: str = manifest["spec"]
            self.arch: str = manifest["arch"]
            self.family: str = manifest["family"]
            self.k: int = int(manifest["k"])
            self.v: int = int(manifest["v"])
            self.buckets: tuple[int, ...] = tuple(sorted(int(b) for b in manifest["buckets"]))
            self.variants: list[dict] = list(manifest["variants"])
            self.dispatch: list[dict] = list(manifest["dispatch"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"{where}: manifest is missing or has a malformed field ({exc!r})") from exc
        if self.family not in FAMILIES:
            raise ArtifactError(f"{where}: family {self.family!r} is not supported by this runtime "
                                f"(allowed: {', '.join(map(repr, FAMILIES))})")
        self.features = Features.from_manifest(manifest.get("features", {}), where)
        self.max_bucket: int = self.buckets[-1]
        # (layout, bucket) whose variants, in every batch class, write per-token states / take bf16 states.
        cfg = {int(v["index"]): v.get("config", {}) for v in self.variants}
        rows = [(d["state_layout"], int(d["bucket"]), cfg.get(int(d["index"]), {})) for d in self.dispatch]
        lacking = {"intermediate": {(lay, b) for lay, b, c in rows if not c.get("intermediate")},
                   "bf16_state": {(lay, b) for lay, b, c in rows if "bf16" not in c.get("state_dtypes", ())}}
        self._rows_with = {what: {(lay, b) for lay, b, _ in rows} - out for what, out in lacking.items()}

        self._dll = ctypes.CDLL(str(so_path))
        for name, (restype, argtypes) in abi.FUNCTIONS.items():
            try:
                fn = getattr(self._dll, name)
            except AttributeError as exc:
                raise ArtifactError(f"{so_path}: does not export {name}() of kda2/abi.h; "
                                    "rebuild it with this kda2 (`scons`)") from exc
            fn.restype, fn.argtypes = restype, argtypes
        # Bound once: the hot path calls self._fwd(addr, max_seqlen, stream) with no lookups.
        self._fwd = self._dll.kda2_fwd
        self._workspace_bytes = self._dll.kda2_workspace_bytes
        self._launch = self._dll.kda2_launch
        self._select = self._dll.kda2_select
        self._route = self._dll.kda2_route
        self._preload = self._dll.kda2_preload
        self._tls = threading.local()
        self._checked_devices: set[int] = set()
        self._cross_check()

    # -- load-time checks ------------------------------------------------------------------------
    def _cross_check(self) -> None:
        """The .so must describe itself exactly as the manifest does (guards against mixed builds)."""
        so, mf = self.so_path, self.manifest_path
        version = self._dll.kda2_abi_version()
        if version != abi.ABI_VERSION:
            raise ArtifactError(f"{so}: kda2_abi_version() = {version}, this runtime speaks ABI "
                                f"{abi.ABI_VERSION}; rebuild the library (`scons`) or use a matching kda2")
        raw = self._dll.kda2_library_json()
        try:
            info = json.loads(raw.decode() if raw else "")
        except ValueError as exc:
            raise ArtifactError(f"{so}: kda2_library_json() is not valid JSON ({exc})") from exc
        for key in ("spec", "arch", "family", "k", "v"):
            if key in ("family", "k", "v") and key not in info:  # not in libraries of older builds
                continue
            if info.get(key) != self.manifest[key]:
                raise ArtifactError(f"{so}: kda2_library_json() says {key}={info.get(key)!r} but {mf} "
                                    f"says {self.manifest[key]!r}; the build directory mixes two builds")
        # variants: ids in index order (the build writes plain ids), or {"id", "index"} objects
        so_ids = sorted((int(v.get("index", i)), v.get("id")) if isinstance(v, dict) else (i, v)
                        for i, v in enumerate(info.get("variants", [])))
        mf_ids = sorted((int(v["index"]), v["id"]) for v in self.variants)
        if so_ids != mf_ids:
            raise ArtifactError(f"{so}: variants {so_ids} differ from the manifest's {mf_ids} ({mf})")
        if "abi_version" in info and info["abi_version"] != abi.ABI_VERSION:
            raise ArtifactError(f"{so}: kda2_library_json() says abi_version={info['abi_version']}, "
                                f"this runtime speaks ABI {abi.ABI_VERSION}")
        if "dispatch" in info:
            # routing fields only: the manifest adds what the library does not route by (MANIFEST_ONLY_ROW_FIELDS)
            key = lambda d: sorted((k, v) for k, v in d.items() if k not in MANIFEST_ONLY_ROW_FIELDS)  # noqa: E731
            if sorted(map(key, info["dispatch"])) != sorted(map(key, self.dispatch)):
                raise ArtifactError(f"{so}: its dispatch table differs from the manifest's ({mf})")
        n = self._dll.kda2_num_variants()
        if n != len(self.variants):
            raise ArtifactError(f"{so}: kda2_num_variants() = {n}, manifest lists {len(self.variants)}")
        for row, entry in enumerate(self.dispatch):
            v_first = 1 if entry["state_layout"] == "v_first" else 0
            at = (v_first, int(entry["bucket"]), int(entry.get("min_chains", 0)))
            got, got_row = self._select(*at), self._route(*at)
            if got != int(entry["index"]) or got_row != row:
                raise ArtifactError(f"{so}: kda2_select/kda2_route({entry['state_layout']}, {entry['bucket']}, "
                                    f"{at[2]}) = {got}/row {got_row}, manifest dispatch says {entry['index']}/row "
                                    f"{row} ({mf})")

    def max_t_with(self, what: str, state_v_first: bool) -> int:
        """The longest sequence a call needing `what` ("intermediate": per-token states; "bf16_state": bf16
        states) may have on this layout: every bucket up to it routes to a variant built with it (0: none)."""
        layout = "v_first" if state_v_first else "k_first"
        best = 0
        for lay, bucket in sorted({(d["state_layout"], int(d["bucket"])) for d in self.dispatch}):
            if lay != layout:
                continue
            if (lay, bucket) not in self._rows_with[what]:
                break
            best = bucket
        return best

    def intermediate_max_t(self, state_v_first: bool) -> int:
        """The longest call that can keep per-token states: the decode rows from the first one built with them
        (T = 1 kernels are not: a call asking for them routes at intermediate_min_t)."""
        layout = "v_first" if state_v_first else "k_first"
        rows = sorted({int(d["bucket"]) for d in self.dispatch if d["state_layout"] == layout})
        have = [b for b in rows if (layout, b) in self._rows_with["intermediate"]]
        if not have:
            return 0
        best = 0
        for b in rows[rows.index(have[0]):]:
            if (layout, b) not in self._rows_with["intermediate"]:
                break
            best = b
        return best

    def intermediate_min_t(self, state_v_first: bool) -> int:
        """The max_seqlen to route a call keeping per-token states by: the smallest bucket built with them."""
        layout = "v_first" if state_v_first else "k_first"
        return min((b for lay, b in self._rows_with["intermediate"] if lay == layout), default=0)

    def check_device(self, device_index: int, capability: tuple[int, int]) -> None:
        """First use on a device: refuse a GPU this arch cannot run on (clearer than error 209), then
        load every variant into the device's context now rather than inside a later graph capture."""
        from kda2.runtime.device import arch_preference

        if self.arch not in arch_preference(capability):
            raise ArtifactError(
                f"{self.manifest_path}: built for {self.arch}, which cannot run on cuda:{device_index} "
                f"(compute capability {capability[0]}.{capability[1]}); build the spec for "
                f"{(arch_preference(capability) or ['a matching arch'])[0]}")
        self.preload(device_index)
        self._checked_devices.add(device_index)

    def preload(self, device_index: int = 0) -> None:
        """kda2_preload: load every variant's cubin into the current context (do this before capture)."""
        rc = self._preload()
        if rc == abi.ERR_NO_CONTEXT:
            ensure_context(device_index)
            rc = self._preload()
        if rc:
            raise self.error(rc)

    # -- launching ---------------------------------------------------------------------------------
    def args(self) -> abi.KDA2RecurrentArgs:
        """This thread's reusable args struct (the C side copies it during the call, so reuse is safe)."""
        a = getattr(self._tls, "args", None)
        if a is None:
            a = self._tls.args = abi.KDA2RecurrentArgs()
        return a

    def select(self, state_v_first: bool, max_seqlen: int, chains: int) -> int:
        """Variant index the dispatch table picks for a call of `chains` = N·HV state chains; raises
        KDA2LaunchError on a KDA2Status."""
        rc = self._select(1 if state_v_first else 0, int(max_seqlen), int(chains))
        if rc < 0:
            raise self.error(rc)
        return rc

    def route(self, state_v_first: bool, max_seqlen: int, chains: int) -> dict | None:
        """The dispatch row (manifest `dispatch` entry) kda2_route picks, or None where it picks none (a recurrent
        call longer than the largest bucket, a layout not built)."""
        row = self._route(1 if state_v_first else 0, int(max_seqlen), int(chains))
        return self.dispatch[row] if 0 <= row < len(self.dispatch) else None

    def workspace_bytes(self, args: abi.KDA2RecurrentArgs) -> int:
        """kda2_workspace_bytes: device scratch a launch with `args` needs (0 for recurrent libraries)."""
        n = self._workspace_bytes(ctypes.addressof(args))
        if n < 0:
            raise self.error(int(n))
        return int(n)

    def launch_raw(self, args: abi.KDA2RecurrentArgs, max_seqlen: int, stream_handle: int = 0) -> None:
        """kda2_fwd with caller-built args (raw device pointers); no validation at all.

        Runs in the calling thread's current CUDA context (the library uses the driver API).
        """
        rc = self._fwd(ctypes.addressof(args), int(max_seqlen), stream_handle or None)
        if rc:
            raise self.error(rc)

    def launch_variant(self, index: int, args: abi.KDA2RecurrentArgs, stream_handle: int = 0) -> None:
        """kda2_launch of one variant by index (what `kda2 tune` needs to time each candidate)."""
        rc = self._launch(int(index), ctypes.addressof(args), stream_handle or None)
        if rc:
            raise self.error(rc)

    def error(self, rc: int) -> KDA2LaunchError:
        """The exception for a non-zero return code (cudaError_t / CUresult > 0, KDA2Status < 0)."""
        msg = f"{self.so_path.name} (spec {self.spec}, {self.arch}): {abi.describe_rc(rc)}"
        if rc == _CUDA_NO_KERNEL_IMAGE:
            msg += f"; this GPU cannot run {self.arch} code, build the spec for this GPU's arch"
        return KDA2LaunchError(msg, rc)

    def __repr__(self) -> str:
        return (f"Library(spec={self.spec!r}, family={self.family!r}, arch={self.arch!r}, k={self.k}, v={self.v}, "
                f"path='{self.manifest_path}')")


def ensure_context(device_index: int) -> None:
    """Make the device's primary context current on this thread if no context is.

    The library launches through the driver API in the *current* context. torch (like any CUDA runtime
    user) works in the primary context, but a thread that has made no runtime call yet has none
    current; binding the primary context is exactly what the runtime would do on its first call.
    """
    from cuda.bindings import driver as cu

    def ok(res):
        err, *vals = res if isinstance(res, tuple) else (res,)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise KDA2LaunchError(f"CUDA driver call failed while binding a context: {cu.cuGetErrorName(err)[1]!r}",
                                  int(err))
        return vals[0] if vals else None

    ok(cu.cuInit(0))
    if int(ok(cu.cuCtxGetCurrent())) != 0:
        return
    ctx = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(device_index))))
    ok(cu.cuCtxSetCurrent(ctx))
