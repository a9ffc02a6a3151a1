"""The GPU test's chunk cases through kda2.reference.chunk_model (the chunk kernels' rounding model), per variant.

Why: no GPU could be had on 2026-12-05 (twice), and issue 12's next prep changes (experiments/2026-12-05-fused-study
§5) each move a rounding point. The model runs the same inputs as tests/gpu/test_chunk_gpu.py (bench/cases.py
draw, same seeds), so a variant's error against the fp64 reference can be read before its kernel exists; the H200's
measured errors on those inputs (bench/results/h200-2026-12-05-checks/call3) sit beside it, which says how far to
trust it. What is modelled: kda2/reference/chunk_model.py's docstring. Variants: today (prep_wu levels), bfs-mixed
(prep_wu bfs), bfs-16 and bfs-tf32 (bfs with other operand types), shared16 and bfs-shared16 (study §5.2's shared
off-diagonal right factors, rounded twice), each @16 / @32 for a state step of that many tokens (study §5.4);
--round moves any rounding point.
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
from kda2.bench.cases import CASES, Case, as_passed, draw, ref_options   # noqa: E402
from kda2.reference import chunk_model                 # noqa: E402

F32 = np.float32
#: a variant's name -> (prep_wu, rounding overrides) of kda2.reference.chunk_model
VARIANTS = {"today": ("levels", {}), "bfs-mixed": ("bfs", {}), "bfs-16": ("bfs", {"bfs_t": "16"}),
            "bfs-tf32": ("bfs", {"bfs_k": "tf32"}), "shared16": ("levels", {}), "bfs-shared16": ("bfs", {})}


# ---- inputs as the GPU test passes them -----------------------------------------------------------

def inputs(c: Case, seed: int, K: int = 128, V: int = 128):
    r = as_passed(draw(c, seed, K, V), c)
    return dict(r, h0=r["initial_state"], cu=r["cu_seqlens"])


def reference(c: Case, r):
    return ref.recurrent_kda_ref(r["q"], r["k"], r["v"], r["g"], r["beta"], initial_state=r["h0"],
                                 output_final_state=True, cu_seqlens=list(c.cu) if c.cu else None,
                                 A_log=r["A_log"], dt_bias=r["dt_bias"], **ref_options(c))


def model(c: Case, r, variant: str = "today", chunk: int = 64, rounding=None):
    prep_wu, over = VARIANTS[variant]
    return chunk_model.forward(r["q"], r["k"], r["v"], r["g"], r["beta"], dtype=c.dtype, initial_state=r["h0"],
                               cu_seqlens=r["cu"], prep_wu=prep_wu, chunk=chunk, rounding={**over, **(rounding or {})},
                               offdiag_right="shared16" if variant.endswith("shared16") else "direct",
                               A_log=r["A_log"], dt_bias=r["dt_bias"], **ref_options(c))


# ---- driver --------------------------------------------------------------------------------------

MEASURED = ROOT / "bench/results/h200-2026-12-05-checks/call3/chunk_kimi_linear_chunk/chunk-accuracy.json"


def measured_rows():
    d = json.loads(MEASURED.read_text())
    return {row["case"]: row for row in d["sessions"][-1]["rows"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="today,bfs-16,bfs-tf32",
                    help=f"comma list of VARIANT[@C]: VARIANT in {', '.join(VARIANTS)}; C the state step in tokens "
                         "(16, 32, 64; default 64). Default: %(default)s")
    ap.add_argument("--cases", default="all", help="comma list of case ids (kda2/bench/cases.py), or all (default)")
    ap.add_argument("--seed", type=int, default=20261130, help="base seed, as the GPU test's --seed (default %(default)s)")
    ap.add_argument("--round", default="", help=f"comma list of POINT=KIND: the rounding at POINT "
                    f"({', '.join(chunk_model.POINTS)}) becomes KIND ({', '.join(chunk_model.KINDS)}; 16 = the case's "
                    f"16-bit type); default: the kernels'")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    cases = CASES if args.cases == "all" else [c for c in CASES if c.id in set(args.cases.split(","))]
    if not cases:
        ap.error(f"--cases names no case: {args.cases}")
    variants = []
    for v in args.variants.split(","):
        name, _, cs = v.partition("@")
        if name not in VARIANTS or (cs and cs not in ("16", "32", "64")):
            ap.error(f"--variants: bad entry {v!r} (VARIANT in {', '.join(VARIANTS)}; @16, @32 or @64)")
        variants.append((v, name, int(cs or 64)))
    rounding = {}
    for item in filter(None, args.round.split(",")):
        point, _, kind = item.partition("=")
        if point not in chunk_model.POINTS or kind not in chunk_model.KINDS:
            ap.error(f"--round: bad entry {item!r} (POINT=KIND; points: {', '.join(chunk_model.POINTS)}; kinds: "
                     f"{', '.join(chunk_model.KINDS)})")
        rounding[point] = kind
    meas = measured_rows() if MEASURED.exists() else {}
    rows = []
    hdr = f"{'case':58s} {'H200 o':>8s} " + " ".join(f"{v + ' o':>14s} {v + ' S':>14s}" for v, _, _ in variants)
    print(hdr, flush=True)
    for c in cases:
        seed = args.seed + CASES.index(c)
        r = inputs(c, seed)
        o_ref, ht_ref = reference(c, r)
        row = {"case": c.id, "seed": seed}
        m = meas.get(c.id)
        if m and m["seed"] == seed:
            row["h200_o"], row["h200_state"] = m["ours_o"], m["ours_state"]
        cells = []
        for v, name, C in variants:
            t0 = time.time()
            o, ht = model(c, r, name, C, rounding)
            eo = ref.relative_l2(o, o_ref)
            es = ref.relative_l2(ht, ht_ref) if c.final else None
            row[v] = {"o": eo, "state": es, "finite": bool(np.isfinite(o).all() and np.isfinite(ht).all()),
                      "s": round(time.time() - t0, 2)}
            cells.append(f"{eo:14.3e} {es if es is not None else float('nan'):14.3e}")
        print(f"{c.id:58s} {row.get('h200_o', float('nan')):8.2e} " + " ".join(cells), flush=True)
        rows.append(row)
    if args.out:
        args.out.write_text(json.dumps({"seed": args.seed, "round": args.round,
                                        "variants": [v for v, _, _ in variants], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
