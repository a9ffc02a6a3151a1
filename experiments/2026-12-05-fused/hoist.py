"""What the fused kernel's per-token work costs on the chain: form j on a shape's inputs as the library takes them
(bounded gate, l2norm and β sigmoid in the kernel) against the same kernel on inputs with that work done beforehand
(fp32 log decay in precomputed mode, l2-normalised q / k, β after the sigmoid), and with only the gate or only the
l2norm done beforehand — kernel time only, same process, alternating; the outputs compared. The difference bounds what
a parallel pre-pass (bandwidth-bound: the torch ops timed here are an upper bound on its cost) could take off the chain.

usage: python hoist.py OUT.json [SHAPE ...]
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "gpu")]

from _check_kernels import Fused16  # noqa: E402

from kda2.bench import chunk as bc  # noqa: E402
from kda2.bench.timing import Timer  # noqa: E402

out_json = Path(sys.argv[1])
shapes = bc.resolve_shapes(sys.argv[2:] or ["P3", "K10"])
fused = Fused16(torch, Path(tempfile.mkdtemp()))
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
LB = -5.0
rows = []
for s in shapes:
    R = bc.n_sets(s, l2)
    sets, shared = bc.make_sets(torch, s, R, True, seed=4321 + s.tokens + s.H)
    H, K = s.H, bc.K_DIM
    a_scale = shared["A_log"].float().exp().view(1, 1, H, 1)
    bias = shared["dt_bias"].float().view(1, 1, H, K)

    def pre(x):
        g = LB * torch.sigmoid(a_scale * (x["g"].float() + bias))
        qn = (x["q"].float() * torch.rsqrt((x["q"].float() ** 2).sum(-1, keepdim=True) + 1e-6)).to(x["q"].dtype)
        kn = (x["k"].float() * torch.rsqrt((x["k"].float() ** 2).sum(-1, keepdim=True) + 1e-6)).to(x["k"].dtype)
        return g.contiguous(), qn, kn, x["beta"].float().sigmoid().contiguous()

    prepped = [pre(x) for x in sets]
    fo = [torch.empty_like(x["v"]) for x in sets]
    fh = [torch.empty_like(x["h0"]) for x in sets]

    def call(i, q, k, g, beta, gate, l2n, bsig):
        x = sets[i]
        fused(q, k, x["v"], g, beta, o=fo[i], h0=x["h0"], ht=fh[i], A_log=None if gate == "precomputed" else
              shared["A_log"], dt_bias=None if gate == "precomputed" else shared["dt_bias"],
              cu_seqlens=shared["cu_seqlens"], gate=gate, lower_bound=LB, l2=l2n, bsig=bsig, v_first=True)

    runs = {
        "in_kernel": lambda i: call(i, sets[i]["q"], sets[i]["k"], sets[i]["g"], sets[i]["beta"], "lower_bound", True, True),
        "all_before": lambda i: call(i, prepped[i][1], prepped[i][2], prepped[i][0], prepped[i][3], "precomputed", False, False),
        "gate_before": lambda i: call(i, sets[i]["q"], sets[i]["k"], prepped[i][0], prepped[i][3], "precomputed", True, False),
        "l2_before": lambda i: call(i, prepped[i][1], prepped[i][2], sets[i]["g"], sets[i]["beta"], "lower_bound", False, True),
        "torch_prepass": lambda i: pre(sets[i]),
    }
    ref = {}
    for name, fn in runs.items():
        if name == "torch_prepass":
            continue
        fn(0)
        torch.cuda.synchronize()
        ref[name] = (fo[0].float().clone(), fh[0].clone())
    agree = {n: bc.rel_l2(torch, ref[n][0], ref["in_kernel"][0]) for n in ref}
    t = {}
    for rnd in (1, 2):
        for name, fn in runs.items():
            t.setdefault(name, []).append(timer.kernel(fn, R, 20, warmup=3).median_ms)
    rows.append(dict(id=s.id, label=s.label, ms=t, o_vs_in_kernel=agree))
    print(s.label, "  ".join(f"{n} {v[0]:.3f}/{v[1]:.3f}" for n, v in t.items()),
          " o vs in_kernel", {n: f"{v:.1e}" for n, v in agree.items()}, flush=True)
out_json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))
