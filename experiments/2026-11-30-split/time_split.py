"""Same-run timing of the chunk library on P1–P6 (softplus gate, V-first, FLA's layer options) with the exact
split forced to 1, 2, 4, 8, 16 and left to the library (auto); with the split's outputs vs the unsplit ones.
Usage: python time_split.py BUILD_DIR OUT_JSON"""
import json
import sys

import torch

import kda2
from kda2.bench.chunk import GATE_OPTIONS, OPTIONS, SHAPES, make_sets, n_sets
from kda2.bench.timing import Timer
from kda2.runtime import loader

lib = loader.load(sys.argv[1])
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
rows = []
for s in SHAPES:
    R = n_sets(s, l2)
    sets, shared = make_sets(torch, s, R, True, 1234)
    outs = [torch.empty_like(x["v"]) for x in sets]
    hts = [torch.empty(shared["sshape"], device="cuda") for _ in sets]

    def runner(split):
        def run(i):
            x = sets[i]
            return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                                  cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"], dt_bias=shared["dt_bias"],
                                  library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"], out=outs[i],
                                  final_state_out=hts[i], split=split, **GATE_OPTIONS["softplus"], **OPTIONS)
        return run
    runner(1)(0)
    torch.cuda.synchronize()
    o1, h1 = outs[0].clone(), hts[0].clone()
    row = {"shape": s.label}
    nch = -(-max(s.seqlens or (s.T,)) // 64)
    for split in (1, 2, 4, 8, 16, None):
        if split and split > nch:
            continue
        fn = runner(split)
        fn(0)
        torch.cuda.synchronize()
        d_o = float((outs[0].double() - o1.double()).norm() / o1.double().norm())
        d_h = float((hts[0].double() - h1.double()).norm() / h1.double().norm())
        st = timer.kernel(fn, R, reps=30)
        key = "auto" if split is None else f"s{split}"
        row[key] = {"ms": round(st.median_ms, 4), "diff_o": d_o, "diff_state": d_h}
        print(s.id, key, f"{st.median_ms:.4f} ms", f"o {d_o:.1e} state {d_h:.1e}", flush=True)
    rows.append(row)
    del sets, shared, outs, hts
    torch.cuda.empty_cache()
json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, open(sys.argv[2], "w"), indent=1)
