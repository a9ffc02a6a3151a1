"""Per-kernel GPU time of kda2's chunk calls (prep, state pass, split fold / combine, memsets), from CUPTI's kernel
records (torch.profiler), for the benchmark's shapes and inputs (kda2.bench.chunk make_sets, the routed library's
own choices of split and overlap). One untimed call, then CALLS profiled calls; per kernel name the mean time a call,
and the call's CUDA-event time for comparison (kernels that overlap sum to more than it).
Usage: python kernels.py LIBRARY OUT.json [SHAPE:GATE ...]   (default: P1..P6 softplus, K1..K10 lower_bound)"""
import json
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from kda2.bench import chunk as bc
from kda2.runtime.loader import load

CALLS = 5
lib = load(sys.argv[1])
want = sys.argv[3:] or [f"P{i}:softplus" for i in range(1, 7)] + [f"K{i}:lower_bound" for i in range(1, 11)]
ours = bc.Ours(lib)
out = {"device": torch.cuda.get_device_name(), "library": sys.argv[1], "calls": CALLS, "rows": []}
for item in want:
    sid, gate = item.split(":")
    (s,) = bc.resolve_shapes([sid])
    sets, shared = bc.make_sets(torch, s, 1, True, 0)
    run = ours.call(sets, shared, gate, True, None, None)
    run(0)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(CALLS)]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for a, b in ev:
            a.record()
            run(0)
            b.record()
        torch.cuda.synchronize()
    per = defaultdict(float)
    for e in prof.events():
        if e.device_type.name == "CUDA":
            per[e.name] += getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)
    per = {k: v / CALLS for k, v in per.items()}
    call_us = sorted(a.elapsed_time(b) * 1e3 for a, b in ev)[CALLS // 2]
    row = {"shape": s.label, "gate": gate, "call_us": call_us,
           "kernels_us": {k: round(v, 2) for k, v in sorted(per.items(), key=lambda kv: -kv[1])}}
    out["rows"].append(row)
    print(f"{s.label:40s} {gate:11s} call {call_us:8.1f} us  " +
          "  ".join(f"{k[:60]} {v:.1f}" for k, v in row["kernels_us"].items()), flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
