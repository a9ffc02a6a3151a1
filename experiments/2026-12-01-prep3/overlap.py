"""The overlapped chunk launch (state pass beside the prep, docs/DESIGN.md §1) against the plain one, per variant.

For each shape and variant: outputs with KDA2_CHUNK_OVERLAP asked and with KDA2_CHUNK_NO_OVERLAP must be the same
bits (the same kernels' arithmetic, only the launch differs), o / ht poisoned before each run; the fp64 reference
error of the overlapped run on the small cases; then CUDA-event medians of both modes, the routed variant's plain
time beside them. usage: python overlap.py LIBRARY OUT.json
"""
import json
import sys

import torch

from kda2.bench.timing import Timer
from kda2.runtime import abi
from kda2.runtime.loader import load
from kda2.tools.tune import _reference_error

LIB, OUT = sys.argv[1], sys.argv[2]
lib = load(LIB)
ids = {v["id"]: v["index"] for v in lib.manifest["variants"]}
K = V = 128
SHAPES = [  # id, N, T per sequence (dense) or cu_seqlens, H
    ("P6", 2, 2048, None, 8), ("P2", 1, 16384, None, 32), ("P1", 1, 8192, None, 64), ("P5", 1, 65536, None, 32),
    ("V4", 4, None, [0, 1300, 1300, 1301, 3064], 4),   # varlen with an empty and a length-1 sequence
    ("S1", 1, 1000, None, 4),                             # short: 16 chunks, the default's threshold
]
VARIANTS = ["56fabf5e08b5", "90d2b4ce1fb6"]


def case(N, T, cu, H, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g, device="cuda")
    tot = cu[-1] if cu else N * T
    c = {"N": N, "T": cu[-1] if cu else T, "H": H, "HV": H, "K": K, "mode": "softplus", "v_first": True,
         "l2norm": True, "beta_sigmoid": True}
    c["q"], c["k"] = rn(1, tot, H, K).bfloat16(), rn(1, tot, H, K).bfloat16()
    c["v"] = rn(1, tot, H, V).bfloat16()
    c["g"], c["beta"] = rn(1, tot, H, K), rn(1, tot, H)
    c["A_log"], c["dt_bias"] = rn(H) * 0.5, rn(H * K)
    c["h0"] = rn(N, H, V, K) * 0.1
    c["o"], c["ht"] = torch.empty_like(c["v"]), torch.empty_like(c["h0"])
    a = abi.KDA2RecurrentArgs()
    a.q, a.k, a.v, a.g, a.beta = (c[n].data_ptr() for n in ("q", "k", "v", "g", "beta"))
    a.A_log, a.dt_bias, a.o, a.h0, a.ht = (c[n].data_ptr() for n in ("A_log", "dt_bias", "o", "h0", "ht"))
    if cu:
        c["cu"] = torch.tensor(cu, dtype=torch.int64, device="cuda")
        a.cu_seqlens = c["cu"].data_ptr()
        a.max_seqlen = max(b - a_ for a_, b in zip(cu, cu[1:]))
        a.T = tot
    else:
        a.cu_seqlens, a.max_seqlen, a.T = None, T, T
    a.state_indices = None
    a.N, a.H, a.HV, a.scale, a.lower_bound = N, H, H, K ** -0.5, -5.0
    a.gate_mode, a.state_v_first = abi.GATE_SOFTPLUS, 1
    a.flags = abi.FLAG_HAS_A_LOG | abi.FLAG_HAS_DT_BIAS | abi.FLAG_QK_L2NORM | abi.FLAG_BETA_SIGMOID
    nbytes = abi.chunk_workspace_bytes(N, tot if cu else T, H, K, V, bool(cu))
    c["ws"] = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    a.workspace, a.workspace_bytes = c["ws"].data_ptr(), nbytes
    c["args"], c["base_flags"] = a, a.flags
    return c


def run(c, index, mode):
    a = c["args"]
    a.flags = c["base_flags"] | {"on": abi.FLAG_CHUNK_OVERLAP, "off": abi.FLAG_CHUNK_NO_OVERLAP, "auto": 0}[mode]
    a.split = 1
    if index is None:
        lib.launch_raw(a, a.max_seqlen)
    else:
        lib.launch_variant(index, a)


timer = Timer(torch)
rows = []
for si, (sid, N, T, cu, H) in enumerate(SHAPES):
    c = case(N, T, cu, H, 100 + si)
    for vid in VARIANTS + ["routed"]:
        index = None if vid == "routed" else ids[vid]
        res = {"shape": sid, "variant": vid}
        outs = {}
        for mode in ("off", "on"):
            c["o"].fill_(float("nan")); c["ht"].fill_(float("nan"))
            run(c, index, mode)
            torch.cuda.synchronize()
            outs[mode] = (c["o"].clone(), c["ht"].clone())
            if mode == "on" and sid in ("P6", "S1"):   # (the reference helper takes dense input)
                res["ref_err_on"] = _reference_error(c)
        same = all(torch.equal(x.view(torch.int16) if x.dtype == torch.bfloat16 else x.view(torch.int32),
                               y.view(torch.int16) if y.dtype == torch.bfloat16 else y.view(torch.int32))
                   for x, y in zip(outs["off"], outs["on"]))
        res["same_bits"] = bool(same)
        res["finite"] = bool(all(torch.isfinite(t.float()).all() for t in outs["on"]))
        for mode in ("off", "on"):
            res[f"ms_{mode}"] = timer.kernel(lambda i: run(c, index, mode), 1, 15, warmup=3).median_ms
        print(json.dumps(res), flush=True)
        rows.append(res)
json.dump(rows, open(OUT, "w"), indent=1)
