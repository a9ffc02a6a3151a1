"""Forced splits against unsplit and the library's own choice (split=None) at the library's head dim (K = V), as
2026-12-04-splitrule/grid.py times them (the benchmark's inputs and timing, softplus, v_first states), and per shape
the segments the library chose (read from the workspace it asks for, as tests/gpu/test_chunk_split_gpu.py does).
Usage: python grid.py LIBRARY OUT.json SHAPE ..."""
import json
import sys
import time

import torch

import kda2
from kda2.artifact.abi import KDA2RecurrentArgs
from kda2.bench import chunk as bc
from kda2.bench.timing import Timer
from kda2.runtime import abi
from kda2.runtime.loader import load

SPLITS = (None, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16)

lib = load(sys.argv[1])
KV = lib.k
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = {"device": torch.cuda.get_device_name(), "library": sys.argv[1], "gate": "softplus", "head_dim": KV,
       "sms": torch.cuda.get_device_properties(0).multi_processor_count,
       "block_v": sorted({int(v["config"]["block_v"]) for v in lib.manifest["variants"]
                          if v["config"]["state_layout"] == "v_first"}), "rows": []}


def chosen(N: int, T: int, HV: int) -> int:
    a = KDA2RecurrentArgs(N=N, T=T, H=HV, HV=HV, state_v_first=True, split=0, max_seqlen=T)
    got = lib.workspace_bytes(a)
    sizes = {abi.chunk_workspace_bytes(N, T, HV, KV, KV, False, s): s for s in range(1, abi.MAX_SPLIT + 1)}
    return sizes.get(got, -1)


t0 = time.time()
for s in bc.resolve_shapes(sys.argv[3:]):
    R = bc.n_sets(s, l2, KV, KV)
    sets, shared = bc.make_sets(torch, s, R, True, 0, KV, KV)
    nch = -(-s.T // 64)
    row = {"shape": s.label, "chains": s.B * s.H, "chunks": nch, "chosen": chosen(s.B, s.T, s.H), "ms": {}}
    for split in SPLITS:
        if split is not None and split > 1 and nch // split < 8:
            continue   # segments under 8 chunks: not a candidate of any rule
        def run(i, split=split):
            x = sets[i]
            return kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                                  cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"], dt_bias=shared["dt_bias"],
                                  library=lib, cu_seqlens_cpu=shared["cu_seqlens_cpu"], split=split,
                                  **bc.GATE_OPTIONS["softplus"], **bc.OPTIONS)
        try:
            run(0)
            row["ms"][str(split)] = round(timer.kernel(run, R, 20).median_ms, 4)
        except Exception as exc:  # noqa: BLE001 - a split the call refuses
            row["ms"][str(split)] = f"{type(exc).__name__}: {exc}"[:120]
    res["rows"].append(row)
    del sets, shared
    print(f"{time.time() - t0:6.1f}s {s.label:24s} chose {row['chosen']:2d} "
          + " ".join(f"{k}:{v}" for k, v in row["ms"].items()), flush=True)
    json.dump(res, open(sys.argv[2], "w"), indent=1)
