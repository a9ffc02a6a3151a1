"""P2 / P5 (the shapes the library overlaps) on two chunk libraries, the library's overlap choice vs overlap=False,
alternating rounds in one process; the bench's inputs, options and kernel timing (kda2.bench.chunk / timing).
usage: python overlap_ab.py LIB_A LIB_B [ROUNDS]"""
import sys

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer

libs = {p: kda2.load(p) for p in sys.argv[1:3]}
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
timer = Timer(torch)
for sid in ("P2", "P5"):
    s = bc.resolve_shapes([sid])[0]
    sets, shared = bc.make_sets(torch, s, 2, True, 7)
    for r in range(rounds):
        for path, lib in libs.items():
            for ov in (None, False):
                fn, gopt = kda2.chunk_kda, bc.GATE_OPTIONS["softplus"]

                def run(i, lib=lib, ov=ov):
                    x = sets[i]
                    return fn(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                              A_log=shared["A_log"], dt_bias=shared["dt_bias"], library=lib, overlap=ov, **gopt,
                              **bc.OPTIONS)
                st = timer.kernel(run, 2, 20)
                print(f"{sid} round {r} {path.split('/')[-2]} overlap={ov}: {st.median_ms:.3f} ms "
                      f"(p10 {st.p10_ms:.3f}, p90 {st.p90_ms:.3f})", flush=True)
