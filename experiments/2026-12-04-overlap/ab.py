"""Two libraries alternating in one process, the library's default launch, every head's A_log at log(a) ("drawn": the
benchmark's A_log ~ 0.5·randn): what the prep's quarter anchors (chunk.cuh exact) change at the benchmark's decay and
at stronger ones. Usage: python ab.py LIB_A LIB_B OUT.json A_VALUES SHAPE ... (A_VALUES: comma list, e.g. drawn,4,8)"""
import json
import math
import sys

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer
from kda2.runtime.loader import load

libs = {"A": load(sys.argv[1]), "B": load(sys.argv[2])}
a_values = sys.argv[4].split(",")
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = {"device": torch.cuda.get_device_name(), "libraries": sys.argv[1:3], "rows": []}
for s in bc.resolve_shapes(sys.argv[5:]):
    R = bc.n_sets(s, l2)
    sets, shared = bc.make_sets(torch, s, R, True, 0)
    drawn = shared["A_log"].clone()
    for a in a_values:
        shared["A_log"] = drawn.clone() if a == "drawn" else torch.full_like(drawn, math.log(float(a)))
        row = {"shape": s.label, "a": a, "ms": {"A": [], "B": []}, "max_abs_diff": None}
        outs, runs = {}, {}
        for name, lib in libs.items():
            def run(i, lib=lib):
                x = sets[i]
                return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                                      state_v_first=True, cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"],
                                      dt_bias=shared["dt_bias"], library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"],
                                      **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
            outs[name] = run(0)
            runs[name] = run
        o_a, o_b = outs["A"][0].float(), outs["B"][0].float()
        row["max_abs_diff"] = float((o_a - o_b).abs().max())
        row["rel_l2_diff"] = float((o_a - o_b).norm() / o_a.norm())
        row["finite"] = bool(torch.isfinite(o_b).all())
        for _ in range(2):
            for name in ("A", "B"):
                row["ms"][name].append(round(timer.kernel(runs[name], R, 20).median_ms, 4))
        res["rows"].append(row)
        print(f"{s.label:24s} a={a:5s} A={row['ms']['A']} B={row['ms']['B']} "
              f"rel_l2(A-B)={row['rel_l2_diff']:.2e} finite={row['finite']}", flush=True)
        json.dump(res, open(sys.argv[3], "w"), indent=1)
    del sets, shared
