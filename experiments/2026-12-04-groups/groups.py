"""Issue 12, P3-like shapes: does running the batch as groups of sequences, each group's prep beside the previous
group's state pass (one stream per group, round-robin), beat one call? Timing only plus a bits check: the grouped
outputs must equal the one-call outputs bit for bit (the same kernels on the same rows, unless the library picks
another schedule for the smaller call, which is reported).

python groups.py LIB [--shapes P3,P4,K5,K10] [--groups 1,2,4,8] [--streams 1,2,3] [--gate softplus|lower_bound]
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

import kda2
from kda2.bench.chunk import GATE_OPTIONS, OPTIONS, SHAPES, K3, k3_shape, make_sets

p = argparse.ArgumentParser()
p.add_argument("lib")
p.add_argument("--shapes", default="P3,P4")
p.add_argument("--groups", default="1,2,4,8")
p.add_argument("--streams", default="1,2,3")
p.add_argument("--gate", default="softplus")
p.add_argument("--iters", type=int, default=20)
p.add_argument("--overlap", default="auto", choices=["auto", "off"])
p.add_argument("--out", default=None)
args = p.parse_args()
lib = kda2.load(args.lib)
shapes = {s.id: s for s in SHAPES}
for i, t in enumerate(K3):
    s = k3_shape(i + 1, *t)
    shapes[s.id] = s
gopt = GATE_OPTIONS[args.gate]
ov = None if args.overlap == "auto" else False


def spans(s, G):
    """G groups of whole sequences, balanced by tokens: (token lo, token hi, seq lo, seq hi)."""
    if s.seqlens is None:
        per = s.B // G
        return [(b * per, (b + 1) * per, b * per, (b + 1) * per) for b in range(G)] if s.B % G == 0 else None
    cu = s.cu_seqlens
    if G > s.N:
        return None
    out, lo_seq = [], 0
    for gi in range(G):
        target = cu[-1] * (gi + 1) / G
        hi_seq = lo_seq + 1
        while hi_seq < s.N - (G - gi - 1) and abs(cu[hi_seq + 1] - target) < abs(cu[hi_seq] - target):
            hi_seq += 1
        if gi == G - 1:
            hi_seq = s.N
        out.append((cu[lo_seq], cu[hi_seq], lo_seq, hi_seq))
        lo_seq = hi_seq
    return out


def make_calls(s, x, sh, G, outs, hts):
    """One closure per group (dense: batch slices; varlen: token slices with rebased cu_seqlens)."""
    calls = []
    for (t0, t1, n0, n1) in spans(s, G):
        if s.seqlens is None:
            sl = lambda t, t0=t0, t1=t1: t[t0:t1]
            cu = cu_cpu = None
        else:
            sl = lambda t, t0=t0, t1=t1: t[:, t0:t1]
            c = [v - s.cu_seqlens[n0] for v in s.cu_seqlens[n0:n1 + 1]]
            cu = torch.tensor(c, dtype=torch.int64, device="cuda")
            cu_cpu = torch.tensor(c, dtype=torch.int64)

        def run(sl=sl, n0=n0, n1=n1, cu=cu, cu_cpu=cu_cpu):
            kda2.chunk_kda(sl(x["q"]), sl(x["k"]), sl(x["v"]), sl(x["g"]), sl(x["beta"]), initial_state=x["h0"][n0:n1],
                           state_v_first=True, cu_seqlens=cu, cu_seqlens_cpu=cu_cpu, A_log=sh["A_log"],
                           dt_bias=sh["dt_bias"], library=lib, overlap=ov, out=sl(outs), final_state_out=hts[n0:n1],
                           **gopt, **OPTIONS)
        calls.append(run)
    return calls


def timed(calls, S, iters):
    main = torch.cuda.current_stream()
    streams = [main] + [torch.cuda.Stream() for _ in range(S - 1)]
    def once():
        ev = torch.cuda.Event()
        ev.record(main)
        for st in streams[1:]:
            st.wait_event(ev)
        for i, c in enumerate(calls):
            with torch.cuda.stream(streams[i % S]):
                c()
        for st in streams[1:]:
            e = torch.cuda.Event()
            e.record(st)
            main.wait_event(e)
    for _ in range(3):
        once()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        torch.cuda._sleep(20_000_000)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(main)
        once()
        b.record(main)
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


res = []
for sid in args.shapes.split(","):
    s = shapes[sid]
    sets, sh = make_sets(torch, s, 1, True, 1234)
    x = sets[0]
    o_ref = torch.empty_like(x["v"]); ht_ref = torch.empty_like(x["h0"])
    make_calls(s, x, sh, 1, o_ref, ht_ref)[0]()
    torch.cuda.synchronize()
    for G in [int(g) for g in args.groups.split(",")]:
        if spans(s, G) is None:
            continue
        for S in [int(v) for v in args.streams.split(",")]:
            if S > G or (G == 1 and S > 1):
                continue
            o = torch.full_like(x["v"], float("nan")); ht = torch.full_like(x["h0"], float("nan"))
            calls = make_calls(s, x, sh, G, o, ht)
            ms = timed(calls, S, args.iters)
            same = bool(torch.equal(o, o_ref) and torch.equal(ht, ht_ref))
            dmax = float((o.float() - o_ref.float()).abs().max())
            r = dict(shape=sid, gate=args.gate, groups=G, streams=S, ms=ms, same_bits=same, o_maxdiff=dmax)
            res.append(r)
            print(json.dumps(r), flush=True)
    del sets, x
    torch.cuda.empty_cache()
if args.out:
    json.dump(res, open(args.out, "w"), indent=1)
