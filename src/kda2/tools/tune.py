"""`kda2 tune`: on a GPU, check every built candidate against the fp64 reference, time it, and record
the fastest correct one per (state layout, seq_len bucket) in kernel_specs/<spec>.lock.json.

The next build routes the dispatch table to the recorded winners (planner.plan_all(locks=...)); a lock that
names a variant the spec no longer produces is ignored with a warning. The lock is data for people
too: every candidate's time is in it, with the GPU and the date.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from kda2.artifact.abi import GATE_MODES
from kda2.artifact.atomic import write_text
from kda2.plan.lock import LOCK_SCHEMA, lock_path_for

def _shape(bucket: int) -> tuple[int, int]:
    """(N, T) to time a bucket at: decode buckets at N=256 (bandwidth), others at 8 sequences."""
    return (256, 1) if bucket <= 1 else (8, min(bucket, 256))


class _Case:
    """Random inputs of one shape in the library's layout, plus the packed launch arguments."""

    def __init__(self, torch, abi, lib, cfg: dict, N: int, T: int, H: int, HV: int, seed: int):
        K, V = cfg["k"], cfg["v"]
        gen = torch.Generator(device="cuda").manual_seed(seed)

        def randn(*shape, dtype=torch.float32):
            return torch.randn(*shape, generator=gen, device="cuda").to(dtype)

        modes = cfg["gate_modes"]
        self.mode = next(m for m in ("softplus", "lower_bound", "precomputed") if m in modes)
        self.v_first = cfg["state_layout"] == "v_first"
        self.q, self.k = randn(1, N * T, H, K, dtype=torch.bfloat16), randn(1, N * T, H, K, dtype=torch.bfloat16)
        self.v = randn(1, N * T, HV, V, dtype=torch.bfloat16)
        self.g = randn(1, N * T, HV, K) if self.mode != "precomputed" else \
            torch.nn.functional.logsigmoid(randn(1, N * T, HV, K)) / 16
        self.beta = randn(1, N * T, HV) if cfg["beta_sigmoid"] else torch.sigmoid(randn(1, N * T, HV))
        self.A_log, self.dt_bias = randn(HV) * 0.5, randn(HV * K)
        self.h0 = randn(N, HV, *((V, K) if self.v_first else (K, V))) * 0.1
        self.o = torch.full_like(self.v, float("nan"))
        self.ht = torch.full_like(self.h0, float("nan"))
        flags = (abi.FLAG_HAS_A_LOG | abi.FLAG_HAS_DT_BIAS) if self.mode != "precomputed" else 0
        if cfg["qk_l2norm"]:
            flags |= abi.FLAG_QK_L2NORM
        if cfg["beta_sigmoid"]:
            flags |= abi.FLAG_BETA_SIGMOID
        self.flags, self.N, self.T, self.H, self.HV, self.K = flags, N, T, H, HV, K
        a = abi.KDA2RecurrentArgs()
        a.q, a.k, a.v, a.g, a.beta = (t.data_ptr() for t in (self.q, self.k, self.v, self.g, self.beta))
        a.A_log, a.dt_bias, a.o = self.A_log.data_ptr(), self.dt_bias.data_ptr(), self.o.data_ptr()
        a.h0, a.ht = self.h0.data_ptr(), self.ht.data_ptr()
        a.cu_seqlens = a.state_indices = None
        a.N, a.T, a.H, a.HV = N, T, H, HV
        a.scale, a.lower_bound = K ** -0.5, -5.0
        a.gate_mode, a.flags, a.state_v_first = GATE_MODES[self.mode], flags, int(self.v_first)
        self.args = a

    def reference_error(self, torch) -> float:
        import numpy as np

        from kda2.reference import recurrent_kda_ref, relative_l2

        def np64(t):
            return t.detach().double().cpu().numpy()

        B = self.N
        o, ht = recurrent_kda_ref(
            np64(self.q).reshape(B, self.T, self.H, -1), np64(self.k).reshape(B, self.T, self.H, -1),
            np64(self.v).reshape(B, self.T, self.HV, -1), np64(self.g).reshape(B, self.T, self.HV, -1),
            np64(self.beta).reshape(B, self.T, self.HV), scale=self.K ** -0.5, initial_state=np64(self.h0),
            output_final_state=True, use_qk_l2norm_in_kernel=bool(self.flags & 1),
            use_gate_in_kernel=self.mode != "precomputed", use_beta_sigmoid_in_kernel=bool(self.flags & 2),
            A_log=np64(self.A_log), dt_bias=np64(self.dt_bias),
            lower_bound=-5.0 if self.mode == "lower_bound" else None, state_v_first=self.v_first)
        got_o = np64(self.o).reshape(o.shape)
        got_h = np64(self.ht)
        if not (np.isfinite(got_o).all() and np.isfinite(got_h).all()):
            return float("inf")
        return max(relative_l2(got_o, o), relative_l2(got_h, ht))


