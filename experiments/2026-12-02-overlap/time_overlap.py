"""Same-run timing of the routed chunk library with the state pass beside the prep asked for (overlap=True), refused
(False) and left to the library (None), on the shapes whose state CTAs hold few SMs (P6 and cuDNN's K1-K10, softplus
and lower-bound gates), with the outputs compared bit for bit with the plain ones.
Usage: python time_overlap.py LIBRARY OUT_JSON"""
import json
import sys

import torch

import kda2
from kda2.bench.chunk import GATE_OPTIONS, K3_SHAPES, OPTIONS, SHAPES, make_sets, n_sets
from kda2.bench.timing import Timer
from kda2.runtime import loader

lib = loader.load(sys.argv[1])
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
rows = []
for s in [x for x in SHAPES if x.id == "P6"] + K3_SHAPES:
    for gate in ("softplus", "lower_bound"):
        R = n_sets(s, l2)
        sets, shared = make_sets(torch, s, R, True, 1234)
        outs = [torch.empty_like(x["v"]) for x in sets]
        hts = [torch.empty(shared["sshape"], device="cuda") for _ in sets]

        def runner(overlap):
            def run(i):
                x = sets[i]
                return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                                      state_v_first=True, cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"],
                                      dt_bias=shared["dt_bias"], library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"],
                                      out=outs[i], final_state_out=hts[i], overlap=overlap, **GATE_OPTIONS[gate],
                                      **OPTIONS)
            return run
        runner(False)(0)
        torch.cuda.synchronize()
        o1, h1 = outs[0].clone(), hts[0].clone()
        row = {"shape": s.id, "label": s.label, "gate": gate}
        for key, ov in (("plain", False), ("overlap", True), ("auto", None)):
            fn = runner(ov)
            outs[0].fill_(float("nan"))
            hts[0].fill_(float("nan"))
            fn(0)
            torch.cuda.synchronize()
            same = bool(torch.equal(outs[0], o1) and torch.equal(hts[0], h1))
            st = timer.kernel(fn, R, reps=30)
            row[key] = {"ms": round(st.median_ms, 4), "same_bits": same}
        print(s.id, gate, " ".join(f"{k} {row[k]['ms']:.4f}{'' if row[k]['same_bits'] else ' DIFF'}"
                                   for k in ("plain", "overlap", "auto")), flush=True)
        rows.append(row)
        del sets, shared, outs, hts
        torch.cuda.empty_cache()
json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, open(sys.argv[2], "w"), indent=1)
