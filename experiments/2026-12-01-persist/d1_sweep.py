"""Every T = 1 candidate of a recurrent library, forced, on the benchmark's one-sequence decode step (D1: N = 1,
H = HV = 32, K = V = 128, fp32 pool in place, softplus gate in kernel): per-call time under CUDA-graph replay and
kernel time, the harness and inputs of `kda2 bench recurrent` (bench/recurrent.py make_sets, Timer). Then the
same for D2 (N = 64). Prints one JSON row per (layout, variant), fastest first.
usage: python d1_sweep.py MANIFEST"""
import json
import sys

import torch

from kda2.bench.recurrent import OPTIONS, SHAPES, make_sets, n_sets
from kda2.bench.timing import Timer
from kda2.runtime import fused_recurrent_kda_pool, load

lib = load(sys.argv[1])
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
rows = []
for sid in ("D1", "D2"):
    s = next(x for x in SHAPES if x.id == sid)
    for layout in ("v_first", "k_first"):
        v_first = layout == "v_first"
        ids = {d["variant"] for d in lib.dispatch if d["state_layout"] == layout and int(d["bucket"]) == 1}
        cands = [v for v in lib.variants if v["config"]["state_layout"] == layout and
                 any(v["id"] in d.get("candidates", []) or v["id"] in ids for d in lib.dispatch
                     if d["state_layout"] == layout and int(d["bucket"]) == 1)]
        R = n_sets(s, 128, 128, l2)
        sets, shared = make_sets(torch, s, 128, 128, R, v_first, seed=1234 + s.N * 7 + s.T)
        outs = [torch.empty_like(x["v"]) for x in sets]
        pool = torch.randn(R * s.N, s.H, 128, 128, device="cuda") * 0.1
        idx = [torch.arange(r * s.N, (r + 1) * s.N, dtype=torch.int32, device="cuda") for r in range(R)]
        for v in cands:
            index = int(v["index"])
            lib._fwd = lambda args, max_seqlen, stream, index=index: lib._launch(index, args, stream)

            def call(i):
                x = sets[i]
                return fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx[i],
                                                A_log=shared["A_log"], dt_bias=shared["dt_bias"], state_v_first=v_first,
                                                library=lib, out=outs[i], **OPTIONS)
            k_us = timer.kernel(call, R, 100).median_ms * 1e3
            g_us = timer.graph(call, R, replays=20).median_ms * 1e3
            c = v["config"]
            rows.append(dict(shape=sid, layout=layout, id=v["id"], graph_us=round(g_us, 2), kernel_us=round(k_us, 2),
                             v_per_warp=c["v_per_warp"], lane_cols=c.get("lane_cols"), warps=c["warps"],
                             k_map=c["k_map"], staging=c["staging"], reduce=c["reduce"],
                             min_ctas=c.get("min_ctas"), persistent=bool(c.get("persistent"))))
        del sets, outs, pool
        torch.cuda.empty_cache()
for r in sorted(rows, key=lambda r: (r["shape"], r["layout"], r["graph_us"])):
    print(json.dumps(r))
