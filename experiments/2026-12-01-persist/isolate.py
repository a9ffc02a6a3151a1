"""One persistent decode variant, forced, in a process of its own (run under compute-sanitizer by call1.sh).

Why a process each: a kernel that raises 'illegal instruction' poisons the CUDA context, so in one process every
later launch fails too and the log cannot say which variant was at fault (2026-12-01 call 3). Here the exit code
and the sanitizer's report belong to one variant. Correctness against the fp64 reference is the GPU tests' job
(tests/gpu/test_recurrent_matrix_gpu.py -k persistent); this checks the launch completes and writes finite
outputs and pool rows over a pool call of T tokens per sequence (T = 1, or a multi-token verify with per-token
states) with several tiles per resident CTA.
usage: python isolate.py MANIFEST INDEX [fp32|bf16] [T]
"""
import sys

import torch

from kda2.runtime import fused_recurrent_kda_pool, load

manifest, index = sys.argv[1], int(sys.argv[2])
pool_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[sys.argv[3] if len(sys.argv) > 3 else "fp32"]
lib = load(manifest)
v = next(x for x in lib.variants if int(x["index"]) == index)
cfg = v["config"]
T = int(sys.argv[4]) if len(sys.argv) > 4 else 1
N, H, HV, K, V = 512, 4, 8, cfg["k"], cfg["v"]
vf = cfg["state_layout"] == "v_first"
g = torch.Generator(device="cuda").manual_seed(index)
q = torch.randn(N, T, H, K, device="cuda", generator=g).bfloat16()
k = torch.randn(N, T, H, K, device="cuda", generator=g).bfloat16()
vv = torch.randn(N, T, HV, V, device="cuda", generator=g).bfloat16()
gate = torch.randn(N, T, HV, K, device="cuda", generator=g).bfloat16()
beta = torch.randn(N, T, HV, device="cuda", generator=g).bfloat16()
A_log = torch.rand(HV, device="cuda", generator=g)
dt_bias = torch.randn(HV * K, device="cuda", generator=g)
P = N + 40
shape = (P, HV, V, K) if vf else (P, HV, K, V)
pool = (torch.randn(shape, device="cuda", generator=g) * 0.1).to(pool_dtype)
idx = torch.randperm(P, device="cuda", generator=g)[:N].int()
idx[3::7] = -1
out = torch.full_like(vv, float("nan"))
inter = torch.full((N, T) + shape[1:], float("nan"), device="cuda", dtype=pool_dtype) if T > 1 else None
lib._fwd = lambda args, max_seqlen, stream: lib._launch(index, args, stream)
fused_recurrent_kda_pool(q, k, vv, gate, beta, pool, idx, A_log=A_log, dt_bias=dt_bias, library=lib, out=out,
                         use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                         state_v_first=vf, intermediate_states_out=inter)
torch.cuda.synchronize()
used = idx >= 0
finite = bool(torch.isfinite(out).all()) and bool(torch.isfinite(pool.float()).all()) and (
    inter is None or bool(torch.isfinite(inter[used].float()).all()))
print(f"variant {v['id']} index {index} pool {pool_dtype} T {T} {'OK' if finite else 'NON-FINITE'}")
sys.exit(0 if finite else 2)
