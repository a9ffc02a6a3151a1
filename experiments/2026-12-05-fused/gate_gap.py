"""The fused kernel alone on one shape, the gates alternating round by round (no library or peer in between), with
the timer of `kda2 bench` and with plain back-to-back events: whether the softplus gate's extra time in
`time_fused.py` (P3: 0.605 against 0.538 ms, H100, call 26) is the kernel's at boost clocks — under ncu's fixed clocks
both gates took the same time (call 28); the SM clock NVML reports under a queue of calls is printed beside.

usage: python gate_gap.py SHAPE [ROUNDS]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "gpu")]

from _check_kernels import Fused16  # noqa: E402

from kda2.bench import chunk as bc  # noqa: E402
from kda2.bench.timing import Timer  # noqa: E402

shape, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
s = bc.resolve_shapes([shape])[0]
fused = Fused16(torch, Path(tempfile.mkdtemp()))
R = bc.n_sets(s, torch.cuda.get_device_properties(0).L2_cache_size)
sets, shared = bc.make_sets(torch, s, R, True, seed=4321 + s.tokens + s.H)
fo = [torch.empty_like(x["v"]) for x in sets]
fh = [torch.empty_like(x["h0"]) for x in sets]
timer = Timer(torch)


def runner(gate):
    def run(i):
        x = sets[i]
        fused(x["q"], x["k"], x["v"], x["g"], x["beta"], o=fo[i], h0=x["h0"], ht=fh[i], A_log=shared["A_log"],
              dt_bias=shared["dt_bias"], cu_seqlens=shared["cu_seqlens"], gate=gate, lower_bound=-5.0, v_first=True)
    return run


def back_to_back(run, n=20):
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for i in range(n):
        run(i % R)
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / n


def sm_clock(run) -> str:
    """The SM clock NVML reports while the kernel runs back to back (what ncu's fixed clocks hide), or why not."""
    try:
        for i in range(40):
            run(i % R)
        mhz = torch.cuda.clock_rate()   # NVML's current SM clock, read while the queue still runs
        torch.cuda.synchronize()
        return f"{mhz} MHz"
    except Exception as exc:  # noqa: BLE001 - NVML is optional on the device image
        torch.cuda.synchronize()
        return f"n/a ({type(exc).__name__})"


print(torch.cuda.get_device_name(0), s.label, f"{R} input sets")
for r in range(rounds):
    for gate in ("softplus", "lower_bound"):
        run = runner(gate)
        st = timer.kernel(run, R, reps=20)
        print(f"round {r} {gate:12s} timer median {st.median_ms:.3f} ms  back-to-back {back_to_back(run):.3f} ms  "
              f"SM clock under load {sm_clock(run)}", flush=True)
