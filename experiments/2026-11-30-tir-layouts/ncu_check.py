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
    ("x (combine, float4 row reads, row stride %d)" % plan["lds_x"], "combine", LD, I_LD, per_instr("x_read")),
]
out = {"plan_layouts": plan["pass"]["layouts"], "measured": meas, "checks": []}
for what, kern, wf, ins, pred in checks:
    got = ratio(kern, wf, ins)
    out["checks"].append({"tile": what, "kernel": kern, "predicted_per_instruction": pred, "measured_per_instruction": got})
    print(f"{what:<58} predicted {pred:5.2f}  measured {'n/a' if got is None else f'{got:5.2f}'} wavefronts/instruction")
# combine stores: its fill (once per CTA) and its row stores (once per segment step; 3 steps in run_case.py)
steps = 3
wf = plan["wavefronts_after"]["x_fill"] + steps * plan["wavefronts_after"]["x_store"]
ins = plan["instructions"]["x_fill"] + steps * plan["instructions"]["x_store"]
pred, got = wf / ins, ratio("combine", ST, I_ST)
out["checks"].append({"tile": "x (combine stores: fill + row stores)", "kernel": "combine", "predicted_per_instruction": pred,
                      "measured_per_instruction": got})
print(f"{'x (combine stores: fill + 3 steps of row stores, stride %d)' % plan['lds_x']:<58} predicted {pred:5.2f}  "
      f"measured {'n/a' if got is None else f'{got:5.2f}'} wavefronts/instruction")
# ldmatrix: ncu has no ldmatrix-only wavefront counter here; its loads' wavefronts include them, so
# (load wavefronts - one per other load instruction) / ldmatrix instructions bounds them from above. XOR-swizzled
# tiles predict 4 (one per 8x8 matrix); the plain layout would be 32 (8-way), far above any such bound.
for kern in ("state", "fold"):
    m = meas.get(kern, {})
    if m.get(I_LDSM):
        bound = (m[LD] - m[I_LD]) / m[I_LDSM]
        out["checks"].append({"tile": "w, qg, kg, Aqk ldmatrix (upper bound)", "kernel": kern, "predicted_per_instruction": 4.0,
                              "measured_at_most": bound, "plain_layout_would_be": 32.0})
        print(f"{'ldmatrix of w/qg/kg/Aqk in ' + kern + ' (XOR swizzle)':<58} predicted  4.00  measured <= {bound:5.2f} "
              "(plain layout: 32)")
json.dump(out, open(sys.argv[3], "w"), indent=1)
