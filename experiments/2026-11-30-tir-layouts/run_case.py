"""One chunk call (B1 T4096 H4, softplus, V-first, split 4: prep, fold, combine, state) for ncu to profile."""
import sys

import torch

import kda2
from kda2.runtime import loader

lib = loader.load(sys.argv[1])
B, T, H, K, V = 1, 4096, 4, 128, 128
g = torch.Generator(device="cuda").manual_seed(7)
r = lambda *s, dt=torch.bfloat16: torch.randn(*s, generator=g, device="cuda").to(dt)  # noqa: E731
q, k, v, gt = r(B, T, H, K), r(B, T, H, K), r(B, T, H, V), r(B, T, H, K)
beta = r(B, T, H)
o, ht = kda2.chunk_kda(q, k, v, gt, beta, A_log=r(H, dt=torch.float32) * 0.5, dt_bias=r(H * K, dt=torch.float32),
                       initial_state=r(B, H, V, K, dt=torch.float32) * 0.1, output_final_state=True, state_v_first=True,
                       use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                       library=lib, split=4)
torch.cuda.synchronize()
print("finite:", bool(o.isfinite().all()), bool(ht.isfinite().all()))
