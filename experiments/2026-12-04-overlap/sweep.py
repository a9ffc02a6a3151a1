"""Unsplit calls overlapped (asked for) against plain (refused), alternating, two rounds, on shapes whose state CTAs
fill 48-132 SMs at 32-256 chunks (the library's head dims): where should the library's default overlap start (library.cpp.j2 choose_overlap,
plan/smem.py OVERLAP_*)? Usage: python sweep.py LIBRARY OUT.json [SHAPE ...]"""
import json
import sys

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer
from kda2.runtime.loader import load

DEFAULT = [f"B1T{t}H{h}" for h in (24, 32, 40, 48, 56, 64, 66) for t in (2048, 3072, 4096, 6144, 8192, 12288, 16384)]
DEFAULT += ["B2T4096H24", "B2T4096H32", "B4T2048H16", "B2T8192H32", "B2T2048H32", "B4T4096H16"]
lib = load(sys.argv[1])
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = {"device": torch.cuda.get_device_name(), "library": sys.argv[1], "head_dim": lib.k, "rows": []}
for s in bc.resolve_shapes(sys.argv[3:] or DEFAULT):
    R = bc.n_sets(s, l2, lib.k, lib.v)
    sets, shared = bc.make_sets(torch, s, R, True, 0, lib.k, lib.v)
    row = {"shape": s.label, "ms": {"None": [], "True": [], "False": []}}
    for rnd in range(2):
        for ov in (None, True, False):
            def run(i, ov=ov):
                x = sets[i]
                return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                                      state_v_first=True, cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"],
                                      dt_bias=shared["dt_bias"], library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"],
                                      split=1, overlap=ov, **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
            try:
                run(0)
                row["ms"][str(ov)].append(round(timer.kernel(run, R, 20).median_ms, 4))
            except Exception as exc:  # noqa: BLE001
                row["ms"][str(ov)].append(f"{type(exc).__name__}: {exc}"[:120])
    res["rows"].append(row)
    del sets, shared
    print(f"{s.label:28s} " + " ".join(f"{k}:{v}" for k, v in row["ms"].items()), flush=True)
    json.dump(res, open(sys.argv[2], "w"), indent=1)
