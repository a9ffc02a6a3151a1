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
        # drawn in prep_latency.py's order (q, k, v, g, β, A_log, dt_bias): the same inputs for the same shape
        shapes = {"q": (B, T, H, K), "k": (B, T, H, K), "v": (B, T, H, K), "g": (B, T, H, K), "beta": (B, T, H),
                  "A_log": (H,), "dt_bias": (H * K,)}
        x = {name: torch.randn(*shape, generator=gen, device="cuda") for name, shape in shapes.items()}
        x.update(q=x["q"].bfloat16(), k=x["k"].bfloat16(), v=x["v"].bfloat16(), A_log=x["A_log"] * 0.5)
        for _ in range(3):
            o, ht = kda2.chunk_kda(**x, use_gate_in_kernel=True,
                                   use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                   output_final_state=True, state_v_first=True, library=lib,
                                   lower_bound=-5.0 if gate == "lower_bound" else None)
        torch.cuda.synchronize()
        print(f"{name} {gate}: o finite {bool(torch.isfinite(o).all())}", flush=True)
