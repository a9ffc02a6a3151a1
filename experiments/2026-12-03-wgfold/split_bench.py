"""The exact split on the warpgroup-MMA state pass (issue 12 item 2): bits of unsplit calls, and timings of the
split choices on few-chain shapes.

usage:
  python split_bench.py bits LIBRARY OUT.pt      unsplit calls (split=1) on fixed inputs, saved
  python split_bench.py cmp A.pt B.pt            the two saves bit for bit (exit 1 on any difference)
  python split_bench.py time OUT.json LIB=PATH... every shape on every library: the library's own choice (auto)
                                                 and forced splits; median CUDA-event ms, relative L2 of o and ht
                                                 against the same library's split=1 call on the same inputs
"""
import json
import sys

import torch

import kda2
from kda2.bench.timing import Timer
from kda2.runtime.chunk import chunk_kda

BITS = [  # (B, T, H, cu_seqlens, gate, layout)
    (2, 1000, 8, None, "softplus", "v_first"),
    (1, 2048, 4, None, "lower_bound", "k_first"),
    (1, 3063, 6, [0, 1300, 1847, 3063], "softplus", "k_first"),
    (4, 257, 3, None, "lower_bound", "v_first"),
    (1, 8192, 4, None, "softplus", "v_first"),
]
# (name, B, T, H): few chains (a TP-sharded single prompt, cuDNN's K3 / K7 / K1 / K8, P6), then P3 (chains fill
# the GPU). K8 was added after call 3.
SHAPES = [("T8192-H4", 1, 8192, 4), ("T16384-H4", 1, 16384, 4), ("T32768-H2", 1, 32768, 2),
          ("T65536-H1", 1, 65536, 1), ("K3", 1, 4096, 8), ("K7", 1, 1024, 4), ("K1", 1, 2048, 12), ("K8", 1, 3072, 10),
          ("P6", 2, 2048, 8), ("T8192-H8", 1, 8192, 8), ("P3", 8, 2048, 32)]
SPLITS = ("auto", 1, 2, 4, 8, 16)


def inputs(B, T, H, K, cu, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=g, device="cuda")  # noqa: E731
    Bq = 1 if cu else B
    q, k, v = (rn(Bq, T, H, K).bfloat16() for _ in range(3))
    gg, beta = rn(Bq, T, H, K).bfloat16(), rn(Bq, T, H).bfloat16()
    A_log, dt_bias = rn(H) * 0.5, rn(H * K)
    N = len(cu) - 1 if cu else B
    return q, k, v, gg, beta, A_log, dt_bias, rn(N, H, K, K) * 0.1


def call(lib, x, gate, layout, split, cu=None):
    q, k, v, gg, beta, A_log, dt_bias, h0 = x
    kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, A_log=A_log,
              dt_bias=dt_bias, initial_state=h0, output_final_state=True, state_v_first=layout == "v_first",
              library=lib, split=None if split == "auto" else split)
    if gate == "lower_bound":
        kw.update(safe_gate=True, lower_bound=-5.0)
    if cu:
        kw["cu_seqlens"] = torch.tensor(cu, device="cuda", dtype=torch.int32)
    return chunk_kda(q, k, v, gg, beta, **kw)


def bits(lib_path, out):
    lib = kda2.load(lib_path)
    res = {}
    for ci, (B, T, H, cu, gate, layout) in enumerate(BITS):
        o, ht = call(lib, inputs(B, T, H, lib.k, cu, 1000 + ci), gate, layout, 1, cu)
        torch.cuda.synchronize()
        res[ci] = (o.cpu(), ht.cpu())
    torch.save(res, out)


def cmp(a, b):
    """experiments/2026-12-01-prep2/same_bits.py's comparison (the same save format), naming this file's cases."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "2026-12-01-prep2"))
    import same_bits

    same_bits.CASES = BITS
    same_bits.cmp(a, b)


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def time_all(out, *libs):
    timer = Timer(torch)
    libs = [(s.split("=", 1)[0], kda2.load(s.split("=", 1)[1])) for s in libs]
    rows = []
    for name, B, T, H in SHAPES:
        sets = [inputs(B, T, H, 128, None, 7 + i) for i in range(2)]
        for lname, lib in libs:
            ref = call(lib, sets[0], "softplus", "v_first", 1)
            for split in SPLITS:
                nch = -(-T // 64)
                if split != "auto" and split > 1 and nch // split < 4:
                    continue
                try:
                    o, ht = call(lib, sets[0], "softplus", "v_first", split)
                    torch.cuda.synchronize()
                    st = timer.kernel(lambda i: call(lib, sets[i % 2], "softplus", "v_first", split), 2, 20, warmup=3)
                    row = dict(shape=name, lib=lname, split=split, ms=round(st.median_ms, 4),
                               err_o=rel(o, ref[0]), err_ht=rel(ht, ref[1]),
                               finite=bool(torch.isfinite(o.float()).all() and torch.isfinite(ht).all()))
                except Exception as exc:  # noqa: BLE001 - a refused split is a row too
                    row = dict(shape=name, lib=lname, split=split, error=f"{type(exc).__name__}: {exc}"[:200])
                rows.append(row)
                print(json.dumps(row), flush=True)
    with open(out, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(0), rows=rows), f, indent=1)


if __name__ == "__main__":
    {"bits": bits, "cmp": cmp, "time": time_all}[sys.argv[1]](*sys.argv[2:])
