"""Forced splits (kda2.chunk_kda(split=s)) against the library's choice on the shapes whose chains leave SMs idle,
with the combine on 8 columns: the benchmark's timing (GPU spin, CUDA events, rotating input sets) and inputs.
Usage: python splits.py LIBRARY OUT.json"""
import json
import sys

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer
from kda2.runtime.loader import load

lib = load(sys.argv[1])
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = {"device": torch.cuda.get_device_name(), "library": sys.argv[1], "rows": []}
for sid, gate in (("P6", "softplus"), ("K1", "lower_bound"), ("K3", "lower_bound"), ("K4", "lower_bound"),
                  ("K8", "lower_bound"), ("K7", "lower_bound")):
    (s,) = bc.resolve_shapes([sid])
    R = bc.n_sets(s, l2)
    sets, shared = bc.make_sets(torch, s, R, True, 0)
    row = {"shape": s.label, "gate": gate, "ms": {}}
    for split in (None, 1, 2, 3, 4, 6, 8):
        def run(i, split=split):
            x = sets[i]
            return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                                  cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"], dt_bias=shared["dt_bias"],
                                  library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"], split=split,
                                  **bc.GATE_OPTIONS[gate], **bc.OPTIONS)
        try:
            run(0)
            row["ms"][str(split)] = round(timer.kernel(run, R, 20).median_ms, 4)
        except Exception as exc:  # noqa: BLE001 - a split the call refuses (too few chunks)
            row["ms"][str(split)] = f"{type(exc).__name__}: {exc}"[:120]
    res["rows"].append(row)
    print(f"{s.label:36s} {gate:11s} " + "  ".join(f"{k}:{v}" for k, v in row["ms"].items()), flush=True)
json.dump(res, open(sys.argv[2], "w"), indent=1)
