"""A rounding-faithful numpy model of the chunk family's arithmetic (kda2/chunk.cuh, sm_90a wgmma state pass).

Why: no GPU could be had on 2026-12-05 (twice), and issue 12's next prep changes (experiments/2026-12-05-fused-study
§5) each move a rounding point. This model runs the same inputs as tests/gpu/test_chunk_gpu.py (bench/cases.py
draw, same seeds) through the kernel's sequence of roundings, so a variant's error against the fp64 reference can
be read before its kernel exists; `--calibrate` compares the model of today's kernel with the errors the H200
measured on those very inputs (bench/results/h200-2026-12-05-checks/call3), which says how far to trust it.

What is modelled (everything else is taken as exact fp32):
  inputs      q/k/v rounded to the dtype; g / β / A_log / dt_bias as the case passes them; l2norm in fp32, then q, k
              rounded to the dtype (prep step 2a)
  Γ           fp32 cumulative sum of the activated gate in log2 units, per 64-token chunk (rows past the sequence
              add nothing)
  A, Aqk      16×16 blocks: off-diagonal left x_i 2^(Γi−Γr), right k_j 2^(Γr−Γj), both rounded to the dtype, fp32
              sums; diagonal anchored at the middle row, both factors tf32, channels past DIAG_RANGE summed exactly
              (fp32); A's rows times β_i (fp32), Aqk = E(scale · sums)
  T           diagonal 16-blocks by fp32 forward substitution; levels −T_II (A_IJ T_JJ) with tf32 operands
  w, u        E(E(T diag β) @ E(k 2^Γ)), E(E(T diag β) @ v)                         (variant "today")
              or blocked forward substitution, the residual and each block's result rounded to the operand
              type before the next product (variants "bfs-16" / "bfs-tf32", study §5.3)
  state       per chunk: Sb = E(S); v_new = E(u − w Sb); o = E(qg Sb + Aqk v_new);
              S = 2^Γlast ⊙ S + kgᵀ v_new (fp32)
  --chunk 16 / 32 steps the state every 16 / 32 tokens with the same prep on that many tokens (study §5.4).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from kda2 import reference as ref                      # noqa: E402
from kda2.bench.cases import CASES, Case, draw         # noqa: E402
from kda2.reference.rounding import bf16, bfs_chunk, fp16, tf32   # noqa: E402

LOG2E = 1.4426950408889634
DIAG_RANGE = 96.0
F32 = np.float32


# ---- rounding ------------------------------------------------------------------------------------

#: rounding points whose rounding is replaced (--round POINT=fp32|tf32|16): an error budget, or a cheaper type
ROUND: dict = {}
POINTS = ("qk", "offdiag", "diag", "Aqk", "qg", "kg", "k2g", "T16", "wu", "Sb", "vnew", "o")
KINDS = ("fp32", "tf32", "16")
_E = [bf16]   # the case's 16-bit type, for "16"


def rnd(point, f):
    """The rounding `f` at a named point of the kernel, or the one --round gives it."""
    kind = ROUND.get(point)
    if kind is None:
        return f
    return {"fp32": lambda x: np.asarray(x, dtype=F32), "tf32": tf32, "16": lambda x: _E[0](x)}[kind]


def mm(a, b):
    """fp32 products with fp32 accumulation (batched over heads)."""
    return np.matmul(a.astype(F32), b.astype(F32)).astype(F32)


# ---- inputs as the GPU test passes them -----------------------------------------------------------

def inputs(c: Case, seed: int, K: int = 128, V: int = 128):
    x = draw(c, seed, K, V)
    E = bf16 if c.dtype == "bf16" else fp16
    P = {"fp32": lambda a: a.astype(F32), "bf16": bf16, "fp16": fp16}[c.param]
    r = dict(q=E(x["q"]), k=E(x["k"]), v=E(x["v"]),
             g=E(x["g"]) if c.g_bf16 else x["g"].astype(F32),
             beta=E(x["beta"]) if c.beta_bf16 else x["beta"].astype(F32),
             A_log=None if x["A_log"] is None else P(x["A_log"]),
             dt_bias=None if x["dt_bias"] is None else P(x["dt_bias"]),
             h0=x["initial_state"], cu=x["cu_seqlens"])
    if r["h0"] is not None and c.v_first:   # the model and its reference run key-first; the error is layout-free
        r["h0"] = np.ascontiguousarray(r["h0"].transpose(0, 1, 3, 2))
    return r, E


def reference(c: Case, r):
    o, ht = ref.recurrent_kda_ref(r["q"], r["k"], r["v"], r["g"], r["beta"], A_log=r["A_log"], dt_bias=r["dt_bias"],
                                  initial_state=r["h0"], output_final_state=True,
                                  cu_seqlens=list(c.cu) if c.cu else None,
                                  scale=c.scale, use_qk_l2norm_in_kernel=c.l2, use_gate_in_kernel=c.in_kernel_gate,
                                  use_beta_sigmoid_in_kernel=c.bsig, allow_neg_eigval=c.neg,
                                  lower_bound=c.lower_bound if c.gate == "lower_bound" else None)
    return o, ht


# ---- the kernel's arithmetic ---------------------------------------------------------------------

def prepared(c: Case, r, E, K):
    """q, k (normalised, rounded), v, the gate in log2 units (fp32) and β, head-major per value head."""
    q, k = r["q"], r["k"]
    if c.l2:
        q = rnd("qk", E)(q * (1.0 / np.sqrt((q.astype(F32) ** 2).sum(-1, keepdims=True) + F32(1e-6))).astype(F32))
        k = rnd("qk", E)(k * (1.0 / np.sqrt((k.astype(F32) ** 2).sum(-1, keepdims=True) + F32(1e-6))).astype(F32))
    if c.in_kernel_gate:
        g = ref.gate_activation(r["g"], A_log=r["A_log"], dt_bias=r["dt_bias"],
                                lower_bound=c.lower_bound if c.gate == "lower_bound" else None)
    else:
        g = r["g"].astype(np.float64)
    g2 = (g * LOG2E).astype(F32)
    b = r["beta"].astype(F32)
    if c.bsig:
        b = (1.0 / (1.0 + np.exp(-b.astype(np.float64)))).astype(F32) * F32(2.0 if c.neg else 1.0)
    G = c.ratio
    if G > 1:
        q, k = np.repeat(q, G, axis=2), np.repeat(k, G, axis=2)
    return q, k, r["v"].astype(F32), g2, b


def fsub(A):
    """(I + A)^-1 of strictly lower-triangular blocks A [..., n, n] by fp32 forward substitution."""
    n = A.shape[-1]
    T = np.zeros_like(A, dtype=F32)
    eye = np.eye(n, dtype=F32)
    for i in range(n):
        # row i of T: e_i − Σ_{j<i} A_ij T_j
        T[..., i, :] = eye[i] - np.einsum("...j,...jc->...c", A[..., i, :i], T[..., :i, :]).astype(F32)
    return T


def prep(qc, kc, vc, gc, bc, scale, E, C, wu):
    """One chunk of C tokens (padded), all value heads: the workspace slot's tensors (as float32 values)."""
    HV, _, K = kc.shape
    nb = C // 16
    Gam = np.cumsum(gc, axis=1, dtype=F32)                       # [HV, C, K], log2
    Aacc = np.zeros((HV, C, C), F32)                             # k-sums (no β)
    Qacc = np.zeros((HV, C, C), F32)
    for I in range(nb):
        r, m, e = 16 * I, 16 * I + 8, 16 * I + 15
        rows = slice(r, r + 16)
        gi = Gam[:, rows]                                        # [HV,16,K]
        # off-diagonal blocks, anchor r
        if I > 0:
            cols = slice(0, r)
            lk = rnd("offdiag", E)(kc[:, rows] * np.exp2(gi - Gam[:, r:r + 1]))
            lq = rnd("offdiag", E)(qc[:, rows] * np.exp2(gi - Gam[:, r:r + 1]))
            rt = rnd("offdiag", E)(kc[:, cols] * np.exp2(Gam[:, r:r + 1] - Gam[:, cols]))
            Aacc[:, rows, cols] = mm(lk, rt.transpose(0, 2, 1))
            Qacc[:, rows, cols] = mm(lq, rt.transpose(0, 2, 1))
        # diagonal block, anchor m for channels within DIAG_RANGE of it on both sides
        ok = np.maximum(Gam[:, r] - Gam[:, m], Gam[:, m] - Gam[:, e]) <= DIAG_RANGE    # [HV,K]
        okf = ok[:, None, :].astype(F32)
        dl = np.exp2(np.where(ok[:, None, :], gi - Gam[:, m:m + 1], 0.0)).astype(F32)
        dr = np.exp2(np.where(ok[:, None, :], Gam[:, m:m + 1] - gi, 0.0)).astype(F32)
        tk, tq = rnd("diag", tf32)(kc[:, rows] * dl * okf), rnd("diag", tf32)(qc[:, rows] * dl * okf)
        tr = rnd("diag", tf32)(kc[:, rows] * dr * okf)
        dK, dQ = mm(tk, tr.transpose(0, 2, 1)), mm(tq, tr.transpose(0, 2, 1))
        if not ok.all():   # the exact path: pairwise 2^(Γi−Γj), j ≤ i, fp32
            out = (~ok).astype(F32)[:, None, None, :]
            pw = np.exp2(np.minimum(gi[:, :, None, :] - gi[:, None, :, :], 0.0)).astype(F32)   # [HV,16,16,K]
            dK = dK + (kc[:, rows, None, :] * kc[:, None, rows, :] * pw * out).sum(-1, dtype=F32)
            dQ = dQ + (qc[:, rows, None, :] * kc[:, None, rows, :] * pw * out).sum(-1, dtype=F32)
        Aacc[:, rows, rows] = dK
        Qacc[:, rows, rows] = dQ
    low = np.tril(np.ones((C, C), bool), -1)
    Kp = np.where(low, Aacc, 0.0).astype(F32)                    # K' (strict lower, no β)
    A = (bc[:, :, None] * Kp).astype(F32)                        # β on the rows
    Aqk = rnd("Aqk", E)(np.where(np.tril(np.ones((C, C), bool)), F32(scale) * Qacc, 0.0))
    e2 = np.exp2(Gam).astype(F32)
    gl = Gam[:, -1:, :]
    qg = rnd("qg", E)(F32(scale) * qc * e2)
    kg = rnd("kg", E)(kc * np.exp2(gl - Gam))
    k2g = rnd("k2g", E)(kc * e2)
    glast = np.exp2(Gam[:, -1, :]).astype(F32)
    # diagonal inverses
    Tdiag = [fsub(A[:, 16 * I:16 * I + 16, 16 * I:16 * I + 16]) for I in range(nb)]
    if wu == "today":
        T = np.zeros((HV, C, C), F32)
        for I in range(nb):
            T[:, 16 * I:16 * I + 16, 16 * I:16 * I + 16] = Tdiag[I]
        s = 16
        while s < C:   # levels: T_IJ = −T_II (A_IJ T_JJ), tf32 operands
            for b0 in range(0, C, 2 * s):
                J, I = slice(b0, b0 + s), slice(b0 + s, b0 + 2 * s)
                Y = mm(tf32(A[:, I, J]), tf32(T[:, J, J]))
                T[:, I, J] = -mm(tf32(T[:, I, I]), tf32(Y))
            s *= 2
        T16 = rnd("T16", E)(T * bc[:, None, :])
        w, u = rnd("wu", E)(mm(T16, k2g)), rnd("wu", E)(mm(T16, vc))
    else:
        # bfs-16: every operand 16-bit; bfs-tf32: every operand tf32; bfs-mixed: the K' products 16-bit, the T_II
        # product tf32 (its residual and T_II diag β)
        op_k = tf32 if wu == "bfs-tf32" else E
        op_t = E if wu == "bfs-16" else tf32
        Td = np.concatenate([Tdiag[I][:, :, :] for I in range(nb)], axis=1)         # [HV, C, 16]
        w, u = (rnd("wu", E)(bfs_chunk(Kp, Td, bc, X, op_k=op_k, op_t=op_t)) for X in (k2g, vc))
    return dict(w=w, u=u, qg=qg, kg=kg, Aqk=Aqk, glast=glast)


