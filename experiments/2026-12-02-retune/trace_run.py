"""Experiment only: run P2 / P5-like shapes on a trace build (trace_patch.py) once each after a warm-up, overlapped and
plain, and P1 (plain), printing the state pass's per-step phase times. usage: python trace_run.py LIB [SHAPES]"""
import sys

import torch

import kda2
from kda2.bench import chunk as bc

lib = kda2.load(sys.argv[1])
for sid, ovs in [(s, (None, False) if s in ("P2", "P5") else (None,)) for s in (sys.argv[2].split(",") if len(sys.argv) > 2 else ("P2", "P1", "P5"))]:
    s = bc.resolve_shapes([sid])[0]
    sets, shared = bc.make_sets(torch, s, 1, True, 7)
    x = sets[0]
    for ov in ovs:
        for rep in range(2):
            print(f"== {sid} overlap={ov} rep {rep}", flush=True)
            kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                           cu_seqlens=shared["cu_seqlens"], cu_seqlens_cpu=shared["cu_seqlens_cpu"],
                           A_log=shared["A_log"], dt_bias=shared["dt_bias"], library=lib, overlap=ov,
                           **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
            torch.cuda.synchronize()
