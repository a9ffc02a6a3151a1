"""The fused 16-token kernel's measured errors (a GPU test log of tests/gpu/test_fused_gpu.py) against the rounding
model's prediction for its design (kda2.reference.chunk_model.FUSED16) on the same inputs: one line per case and the
range of measured / modelled.

usage: python model_vs_measured.py TEST_LOG [OUT.json]
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from kda2 import reference as ref  # noqa: E402
from kda2.bench.cases import CASES, as_passed, draw, ref_options  # noqa: E402
from kda2.reference import chunk_model  # noqa: E402

pat = re.compile(r"fused16 (\S+) seed (\d+): o ([0-9.e+-]+) state ([0-9.e+-]+)")
measured = {}
for m in pat.finditer(Path(sys.argv[1]).read_text()):
    measured.setdefault(m.group(1), (int(m.group(2)), float(m.group(3)), float(m.group(4))))
rows, ratios = [], []
for case in CASES:
    if case.id not in measured:
        continue
    seed, mo, ms = measured[case.id]
    x = as_passed(draw(case, seed, 128, 128), case)
    cu = list(case.cu) if case.cu else None
    o_ref, ht_ref = ref.recurrent_kda_ref(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"],
                                          dt_bias=x["dt_bias"], initial_state=x["initial_state"],
                                          output_final_state=True, cu_seqlens=cu, **ref_options(case))
    o_m, ht_m = chunk_model.forward(x["q"], x["k"], x["v"], x["g"], x["beta"], dtype=case.dtype, A_log=x["A_log"],
                                    dt_bias=x["dt_bias"], initial_state=x["initial_state"], cu_seqlens=x["cu_seqlens"],
                                    **chunk_model.FUSED16, **ref_options(case))
    eo = ref.relative_l2(o_m, o_ref)
    es = ref.relative_l2(ht_m, ht_ref) if case.final else None
    r_o = mo / eo
    r_s = ms / es if es else None
    ratios.append((r_o, r_s))
    rows.append(dict(case=case.id, seed=seed, measured_o=mo, model_o=eo, measured_state=ms if case.final else None,
                     model_state=es))
    print(f"{case.id:<58} o {mo:.3e} / {eo:.3e} = {r_o:.3f}   state "
          + (f"{ms:.3e} / {es:.3e} = {r_s:.3f}" if es else "-"), flush=True)
ro = [r for r, _ in ratios]
rs = [r for _, r in ratios if r is not None]
print(f"{len(rows)} cases: o measured / model {min(ro):.3f} – {max(ro):.3f}; state {min(rs):.3f} – {max(rs):.3f}")
if len(sys.argv) > 2:
    Path(sys.argv[2]).write_text(json.dumps(rows, indent=1))