def model_seq(q, k, v, g2, b, S, scale, E, C, wu):
    """q, k, g2 [HV, L, K], v [HV, L, V], b [HV, L], S [HV, K, V] fp32 -> (o [HV, L, V], S)."""
    HV, L, K = q.shape
    o = np.empty(v.shape, F32)
    for c0 in range(0, L, C):
        n = min(C, L - c0)
        pad = lambda x: np.pad(x[:, c0:c0 + n], [(0, 0), (0, C - n)] + [(0, 0)] * (x.ndim - 2))
        gc = pad(g2)    # rows past the sequence add nothing to Γ
        s = prep(pad(q), pad(k), pad(v), gc, pad(b), scale, E, C, wu)
        Sb = rnd("Sb", E)(S)
        P = mm(s["w"], Sb)
        O = mm(s["qg"], Sb)
        vn = rnd("vnew", E)(s["u"] - P)
        O = O + mm(s["Aqk"], vn)
        S = (s["glast"][:, :, None] * S + mm(s["kg"].transpose(0, 2, 1), vn)).astype(F32)
        o[:, c0:c0 + n] = rnd("o", E)(O)[:, :n]
    return o, S


def model(c: Case, r, E, K, V, C=64, wu="today"):
    q, k, v, g2, b = prepared(c, r, E, K)
    B, T = c.shape_BT
    HV = c.HV
    scale = c.scale if c.scale is not None else K ** -0.5
    seqs = [(0, int(a), int(z)) for a, z in zip(c.cu, c.cu[1:])] if c.cu else [(bb, 0, T) for bb in range(B)]
    o = np.zeros((B, T, HV, V), F32)
    hts = []
    for n, (bb, s0, s1) in enumerate(seqs):
        S = (r["h0"][n].astype(F32) if r["h0"] is not None else np.zeros((HV, K, V), F32))
        if s1 > s0:
            hm = lambda x: np.ascontiguousarray(x[bb, s0:s1].swapaxes(0, 1))
            os_, S = model_seq(hm(q), hm(k), hm(v), hm(g2), np.ascontiguousarray(b[bb, s0:s1].T), S, scale, E, C, wu)
            o[bb, s0:s1] = os_.swapaxes(0, 1)
        hts.append(S)
    return o, np.stack(hts)