def _time_us(torch, launch, reps: int, rounds: int) -> float:
    for _ in range(3):
        launch()
    samples = []
    for _ in range(rounds):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            launch()
        e1.record()
        e1.synchronize()
        samples.append(e0.elapsed_time(e1) * 1e3 / reps)
    samples.sort()
    return samples[len(samples) // 2]


TUNABLE_FAMILIES = ("recurrent",)


def tunable(manifest: str | os.PathLike) -> None:
    """Raise ValueError unless `manifest` (a manifest.json or build/<spec>/<arch> directory) can be tuned.

    Reads only the manifest (no GPU, no library load), so a wrong artifact fails before any timing.
    """
    p = Path(manifest)
    path = p / "manifest.json" if p.is_dir() else p
    try:
        family = json.loads(path.read_text()).get("family")
    except (OSError, ValueError, AttributeError):
        return  # load() reports a missing or unreadable manifest with its usual message
    if family not in TUNABLE_FAMILIES:
        raise ValueError(f"{path}: kda2 tune supports family recurrent only; this is a {family} library "
                         f"(chunk variants are routed by the planner's rank: the tile agent's order per bucket)")


def tune(manifest: str | os.PathLike, lock: str | os.PathLike | None = None, quick: bool = False,
         log=print) -> dict[str, Any]:
    import torch

    tunable(manifest)

    from kda2.runtime import abi
    from kda2.runtime.loader import load

    lib = load(manifest)
    m = json.loads(Path(lib.manifest_path).read_text())
    lib.preload(torch.cuda.current_device())
    stream = torch.cuda.current_stream().cuda_stream
    by_id = {v["id"]: v for v in m["variants"]}
    # a dispatch row (layout, bucket) and the kernels the planner proposed for it
    groups = {f"{d['state_layout']}:{d['bucket']}": (d["bucket"], [by_id[i] for i in d["candidates"]])
              for d in m["dispatch"]}
    routes: dict[str, Any] = {}
    for key, (bucket, cands) in sorted(groups.items()):
        N, T = _shape(bucket)
        times: dict[str, Any] = {}
        for v in cands:
            idx, cfg = v["index"], v["config"]
            check = _Case(torch, abi, lib, cfg, N=2, T=min(bucket, 40), H=2, HV=4, seed=7 + idx)
            lib.launch_variant(idx, check.args, stream)
            torch.cuda.synchronize()
            err = check.reference_error(torch)
            if not err <= 5e-3:
                times[v["id"]] = {"error": err, "us": None, "rejected": "relative L2 error above 5e-3"}
                log(f"  {key:<14} {v['id']}  REJECTED: rel L2 {err:.2e} vs fp64 reference")
                continue
            cases = [_Case(torch, abi, lib, cfg, N=N, T=T, H=32, HV=32, seed=100 + r) for r in range(3)]
            it = iter(range(1 << 30))
            us = _time_us(torch, lambda: lib.launch_variant(idx, cases[next(it) % 3].args, stream),
                          reps=5 if quick else 20, rounds=3 if quick else 7)
            times[v["id"]] = {"us": round(us, 2), "error": err}
            log(f"  {key:<14} {v['id']}  v/warp {cfg['v_per_warp']:>2} warps {cfg['warps']} {cfg['staging']:<6} "
                f"N={N} T={T}: {us:9.1f} us  (rel L2 {err:.1e})")
            del cases
        ok = {vid: t for vid, t in times.items() if t["us"] is not None}
        if not ok:
            raise RuntimeError(f"{m['spec']}/{m['arch']} {key}: no candidate passed the reference check")
        best = min(ok, key=lambda vid: ok[vid]["us"])
        routes[key] = {"variant": best, "shape": {"N": N, "T": T, "H": 32}, "candidates": times}
    entry = {"gpu": torch.cuda.get_device_name(), "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
             "torch": torch.__version__, "library_sha256": m["library"]["sha256"], "routes": routes}
    path = Path(lock) if lock else lock_path_for(m["spec"])
    data = json.loads(path.read_text()) if path.is_file() else {"schema": LOCK_SCHEMA, "spec": m["spec"], "archs": {}}
    data["archs"][m["arch"]] = entry
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    log(f"kda2 tune: wrote {path}")
    return data
