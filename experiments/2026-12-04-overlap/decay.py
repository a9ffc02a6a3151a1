"""How a model's decay strength moves a call's time: every head's A_log set to log(a) (the softplus gate's
−a·softplus(g + dt_bias) a token; the benchmark draws A_log ~ 0.5·randn), the library's default launch, and the share
of (head, 16-row diagonal block, channel) whose decay in either half of the block passes chunk.cuh's DIAG_RANGE (96,
log2): those channels take the prep's exact CUDA-core path. Usage: python decay.py LIBRARY OUT.json [SHAPE ...]"""
import json
import math
import sys

import torch

import kda2
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer
from kda2.runtime.loader import load

DIAG_RANGE = 96.0
lib = load(sys.argv[1])
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = {"device": torch.cuda.get_device_name(), "library": sys.argv[1], "rows": []}


def out_share(sets, shared, s, a):
    """Share of (head, block, channel) past DIAG_RANGE in a half block (the first set, the whole call)."""
    g = sets[0]["g"].float()                                      # [B, T, H, K] raw gate
    K = g.shape[-1]
    dt = shared["dt_bias"].view(1, 1, s.H, K)
    A = shared["A_log"].view(1, 1, s.H, 1)
    d2 = torch.exp(A) * torch.nn.functional.softplus(g + dt) / math.log(2.0)   # decay a token, log2, ≥ 0
    T = (g.shape[1] // 16) * 16
    d2 = d2[:, :T].reshape(g.shape[0], T // 16, 16, s.H, K)
    # half-block decays around the anchor row m = r + 8: Γr − Γm = rows r+1..r+8, Γm − Γr+15 = rows r+9..r+15
    lo, hi = d2[:, :, 1:9].sum(2), d2[:, :, 9:16].sum(2)
    return float((torch.maximum(lo, hi) > DIAG_RANGE).float().mean())


for s in bc.resolve_shapes(sys.argv[3:] or ["P1", "P3", "P6", "K3"]):
    R = bc.n_sets(s, l2)
    sets, shared = bc.make_sets(torch, s, R, True, 0)
    drawn = shared["A_log"].clone()
    row = {"shape": s.label, "ms": {}, "out_share": {}}
    for a in ("drawn", 1, 2, 4, 8, 16):
        shared["A_log"] = drawn.clone() if a == "drawn" else torch.full_like(drawn, math.log(a))

        def run(i):
            x = sets[i]
            return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                                  cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"], dt_bias=shared["dt_bias"],
                                  library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"],
                                  **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
        run(0)
        o, ht = run(0)
        ok = bool(torch.isfinite(o).all() and torch.isfinite(ht).all())
        row["ms"][str(a)] = [round(timer.kernel(run, R, 20).median_ms, 4) for _ in range(2)] + ([] if ok else ["nonfinite"])
        row["out_share"][str(a)] = round(out_share(sets, shared, s, a), 5)
    res["rows"].append(row)
    del sets, shared
    print(f"{s.label:28s} " + " ".join(f"a={k}:{v} out={row['out_share'][k]}" for k, v in row["ms"].items()), flush=True)
    json.dump(res, open(sys.argv[2], "w"), indent=1)
