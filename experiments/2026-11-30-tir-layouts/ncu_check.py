"""Predicted vs measured shared-memory wavefronts per instruction of the chunk kernels' tiles (H200, ncu).

The TIR stage predicts, per access of every tile (plan.json: wavefronts_after / instructions), the wavefronts
one warp-level instruction costs under the layout it chose. ncu counts, per kernel, the shared-memory
wavefronts and instructions by kind (ldmatrix, loads, stores). A kind that only one tile's accesses issue in a
kernel is a per-tile check: ldmatrix in the prep kernel (kv), in the state/fold kernels (w, qg, kg, Aqk:
all XOR-swizzled), loads in the combine kernel (x reads). The combine's stores mix its fill and its row stores
(predicted 1 and 4 per instruction), so their mix is predicted from the instruction counts of one launch.
Usage: python ncu_check.py PLAN_JSON METRICS_CSV OUT_JSON
"""
import csv
import json
import sys
from collections import defaultdict

plan = json.load(open(sys.argv[1]))
rows = list(csv.reader(open(sys.argv[2])))
head = next(i for i, r in enumerate(rows) if "Metric Name" in r)
cols = rows[head]
K_NAME, M_NAME, M_VAL = cols.index("Kernel Name"), cols.index("Metric Name"), cols.index("Metric Value")
meas: dict = defaultdict(dict)
for r in rows[head + 1:]:
    if len(r) <= M_VAL:
        continue
    kern = next((k for k in ("prep", "state", "fold", "combine") if f"kda2_chunk_{k}_" in r[K_NAME]), None)
    if kern:
        meas[kern][r[M_NAME]] = float(r[M_VAL].replace(",", "") or 0)


def per_instr(*accesses):
    wf = sum(plan["wavefronts_after"][a] for a in accesses)
    ins = sum(plan["instructions"][a] for a in accesses)
    return wf / ins


def ratio(kern, wf, ins):
    m = meas.get(kern, {})
    if wf not in m or ins not in m or not m[ins]:
        return None
    return m[wf] / m[ins]


LD, ST = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
LDSM_WF = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum"
I_LD, I_ST = "smsp__sass_inst_executed_op_shared_ld.sum", "smsp__sass_inst_executed_op_shared_st.sum"
I_LDSM = "smsp__sass_inst_executed_op_ldsm.sum"
checks = [
    ("kv (prep, ldmatrix / .trans, row stride %d)" % plan["lds_kv"], "prep", LDSM_WF, I_LDSM, per_instr("kv_ldmatrix")),
    ("w, qg, kg, Aqk (state EMIT, ldmatrix, XOR swizzle)", "state", LDSM_WF, I_LDSM,
     per_instr("w_ldmatrix", "qg_ldmatrix", "kg_ldmatrix_trans", "aqk_ldmatrix")),
    ("w, kg (FOLD, ldmatrix, XOR swizzle)", "fold", LDSM_WF, I_LDSM, per_instr("w_ldmatrix", "kg_ldmatrix_trans")),
    ("x (combine, float4 row reads, row stride %d)" % plan["lds_x"], "combine", LD, I_LD, per_instr("x_read")),
]
out = {"plan_layouts": plan["pass"]["layouts"], "measured": meas, "checks": []}
for what, kern, wf, ins, pred in checks:
    got = ratio(kern, wf, ins)
    out["checks"].append({"tile": what, "kernel": kern, "predicted_per_instruction": pred, "measured_per_instruction": got})
    print(f"{what:<58} predicted {pred:5.2f}  measured {'n/a' if got is None else f'{got:5.2f}'} wavefronts/instruction")
# combine stores: fill (K·32/256 per thread, once) + row stores (16 per thread per segment step); 3 steps here
steps, warps = 3, 8
fill_i, store_i = 16 * warps, 16 * warps * steps
pred = (fill_i * per_instr("x_fill") + store_i * per_instr("x_store")) / (fill_i + store_i)
got = ratio("combine", ST, I_ST)
out["checks"].append({"tile": "x (combine stores: fill + row stores)", "kernel": "combine", "predicted_per_instruction": pred,
                      "measured_per_instruction": got})
print(f"{'x (combine stores: fill + row stores, stride %d)' % plan['lds_x']:<58} predicted {pred:5.2f}  measured "
      f"{'n/a' if got is None else f'{got:5.2f}'} wavefronts/instruction")
json.dump(out, open(sys.argv[3], "w"), indent=1)
