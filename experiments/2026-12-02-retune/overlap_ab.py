"""P1-P6 with overlap left to the library, asked for, and refused, alternating in one process on one chunk library;
the bench's inputs, options and kernel timing (kda2.bench.chunk / timing). Asking where a state CTA does not fit
beside a prep CTA falls back to the plain launch (same bits either way: checked here per shape).
usage: python overlap_ab.py ROUNDS LIB [SHAPES]"""
import sys

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer

rounds, path = int(sys.argv[1]), sys.argv[2]
shapes = (sys.argv[3] if len(sys.argv) > 3 else "P1,P2,P3,P4,P5,P6").split(",")
lib = kda2.load(path)
timer = Timer(torch)
for sid in shapes:
    s = bc.resolve_shapes([sid])[0]
    sets, shared = bc.make_sets(torch, s, 2, True, 7)
    outs = {}
    for ov in (None, True, False):
        x = sets[0]
        o, ht = kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                               cu_seqlens=shared["cu_seqlens"], cu_seqlens_cpu=shared["cu_seqlens_cpu"],
                               A_log=shared["A_log"], dt_bias=shared["dt_bias"], library=lib, overlap=ov,
                               output_final_state=True, **bc.GATE_OPTIONS["softplus"],
                               **{k: v for k, v in bc.OPTIONS.items() if k != "output_final_state"})
        outs[ov] = (o.clone(), ht.clone())
    same = all(torch.equal(outs[None][i], outs[ov][i]) for ov in (True, False) for i in (0, 1))
    print(f"{sid}: route {bc.route_of(lib, s, True)}; overlap None/True/False same bits: {same}",
          flush=True)
    for r in range(rounds):
        line = []
        for ov in (None, True, False):
            def run(i, ov=ov):
                x = sets[i]
                return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                                      cu_seqlens=shared["cu_seqlens"], cu_seqlens_cpu=shared["cu_seqlens_cpu"],
                                      A_log=shared["A_log"], dt_bias=shared["dt_bias"], library=lib, overlap=ov,
                                      **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
            st = timer.kernel(run, 2, 20)
            line.append(f"overlap={ov}: {st.median_ms:.3f}")
        print(f"{sid} round {r}: " + "  ".join(line) + " ms", flush=True)
