"""One decode shape through the routed library, a few calls (for ncu: profile the last with --launch-skip).

usage: python one_call.py LIBRARY LAYOUT N T [CALLS]
The inputs follow kda2.bench.recurrent (bf16 q/k/v, fp32 raw gate and beta, gate / l2norm / beta sigmoid in the
kernel, fp32 state pool in place).
"""
import sys

import torch

from kda2.runtime import fused_recurrent_kda_pool, load

lib_path, layout, N, T = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
calls = int(sys.argv[5]) if len(sys.argv) > 5 else 4
H = HV = 32
K = V = 128
vf = layout == "v_first"
lib = load(lib_path)
gen = torch.Generator(device="cuda").manual_seed(7)


def randn(*s, dtype=torch.float32):
    return torch.randn(*s, generator=gen, device="cuda").to(dtype)


q, k, v = (randn(N, T, H, K, dtype=torch.bfloat16), randn(N, T, H, K, dtype=torch.bfloat16),
           randn(N, T, HV, V, dtype=torch.bfloat16))
g, beta = randn(N, T, HV, K), randn(N, T, HV)
A_log, dt_bias = randn(HV) * 0.5, randn(HV * K)
pool = randn(N, HV, *((V, K) if vf else (K, V))) * 0.1
idx = torch.arange(N, dtype=torch.int32, device="cuda")
out = torch.empty_like(v)
for _ in range(calls):
    fused_recurrent_kda_pool(q, k, v, g, beta, pool, idx, A_log=A_log, dt_bias=dt_bias, state_v_first=vf,
                             library=lib, out=out, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                             use_beta_sigmoid_in_kernel=True)
torch.cuda.synchronize()
print(layout, N, T, "ok", bool(torch.isfinite(out).all()))