# ---- driver --------------------------------------------------------------------------------------

MEASURED = ROOT / "bench/results/h200-2026-12-05-checks/call3/chunk_kimi_linear_chunk/chunk-accuracy.json"


def measured_rows():
    d = json.loads(MEASURED.read_text())
    return {row["case"]: row for row in d["sessions"][-1]["rows"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="today,bfs-16,bfs-tf32",
                    help="comma list of VARIANT[@C]: VARIANT in today, bfs-16, bfs-tf32, bfs-mixed; C the state step in tokens "
                         "(16, 32, 64; default 64). Default: %(default)s")
    ap.add_argument("--cases", default="all", help="comma list of case ids (kda2/bench/cases.py), or all (default)")
    ap.add_argument("--seed", type=int, default=20261130, help="base seed, as the GPU test's --seed (default %(default)s)")
    ap.add_argument("--round", default="", help=f"comma list of POINT=KIND: the rounding at POINT ({', '.join(POINTS)}) "
                    f"becomes KIND ({', '.join(KINDS)}; 16 = the case's 16-bit type); default: the kernel's")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    cases = CASES if args.cases == "all" else [c for c in CASES if c.id in set(args.cases.split(","))]
    if not cases:
        ap.error(f"--cases names no case: {args.cases}")
    variants = []
    for v in args.variants.split(","):
        name, _, cs = v.partition("@")
        if name not in ("today", "bfs-16", "bfs-tf32", "bfs-mixed") or (cs and cs not in ("16", "32", "64")):
            ap.error(f"--variants: bad entry {v!r} (VARIANT in today, bfs-16, bfs-tf32, bfs-mixed; @16, @32 or @64)")
        variants.append((v, name, int(cs or 64)))
    for item in filter(None, args.round.split(",")):
        point, _, kind = item.partition("=")
        if point not in POINTS or kind not in KINDS:
            ap.error(f"--round: bad entry {item!r} (POINT=KIND; points: {', '.join(POINTS)}; kinds: {', '.join(KINDS)})")
        ROUND[point] = kind
    meas = measured_rows() if MEASURED.exists() else {}
    rows = []
    hdr = f"{'case':58s} {'H200 o':>8s} " + " ".join(f"{v + ' o':>14s} {v + ' S':>14s}" for v, _, _ in variants)
    print(hdr, flush=True)
    for c in cases:
        seed = args.seed + CASES.index(c)
        r, E = inputs(c, seed)
        _E[0] = E
        o_ref, ht_ref = reference(c, r)
        row = {"case": c.id, "seed": seed}
        m = meas.get(c.id)
        if m and m["seed"] == seed:
            row["h200_o"], row["h200_state"] = m["ours_o"], m["ours_state"]
        cells = []
        for v, name, C in variants:
            t0 = time.time()
            o, ht = model(c, r, E, 128, 128, C=C, wu=name)
            eo = ref.relative_l2(o, o_ref)
            es = ref.relative_l2(ht, ht_ref) if c.final else None
            row[v] = {"o": eo, "state": es, "finite": bool(np.isfinite(o).all() and np.isfinite(ht).all()),
                      "s": round(time.time() - t0, 2)}
            cells.append(f"{eo:14.3e} {es if es is not None else float('nan'):14.3e}")
        print(f"{c.id:58s} {row.get('h200_o', float('nan')):8.2e} " + " ".join(cells), flush=True)
        rows.append(row)
    if args.out:
        args.out.write_text(json.dumps({"seed": args.seed, "round": args.round, "variants": [v for v, _, _ in variants], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
