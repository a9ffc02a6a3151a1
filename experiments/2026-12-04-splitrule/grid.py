"""Forced splits (kda2.chunk_kda(split=s)) against unsplit and the library's own choice on a grid of few-chain shapes
(32-256 chunks, 1-16 chains), the benchmark's timing (GPU spin, CUDA events, rotating input sets) and inputs,
softplus gate, v_first states; HEAD_DIM=64|256 for the other head dims (K = V). Usage: python grid.py LIBRARY OUT.json
[SHAPE ...]"""
import json
import os
import sys
import time

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer
from kda2.runtime.loader import load

DEFAULT = [f"B{b}T{t}H{h}" for b, t in ((1, 2048), (1, 3072), (1, 4096), (1, 5120), (1, 6144), (1, 8192), (1, 12288),
                                        (1, 16384), (2, 4096), (4, 3072))
           for h in (1, 2, 4, 6, 8, 10, 12, 16)]
SPLITS = (None, 1, 2, 3, 4, 5, 6, 8, 12, 16)
KV = int(os.environ.get("HEAD_DIM", "128"))

lib = load(sys.argv[1])
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = {"device": torch.cuda.get_device_name(), "library": sys.argv[1], "gate": "softplus", "head_dim": KV, "rows": []}
t0 = time.time()
for s in bc.resolve_shapes(sys.argv[3:] or DEFAULT):
    R = bc.n_sets(s, l2, KV, KV)
    sets, shared = bc.make_sets(torch, s, R, True, 0, KV, KV)
    nch = -(-s.T // 64)
    row = {"shape": s.label, "chains": s.B * s.H, "chunks": nch, "ms": {}}
    for split in SPLITS:
        if split is not None and split > 1 and nch // split < 8:
            continue   # segments under 8 chunks: not a candidate of any rule
        def run(i, split=split):
            x = sets[i]
            return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                                  cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"], dt_bias=shared["dt_bias"],
                                  library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"], split=split,
                                  **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
        try:
            run(0)
            row["ms"][str(split)] = round(timer.kernel(run, R, 20).median_ms, 4)
        except Exception as exc:  # noqa: BLE001 - a split the call refuses
            row["ms"][str(split)] = f"{type(exc).__name__}: {exc}"[:120]
    res["rows"].append(row)
    del sets, shared
    print(f"{time.time() - t0:6.1f}s {s.label:24s} " + " ".join(f"{k}:{v}" for k, v in row["ms"].items()), flush=True)
    json.dump(res, open(sys.argv[2], "w"), indent=1)
