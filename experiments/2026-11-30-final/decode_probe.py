"""Two decode calls (N=256, H=32, K=V=128, k_first, bf16 inputs, fp32 state pool in place) for ncu: what kernels one
call launches and what each costs. Usage: python decode_probe.py LIBRARY_DIR"""
import sys

import torch

from kda2.runtime import fused_recurrent_kda_pool, loader

lib = loader.load(sys.argv[1])
N, H, K, V = 256, 32, 128, 128
g = torch.Generator(device="cuda").manual_seed(3)
r = lambda *s, dt=torch.bfloat16: torch.randn(*s, generator=g, device="cuda").to(dt)  # noqa: E731
q, k, v, gt, beta = r(N, 1, H, K), r(N, 1, H, K), r(N, 1, H, V), r(N, 1, H, K), r(N, 1, H)
pool = r(N, H, K, V, dt=torch.float32) * 0.1
idx = torch.arange(N, dtype=torch.int32, device="cuda")
A_log, dt_bias = r(H, dt=torch.float32), r(H * K, dt=torch.float32)
out = torch.empty_like(v)
opts = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)
for _ in range(2):
    torch.cuda.nvtx.range_push("kda2_call")
    fused_recurrent_kda_pool(q, k, v, gt, beta, pool, idx, A_log=A_log, dt_bias=dt_bias, library=lib, out=out, **opts)
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("ok", bool(out.isfinite().all()))
