"""P2 / P5 (the shapes the library overlaps) on several chunk libraries with the library's own launch choice,
alternating rounds in one process; the bench's inputs, options and kernel timing (kda2.bench.chunk / timing).
usage: python lead_ab.py ROUNDS LIB [LIB ...]"""
import sys

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer

rounds, paths = int(sys.argv[1]), sys.argv[2:]
libs = {p: kda2.load(p) for p in paths}
timer = Timer(torch)
for sid in ("P2", "P5"):
    s = bc.resolve_shapes([sid])[0]
    sets, shared = bc.make_sets(torch, s, 2, True, 7)
    for r in range(rounds):
        for path, lib in libs.items():
            def run(i, lib=lib):
                x = sets[i]
                return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                                      A_log=shared["A_log"], dt_bias=shared["dt_bias"], library=lib,
                                      **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
            st = timer.kernel(run, 2, 20)
            print(f"{sid} round {r} {path.split('/')[-2]}: {st.median_ms:.3f} ms (p10 {st.p10_ms:.3f}, p90 {st.p90_ms:.3f})",
                  flush=True)
