"""The prep's lead in overlapped launches (chunk.cuh PREP_LEAD) at 8 / 16 / 24 / 32 chunks: the library's own
choice (overlapped on the P2 / P5-like shapes, plain on P1, P3, K6) with each build, alternating, ROUNDS rounds
(default 2), the benchmark's inputs and timing.
Usage: python leads.py OUT.json NAME=LIBRARY ... [-- SHAPE ...]"""
import json
import os
import sys

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer
from kda2.runtime.loader import load

args = sys.argv[2:]
libs_arg, shapes_arg = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
libs = {n: load(p) for n, p in (a.split("=", 1) for a in libs_arg)}
shapes = shapes_arg or ["B1T10240H24", "B1T11264H22", "B1T12288H28", "B1T9728H26", "B1T10240H33", "B1T16384H33",
                        "B1T12288H30", "B2T8192H16", "P2", "P5"]
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = {"device": torch.cuda.get_device_name(), "libraries": dict(a.split("=", 1) for a in libs_arg), "rows": []}
for s in bc.resolve_shapes(shapes):
    R = bc.n_sets(s, l2)
    sets, shared = bc.make_sets(torch, s, R, True, 0)
    row = {"shape": s.label, "ms": {n: [] for n in libs}}
    for rnd in range(int(os.environ.get("ROUNDS", "2"))):
        for n, lib in libs.items():
            def run(i, lib=lib):
                x = sets[i]
                return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                                      state_v_first=True, cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"],
                                      dt_bias=shared["dt_bias"], library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"],
                                      **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
            run(0)
            row["ms"][n].append(round(timer.kernel(run, R, 20).median_ms, 4))
    res["rows"].append(row)
    del sets, shared
    print(f"{s.label:36s} " + "  ".join(f"{n}: {' / '.join(map(str, v))}" for n, v in row["ms"].items()), flush=True)
    json.dump(res, open(sys.argv[1], "w"), indent=1)
