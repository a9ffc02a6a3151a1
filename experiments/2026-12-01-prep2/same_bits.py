"""Run one chunk library on fixed random inputs and save its outputs, or compare two such saves bit for bit.

Why: a prep change that only moves work between warps (same operations, same order) must give the same bits;
an exact comparison checks that more tightly than the fp64-reference tolerance.
usage: python same_bits.py run LIBRARY OUT.pt | python same_bits.py cmp A.pt B.pt
"""
import sys

import torch

import kda2
from kda2.runtime.chunk import chunk_kda

CASES = [  # (B, T, H, cu_seqlens, gate, layout, split)
    (2, 1000, 8, None, "softplus", "v_first", None),
    (1, 2048, 4, None, "lower_bound", "k_first", None),
    (1, 3063, 6, [0, 1300, 1847, 3063], "softplus", "k_first", None),
    (4, 257, 3, None, "lower_bound", "v_first", None),
    (1, 1024, 4, None, "lower_bound", "v_first", 4),     # K7's shape, split as the library routes it
    (2, 3000, 2, None, "softplus", "k_first", 8),
]


def run(lib_path, out):
    lib = kda2.load(lib_path)
    K = lib.k
    res = {}
    for ci, (B, T, H, cu, gate, layout, split) in enumerate(CASES):
        g = torch.Generator(device="cuda").manual_seed(1000 + ci)
        rn = lambda *s: torch.randn(*s, generator=g, device="cuda")
        Bq = 1 if cu else B
        q, k, v = (rn(Bq, T, H, K).bfloat16() for _ in range(3))
        gg, beta = rn(Bq, T, H, K).bfloat16(), rn(Bq, T, H).bfloat16()
        A_log, dt_bias = rn(H) * 0.5, rn(H * K)
        N = len(cu) - 1 if cu else B
        h0 = rn(N, H, K, K) * 0.1
        kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                  A_log=A_log, dt_bias=dt_bias, initial_state=h0, output_final_state=True,
                  state_v_first=layout == "v_first", library=lib)
        if gate == "lower_bound":
            kw.update(safe_gate=True, lower_bound=-5.0)
        if split:
            kw["split"] = split
        if cu:
            kw["cu_seqlens"] = torch.tensor(cu, device="cuda", dtype=torch.int32)
        o, ht = chunk_kda(q, k, v, gg, beta, **kw)
        torch.cuda.synchronize()
        res[ci] = (o.cpu(), ht.cpu())
    torch.save(res, out)


def cmp(a, b):
    A, B = torch.load(a), torch.load(b)
    bad = 0
    for ci in A:
        for name, x, y in (("o", A[ci][0], B[ci][0]), ("ht", A[ci][1], B[ci][1])):
            same = torch.equal(x.view(torch.int16) if x.dtype == torch.bfloat16 else x.view(torch.int32),
                               y.view(torch.int16) if y.dtype == torch.bfloat16 else y.view(torch.int32))
            fin = bool(torch.isfinite(x.float()).all())
            print(f"case {ci} {CASES[ci]} {name}: {'identical' if same else 'DIFFERENT'} (finite {fin}, "
                  f"max |diff| {(x.float() - y.float()).abs().max().item():.3e})")
            bad += not same or not fin
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    {"run": run, "cmp": cmp}[sys.argv[1]](*sys.argv[2:])
