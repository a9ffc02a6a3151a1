"""Where P1 and P3 spend their time, kernel by kernel (issue 12: what the fused kernel has to remove). Runs
kda2.chunk_kda three times per case (K = V = 128, bf16, fp32 gate, library routing, overlap auto) on P1 (B1 T8192
H64) and P3 (B8 T2048 H32), softplus and lower-bound gates; run it under ncu (--clock-control none, gpu__time_duration)
for each launch's kernel durations. Usage: python phase_split.py LIBRARY_DIR"""
import sys

import torch

import kda2

lib = kda2.load(sys.argv[1])
gen = torch.Generator(device="cuda").manual_seed(0)
for name, B, T, H in (("P1", 1, 8192, 64), ("P3", 8, 2048, 32)):
    for gate in ("softplus", "lower_bound"):
        K = 128
        r = lambda *s: torch.randn(*s, generator=gen, device="cuda")
        q, k, v = (r(B, T, H, K).bfloat16() for _ in range(3))
        g, beta = r(B, T, H, K), r(B, T, H)
        A_log, dt_bias = r(H) * 0.5, r(H * K)
        for _ in range(3):
            o, ht = kda2.chunk_kda(q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, use_gate_in_kernel=True,
                                   use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                   output_final_state=True, state_v_first=True, library=lib,
                                   lower_bound=-5.0 if gate == "lower_bound" else None)
        torch.cuda.synchronize()
        print(f"{name} {gate}: o finite {bool(torch.isfinite(o).all())}", flush=True)
