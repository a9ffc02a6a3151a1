"""One chunk-prep item's latency with 1 and 2 prep CTAs per SM, and the steady state (issue 12: the chain step a fused
kernel would have with today's prep). Runs kda2.chunk_kda (softplus gate, K = V = 128, bf16, one sequence of 8192
tokens) at H = 1 (128 items: at most one prep CTA per SM on 132 SMs), 2 (256: about two), 64 (P1, 8192); run it under
ncu (--kernel-name regex:kda2_chunk_prep --clock-control none) for the prep kernel's duration alone.
Usage: python prep_latency.py LIBRARY_DIR"""
import sys

import torch

import kda2

lib = kda2.load(sys.argv[1])
gen = torch.Generator(device="cuda").manual_seed(0)
for H in (1, 2, 64):
    B, T, K = 1, 8192, 128
    r = lambda *s: torch.randn(*s, generator=gen, device="cuda")
    q, k, v = (r(B, T, H, K).bfloat16() for _ in range(3))
    g, beta = r(B, T, H, K), r(B, T, H)
    A_log, dt_bias = r(H) * 0.5, r(H * K)
    for _ in range(3):
        o, ht = kda2.chunk_kda(q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, use_gate_in_kernel=True,
                               use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True, output_final_state=True,
                               state_v_first=True, library=lib, split=1, overlap=False)
    torch.cuda.synchronize()
    print(f"H={H}: {T // 64 * H} prep items, o finite: {bool(torch.isfinite(o).all())}", flush=True)
