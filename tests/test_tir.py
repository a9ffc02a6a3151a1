"""Tests of the TIR stage (kda2.tir): the smem staging PrimFunc, the kda2.bank_pad pass, the plan.

The bank-conflict numbers are checked against `brute_force_*` below, an independent pure-Python
model written from the access-pattern description (no TVM, no IR): every warp, every lane, every
loop iteration, distinct 4-byte words per bank per phase.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
try:
    import kda2  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(SRC))

from kda2.tir import TirBudgetError, TirConfigError, plan_variant, write_plan  # noqa: E402
from kda2.plan.smem import COMBINE_COLS  # noqa: E402
from kda2.plan.profile import load_profiles  # noqa: E402
from kda2.plan.variant import variant_name  # noqa: E402

pytest.importorskip("tvm")

BUDGET = 227 * 1024          # H100/H200 opt-in shared memory per block


def cfg(**over) -> dict:
    base = {"family": "recurrent", "arch": "sm_90a", "k": 128, "v": 128, "bucket": 4096,
            "state_layout": "k_first", "v_per_warp": 8, "warps": 4, "staging": "smem",
            "k_map": "strided", "reduce": "butterfly", "gate_modes": ["softplus"],
            "qk_l2norm": True, "beta_sigmoid": True, "varlen": False}
    base.update(over)
    return base


# ------------------------------------------------------------------------------------------------
# independent brute-force model of the accesses and of the bank model
# ------------------------------------------------------------------------------------------------

def _widest(n: int) -> int:
    return next(w for w in (4, 2, 1) if n % w == 0)


def brute_force_instructions(k: int, warps: int, vpw: int, k_map: str) -> dict:
    """{access: [(vector floats, [per lane (row, col) or None if the lane is idle])]} per warp op."""
    bv, nt = warps * vpw, 32 * warps
    cv, vec = _widest(bv), _widest(vpw)
    n_vectors, per_row = k * bv // cv, bv // cv
    out: dict = {"fill": [], "read": [], "write": [], "drain": []}
    for w in range(warps):
        for it in range(math.ceil(n_vectors / nt)):
            lanes = []
            for lane in range(32):
                f = it * nt + 32 * w + lane
                lanes.append((f // per_row, (f % per_row) * cv) if f < n_vectors else None)
            out["fill"].append((cv, lanes))
            out["drain"].append((cv, lanes))
        for i in range(k // 32):
            for j in range(0, vpw, vec):
                lanes = []
                for lane in range(32):
                    row = lane + 32 * i if k_map == "strided" else lane * (k // 32) + i
                    lanes.append((row, w * vpw + j))
                out["read"].append((vec, lanes))
                out["write"].append((vec, lanes))
    return out


def _phases(instructions: list, stride: int):
    """Per phase, its worst bank's distinct words: 32 lanes for 4-byte accesses, 16 for 8- and 16-byte ones."""
    for vec, lanes in instructions:
        per_phase = 32 if vec == 1 else 16
        for p in range(0, 32, per_phase):
            words = {r * stride + c + e
                     for rc in lanes[p:p + per_phase] if rc is not None
                     for r, c in [rc] for e in range(vec)}
            banks = Counter(word % 32 for word in words)
            yield max(banks.values(), default=0)


def brute_force_degree(instructions: list, stride: int) -> int:
    """Worst degree over the phases, relative to conflict-free (a 16-byte half-warp phase: 2 wavefronts)."""
    return max((-(-d // (2 if vec == 4 else 1)) for (vec, _), d in zip(
        [ins for ins in instructions for _ in range(1 if ins[0] == 1 else 2)], _phases(instructions, stride))),
        default=0)


def brute_force_wavefronts(instructions: list, stride: int) -> int:
    """Sum of the phases' degrees."""
    return sum(_phases(instructions, stride))


def brute_force_plan(k: int, warps: int, vpw: int, k_map: str) -> dict:
    ins = brute_force_instructions(k, warps, vpw, k_map)
    bv = warps * vpw
    vec_max = max(_widest(bv), _widest(vpw))
    cands = {pad: max(brute_force_degree(ins[a], bv + pad) for a in ins)
             for pad in range(0, 17, vec_max)}
    waves = {pad: sum(brute_force_wavefronts(ins[a], bv + pad) for a in ins) for pad in cands}
    pad = min(cands, key=lambda p: (waves[p], cands[p], p))
    return {"pad": pad, "candidates": cands,
            "before": {a: brute_force_degree(ins[a], bv) for a in ins},
            "after": {a: brute_force_degree(ins[a], bv + pad) for a in ins}}


# ------------------------------------------------------------------------------------------------
# the headline case
# ------------------------------------------------------------------------------------------------

def test_k128_w4_vpw8_strided_pad_removes_conflicts():
    plan = plan_variant(cfg(), BUDGET)
    before, after = plan["conflicts_before"], plan["conflicts_after"]
    assert set(before) == {"fill", "read", "write", "drain"}
    # unpadded (stride 32 floats): the 8 lanes of a 16-byte phase all hit the same 4 banks
    assert before["read"] > 1 and before["write"] > 1
    assert before["read"] == before["write"] == 8
    assert all(d == 1 for d in after.values()), after
    assert plan["vector_width"] == 4
    assert plan["smem_pad"] % 4 == 0 and plan["smem_pad"] > 0
    assert plan["smem_stride"] % 4 == 0
    assert plan["smem_stride"] == 32 + plan["smem_pad"]
    assert plan["smem_bytes"] == 128 * plan["smem_stride"] * 4
    # minimal: no smaller aligned pad reaches degree 1
    ins = brute_force_instructions(128, 4, 8, "strided")
    for pad in range(0, plan["smem_pad"], 4):
        assert max(brute_force_degree(ins[a], 32 + pad) for a in ins) > 1
    assert plan["pass"]["name"] == "kda2.bank_pad"
    assert plan["pass"]["candidates"][str(plan["smem_pad"])] == 1


def test_after_tir_differs_and_has_padded_extent():
    plan = plan_variant(cfg(), BUDGET)
    stride = plan["smem_stride"]
    assert plan["tir_before"] != plan["tir_after"]
    assert "T.alloc_shared((128, 32))" in plan["tir_before"]
    assert f"T.alloc_shared((128, {stride}))" in plan["tir_after"]
    assert f"(128, {stride})" not in plan["tir_before"]
    assert '"kda2.access": "read"' in plan["tir_after"]


def test_after_tir_reparses_and_compiles_with_padded_allocation():
    """The dump is valid TVMScript; compiled (no GPU needed) the allocation is K*stride floats."""
    import tvm

    plan = plan_variant(cfg(), BUDGET)
    func = tvm.script.from_source(plan["tir_after"])
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    src = tvm.compile(tvm.IRModule({"main": func}), target=target,
                      tir_pipeline="tirx").mod.imports[0].inspect_source()
    stride = plan["smem_stride"]
    assert re.findall(r"__shared__[^;]*;", src) == [
        f"__shared__ alignas(64) float sm_ptr[{128 * stride}];"]
    assert f"* {stride})" in src               # lane row offset uses the padded stride
    assert "float4" in src                      # 16-byte vector accesses survived


# ------------------------------------------------------------------------------------------------
# other shapes of the pattern
# ------------------------------------------------------------------------------------------------

def test_blocked_k_map():
    plan = plan_variant(cfg(k_map="blocked"), BUDGET)
    bf = brute_force_plan(128, 4, 8, "blocked")
    assert '"kda2.access": "read"' in plan["tir_before"] and "tx % 32 * 4 + i" in plan["tir_before"]
    assert plan["conflicts_before"] == bf["before"]
    assert plan["smem_pad"] == bf["pad"]
    assert plan["conflicts_after"] == bf["after"]
    assert max(plan["conflicts_after"].values()) < max(plan["conflicts_before"].values())
    assert plan["smem_stride"] % 4 == 0


def test_v_per_warp_2_uses_8_byte_vectors():
    plan = plan_variant(cfg(v_per_warp=2), BUDGET)
    assert plan["vector_width"] == 2 and plan["coop_vector_width"] == 4
    assert "T.vectorized(2)" in plan["tir_before"]
    bf = brute_force_plan(128, 4, 2, "strided")
    assert plan["conflicts_before"] == bf["before"]
    assert plan["conflicts_before"]["read"] > 1
    assert plan["conflicts_after"] == bf["after"]
    assert max(plan["conflicts_after"].values()) < max(plan["conflicts_before"].values())
    assert plan["smem_stride"] % 4 == 0        # the float4 fill must stay aligned


def test_single_warp():
    plan = plan_variant(cfg(k=64, warps=1, v_per_warp=16), BUDGET)
    assert plan["threads"] == 32 and plan["tile"] == [64, 16]
    assert plan["conflicts_before"]["read"] > 1
    assert plan["conflicts_after"]["read"] == 1
    bf = brute_force_plan(64, 1, 16, "strided")
    assert plan["smem_pad"] == bf["pad"]
    assert plan["conflicts_after"] == bf["after"]


def test_tiny_tile_with_2_float_rows():
    """warps=1, v_per_warp=2: BV=2, so even the cooperative copy uses float2; no pad is needed."""
    plan = plan_variant(cfg(k=32, warps=1, v_per_warp=2), BUDGET)
    assert plan["coop_vector_width"] == 2
    assert plan["smem_pad"] == 0 and plan["smem_stride"] == 2
    assert set(plan["pass"]["candidates"]) == {str(p) for p in range(0, 17, 2)}
    assert all(d == 1 for d in plan["conflicts_after"].values())


@pytest.mark.parametrize("k,warps,vpw,k_map", [
    (128, 4, 8, "strided"), (128, 4, 8, "blocked"), (64, 2, 4, "blocked"), (256, 8, 16, "strided"),
    (32, 2, 16, "blocked"), (128, 8, 2, "strided"), (64, 1, 4, "strided"), (256, 2, 8, "blocked"),
    (32, 2, 2, "strided"),             # BV=4, 64 threads, 32 float4s: half the fill lanes idle
])
def test_pass_matches_brute_force(k, warps, vpw, k_map):
    plan = plan_variant(cfg(k=k, warps=warps, v_per_warp=vpw, k_map=k_map), 10**9)
    bf = brute_force_plan(k, warps, vpw, k_map)
    assert plan["conflicts_before"] == bf["before"]
    assert plan["pass"]["candidates"] == {str(p): d for p, d in bf["candidates"].items()}
    assert plan["smem_pad"] == bf["pad"]
    assert plan["conflicts_after"] == bf["after"]
    assert plan["pass"]["misaligned"] == []


def test_pass_is_a_real_primfunc_pass_on_other_kernels():
    """The pass is generic: the notes' [64,128] row-sum tile with a 32-way column walk gets +1."""
    import tvm
    from tvm.script import tirx as T

    from kda2.tir import bankpass

    @T.prim_func
    def tile_rowsum(A_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (256, 128), "float32")
        Out = T.match_buffer(Out_ptr, (256,), "float32")
        T.device_entry()
        bx = T.cta_id([4])
        tx = T.thread_id([128])
        sm = T.alloc_shared((64, 128), "float32")
        for i in T.serial(64):
            sm[i, tx] = A[bx * 64 + i, tx]
        T.cuda.cta_sync()
        if tx < 64:
            acc = T.alloc_local((1,), "float32")
            acc[0] = T.float32(0)
            for j in T.serial(128):
                acc[0] = acc[0] + sm[tx, j]
            Out[bx * 64 + tx] = acc[0]

    p = bankpass.make_bank_pad_pass(10**6)
    assert isinstance(p, tvm.tirx.transform.PrimFuncPass)
    assert p.info.name == "kda2.bank_pad"
    out = p(tvm.IRModule({"main": tile_rowsum}))["main"]
    rec = bankpass.to_python(out.attrs["kda2.bank_pad"])["buffers"]["sm"]
    assert rec["conflicts_before"] == {"store0": 1, "load1": 32}
    assert rec["pad"] == 1 and rec["shape_after"] == [64, 129]
    assert rec["conflicts_after"] == {"store0": 1, "load1": 1}
    assert "T.alloc_shared((64, 129))" in out.script()


def test_bank_model_broadcast_guards_and_last_warp():
    """Same word = broadcast (counts once); guarded-off lanes do not count; the last warp counts."""
    import tvm
    from tvm.script import tirx as T

    from kda2.tir import bankpass

    @T.prim_func
    def probe(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64,), "float32")
        T.device_entry()
        tx = T.thread_id([64])
        sm = T.alloc_shared((32, 32), "float32")
        acc = T.alloc_local((1,), "float32")
        for i in T.serial(1, annotations={"kda2.access": "same_word"}):
            acc[0] = sm[0, 5]                       # 32 lanes, 1 word: broadcast, degree 1
        for i in T.serial(1, annotations={"kda2.access": "two_rows"}):
            acc[0] = sm[tx % 2, 5]                  # 2 distinct words in bank 5: degree 2
        for i in T.serial(1, annotations={"kda2.access": "guarded"}):
            if tx < 4:
                acc[0] = sm[tx, 0]                  # only 4 lanes active: degree 4, not 32
        for i in T.serial(1, annotations={"kda2.access": "last_warp"}):
            if tx >= 32:
                acc[0] = sm[tx - 32, 0]             # only warp 1 touches smem: degree 32
        A[tx] = acc[0]

    out = bankpass.make_bank_pad_pass(10**6)(tvm.IRModule({"main": probe}))["main"]
    rec = bankpass.to_python(out.attrs["kda2.bank_pad"])["buffers"]["sm"]
    assert rec["conflicts_before"] == {"same_word": 1, "two_rows": 2, "guarded": 4, "last_warp": 32}
    assert rec["pad"] == 1
    assert rec["conflicts_after"] == {"same_word": 1, "two_rows": 1, "guarded": 1, "last_warp": 1}


# ------------------------------------------------------------------------------------------------
# budget, direct staging, switches, files, determinism
# ------------------------------------------------------------------------------------------------

def test_budget_error_is_one_line_with_numbers():
    c = cfg(k=256, warps=8, v_per_warp=16)
    with pytest.raises(TirBudgetError) as e:
        plan_variant(c, 48 * 1024)
    msg = str(e.value)
    assert "\n" not in msg
    assert variant_name(c) in msg
    assert "131072" in msg and "49152" in msg


def test_budget_that_fits_only_unpadded_tile_keeps_pad_zero():
    plan = plan_variant(cfg(), 128 * 32 * 4)
    assert plan["smem_pad"] == 0 and plan["smem_bytes"] == 128 * 32 * 4
    assert plan["conflicts_after"] == plan["conflicts_before"]
    assert plan_variant(cfg(), 128 * 36 * 4)["smem_pad"] == 4


def test_direct_staging_plan(tmp_path):
    c = cfg(staging="direct")
    plan = write_plan(c, BUDGET, tmp_path / "plan.json", tmp_path / "before.tir",
                      tmp_path / "after.tir")
    assert plan["smem_stride"] == 0 and plan["smem_bytes"] == 0 and plan["smem_pad"] == 0
    assert plan["conflicts_before"] == {} and plan["conflicts_after"] == {}
    on_disk = json.loads((tmp_path / "plan.json").read_text())
    assert on_disk["staging"] == "direct" and on_disk["smem_stride"] == 0
    for name in ("before.tir", "after.tir"):
        text = (tmp_path / name).read_text()
        assert "@T.prim_func" in text and "no shared-memory staging" in text
        assert "alloc_shared" not in text
    # direct staging needs no smem, so even a zero budget plans
    assert plan_variant(c, 0)["smem_bytes"] == 0


def test_enable_pass_false_keeps_pad_zero():
    off = plan_variant(cfg(), BUDGET, enable_pass=False)
    on = plan_variant(cfg(), BUDGET)
    assert off["smem_pad"] == 0 and off["smem_stride"] == 32
    assert off["conflicts_after"] == off["conflicts_before"] == on["conflicts_before"]
    assert "T.alloc_shared((128, 32))" in off["tir_after"]
    assert on["smem_stride"] != off["smem_stride"]


def test_write_plan_files_and_determinism(tmp_path):
    paths = [tmp_path / "a" / n for n in ("plan.json", "before.tir", "after.tir")]
    plan = write_plan(cfg(), BUDGET, *paths)
    first = [p.read_bytes() for p in paths]
    on_disk = json.loads(first[0])
    assert "tir_before" not in on_disk and "tir_after" not in on_disk
    assert on_disk == {k: v for k, v in plan.items() if not k.startswith("tir_")}
    assert first[1].decode() == plan["tir_before"] + "\n"
    assert first[2].decode() == plan["tir_after"] + "\n"
    assert not [p for p in paths[0].parent.iterdir() if p.name.startswith(".")]  # no tmp left
    write_plan(cfg(), BUDGET, *paths)
    assert [p.read_bytes() for p in paths] == first
    assert plan_variant(cfg(k_map="blocked"), BUDGET) == plan_variant(cfg(k_map="blocked"), BUDGET)


def test_plan_is_identical_in_a_fresh_process(tmp_path):
    """Byte-identical plan.json and dumps across processes (cache keys depend on it)."""
    write_plan(cfg(), BUDGET, tmp_path / "p.json", tmp_path / "b.tir", tmp_path / "a.tir")
    code = ("import sys, json; from kda2.tir import write_plan; "
            "write_plan(json.loads(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:])")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    other = tmp_path / "o"
    subprocess.run([sys.executable, "-c", code, json.dumps(cfg()), str(BUDGET),
                    str(other / "p.json"), str(other / "b.tir"), str(other / "a.tir")],
                   check=True, env=env, timeout=120)
    for name in ("p.json", "b.tir", "a.tir"):
        assert (other / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_failed_plan_writes_nothing(tmp_path):
    with pytest.raises(TirBudgetError):
        write_plan(cfg(k=256, warps=8, v_per_warp=16), 1024, tmp_path / "p.json",
                   tmp_path / "b.tir", tmp_path / "a.tir")
    assert list(tmp_path.iterdir()) == []


def test_bad_configs_name_the_field():
    with pytest.raises(TirConfigError, match="k_map"):
        plan_variant(cfg(k_map=None), BUDGET)
    with pytest.raises(TirConfigError, match="'k'"):
        plan_variant(cfg(k=48), BUDGET)
    with pytest.raises(TirConfigError, match="staging"):
        plan_variant(cfg(staging="tma"), BUDGET)
    with pytest.raises(TirConfigError, match="smem_budget"):
        plan_variant(cfg(), -1)


# ------------------------------------------------------------------------------------------------
# the persistent kernels' next-tile copy buffer
# ------------------------------------------------------------------------------------------------

#: (config overrides, (runs, run) of a thread's share: the vectors its direct loads read; recurrent.cuh PF_RUN(S))
PERSISTENT = [
    (dict(k_map="all", v_per_warp=16, lane_cols=4), (16, 4)),          # RPL rows of lane_cols columns
    (dict(k_map="all", v_per_warp=16, lane_cols=2), (32, 2)),
    (dict(k_map="all", v_per_warp=8, lane_cols=4, warps=8), (8, 4)),
    (dict(state_layout="v_first", k_map="blocked", v_per_warp=8), (8, 4)),   # a column's K/32 key rows
    (dict(state_layout="v_first", k_map="strided", v_per_warp=4), (16, 1)),  # one element per run
    (dict(k_map="strided", v_per_warp=8), (4, 8)),                            # k_first: a key row's columns
]


@pytest.mark.parametrize("over,share", PERSISTENT, ids=lambda x: "-".join(f"{v}" for v in x.values())
                         if isinstance(x, dict) else None)
def test_persistent_copy_buffer_is_each_threads_pieces_side_by_side(over, share):
    """The plan of a persistent variant: its thread's share as pieces of the widest 1/2/4 floats dividing a run,
    row m * pieces + p holding piece p of run m of every thread: the CTA's tile exactly (no pad), every copy and
    read conflict-free by the independent model (each warp's own pieces, 16-byte pieces in half-warp phases)."""
    c = cfg(staging="direct", persistent=True, **{"lane_cols": 1, **over})
    plan = plan_variant(c, 48 * 1024)
    runs, run = share
    vec = _widest(run)
    rows, nt = runs * (run // vec), 32 * c["warps"]
    assert (plan["prefetch_rows"], plan["prefetch_vec"], plan["prefetch_row"]) == (rows, vec, nt * vec)
    assert plan["prefetch_bytes"] == rows * nt * vec * 4 == c["k"] * c["warps"] * c["v_per_warp"] * 4
    ins = [(vec, [(r, (32 * w + lane) * vec) for lane in range(32)]) for w in range(c["warps"]) for r in range(rows)]
    assert brute_force_degree(ins, nt * vec) == 1
    assert plan["prefetch"]["conflicts_after"] == {"prefetch_copy": 1, "prefetch_read": 1}
    sampled = [i for w in sorted({0, c["warps"] - 1}) for i in ins[w * rows:(w + 1) * rows]]  # the pass's warps
    assert plan["prefetch"]["wavefronts_after"]["prefetch_read"] == brute_force_wavefronts(sampled, nt * vec)
    assert "kda2_prefetch_stage" in plan["tir_before"] and "kda2_prefetch_stage" in plan["tir_after"]
    # the grid form of the same tile has no copy buffer
    grid = plan_variant({**c, "persistent": False}, 48 * 1024)
    assert "prefetch_row" not in grid and "kda2_prefetch_stage" not in grid["tir_after"]


def test_persistent_budget_and_bad_configs():
    """The buffer beside the k_map=all token stage must fit the budget (one line, both numbers); persistence needs
    direct staging and a bool."""
    c = cfg(staging="direct", k_map="all", v_per_warp=16, lane_cols=4, persistent=True)
    fits = plan_variant(c, 48 * 1024)
    need = fits["prefetch_bytes"] + 4 * 3 * 8 * fits["stage_row"] * 4  # + WARPS x 3 x KSPLIT x STAGE_ROW floats
    assert plan_variant(c, need)["prefetch_bytes"] == 32768
    with pytest.raises(TirBudgetError) as e:
        plan_variant(c, need - 4)
    assert "\n" not in str(e.value) and str(need) in str(e.value) and str(need - 4) in str(e.value)
    with pytest.raises(TirBudgetError, match="65536"):
        plan_variant({**c, "warps": 8}, 48 * 1024)
    with pytest.raises(TirConfigError, match="persistent"):
        plan_variant(cfg(persistent=True), BUDGET)  # smem staging
    with pytest.raises(TirConfigError, match="persistent"):
        plan_variant(cfg(staging="direct", persistent=1), BUDGET)


def test_persistent_preload_budget_counts_the_preload_buffer():
    """A persistent preload kernel's shared memory is the copy buffer plus the preload buffer and its prepared-token
    table (no per-warp token stage), as the agents' estimate counts it: the budget check uses that sum."""
    from kda2.plan.model import preload_bytes

    c = cfg(staging="direct", k_map="all", v_per_warp=16, lane_cols=4, persistent=True, preload=8)
    fits = plan_variant(c, 64 * 1024)
    need = fits["prefetch_bytes"] + preload_bytes(c, fits["stage_row"])
    assert preload_bytes(c, fits["stage_row"]) > 4 * 3 * 8 * fits["stage_row"] * 4   # more than the stage it replaces
    assert plan_variant(c, need)["prefetch_bytes"] == fits["prefetch_bytes"]
    with pytest.raises(TirBudgetError, match=str(need)):
        plan_variant(c, need - 4)


def _bulk_reads(c: dict) -> list:
    """Independent model of a bulk-staged kernel's tile reads (recurrent.cuh bulk_tile_regs / run_all_k): per warp
    instruction, (vector floats, [per lane (row, col)]) on the [rows, row] tile of the state's own rows."""
    k, vpw, warps = c["k"], c["v_per_warp"], c["warps"]
    kpl, out = k // 32, []
    for w in range(warps):
        if c["k_map"] == "all":
            cw = c["lane_cols"]
            cg = vpw // cw
            rpl = k // (32 // cg)
            out += [(cw, [((lane // cg) * rpl + r, w * vpw + (lane % cg) * cw) for lane in range(32)])
                    for r in range(rpl)]
        elif c["state_layout"] == "v_first":  # blocked: value row w * vpw + j, key rows lane * K/32 ..
            out += [(kpl, [(w * vpw + j, lane * kpl) for lane in range(32)]) for j in range(vpw)]
    return out


@pytest.mark.parametrize("over,rows,row,pad", [
    (dict(state_layout="v_first", k_map="blocked", v_per_warp=8), 32, 128, 0),   # one 16 KB copy
    (dict(k_map="all", v_per_warp=16, lane_cols=2), 128, 64, 0),                  # K rows of 64 floats
    (dict(k_map="all", v_per_warp=4, lane_cols=4), 128, 16, 0),                   # one tensor-map box, unpadded
])
def test_bulk_tile_is_the_states_rows_at_the_pass_pitch(over, rows, row, pad):
    """The plan of a bulk-staged variant: the tile is the state's own rows (v_first: BV value rows of K; k_first: K
    key rows of BV), unpadded (one copy: a pad would cost one copy per row), and the reads' degree what the
    independent model computes at that pitch, for bf16 states too. (The 16-column k_first tile's reads are
    conflicted at that pitch — a pad of 4 would clear them — which the one copy outweighs.)"""
    c = cfg(staging="bulk", bucket=1, **{"lane_cols": 1, **over})
    plan = plan_variant(c, 48 * 1024)
    assert (plan["bulk_rows"], plan["bulk_pitch"], plan["bulk_pad"]) == (rows, row + pad, pad)
    assert plan["bulk_bytes"] == rows * (row + pad) * 4
    assert plan["conflicts_after"]["read"] == brute_force_degree(_bulk_reads(c), row + pad)
    if c["k_map"] == "all":
        assert plan["stage_row"] >= c["k"] // (32 // (c["v_per_warp"] // c["lane_cols"]))
    assert plan_variant({**c, "state_dtypes": ["bf16", "fp32"]}, 48 * 1024)["bulk_pad"] == 0
    if row == 16:
        assert plan["pass"]["candidates"]["4"] < plan["pass"]["candidates"]["0"]


@pytest.mark.parametrize("lane_cols", [1, 2, 4])
def test_bulk_k_first_whole_rows_stay_one_copy(lane_cols):
    """A k_first tile of BV = V columns is the state's contiguous K x V block: it stays unpadded (one bulk copy)
    whatever the bank model ranks (a pad turns the copy into K per-row copies, measured 1.7x slower); the plan
    records the reads' degree at that pitch. Its 64 KB fit only a budget past 48 KB."""
    c = cfg(staging="bulk", bucket=1, k_map="all", v_per_warp=16, warps=8, lane_cols=lane_cols)
    plan = plan_variant(c, BUDGET)
    assert (plan["bulk_rows"], plan["bulk_pitch"], plan["bulk_pad"], plan["bulk_bytes"]) == (128, 128, 0, 128 * 128 * 4)
    assert plan["conflicts_after"]["read"] == brute_force_degree(_bulk_reads(c), 128)
    with pytest.raises(TirBudgetError, match="65536"):
        plan_variant(c, 48 * 1024)


def test_bulk_static_part_within_cudas_limit():
    """Only the bulk tile is dynamic: the token stage, preload buffer and mbarrier beside it are static `__shared__`
    arrays and must stay within CUDA's 48 KB, whatever the budget."""
    c = cfg(staging="bulk", bucket=8, k_map="all", v_per_warp=16, warps=8, lane_cols=4, preload=24)
    with pytest.raises(TirBudgetError, match="static shared memory"):
        plan_variant(c, BUDGET)
    assert plan_variant({**c, "preload": 8}, BUDGET)["bulk_pad"] == 0


def test_bulk_budget_and_bad_configs():
    """A bulk tile must fit the budget beside the token stage (one line, with the numbers); it is one tile per CTA
    (no persistent form) and needs a state layout."""
    with pytest.raises(TirBudgetError, match="65536"):
        plan_variant(cfg(staging="bulk", state_layout="v_first", k_map="blocked", v_per_warp=16, warps=8), 48 * 1024)
    with pytest.raises(TirConfigError, match="persistent"):
        plan_variant(cfg(staging="bulk", k_map="all", v_per_warp=16, lane_cols=2, persistent=True), BUDGET)
    with pytest.raises(TirConfigError, match="state_layout"):
        plan_variant({**cfg(staging="bulk", k_map="blocked"), "state_layout": None}, BUDGET)


def test_import_is_lazy():
    """`import kda2.tir` must not import TVM (other stages import it cheaply)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    code = "import sys, kda2.tir; assert 'tvm' not in sys.modules, 'tvm imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


# ------------------------------------------------------------------------------------------------
# family chunk: the tensor-core tiles (independent brute force of the ldmatrix / fragment patterns)
# ------------------------------------------------------------------------------------------------

def chunk_cfg(**over) -> dict:
    base = {"family": "chunk", "arch": "sm_90a", "k": 128, "v": 128, "bucket": 8192, "state_layout": "v_first",
            "chunk": 64, "block_v": 32, "stages": 2, "gate_modes": ["softplus"], "qk_l2norm": True,
            "beta_sigmoid": True, "varlen": True}
    base.update(over)
    return base


def chunk_brute_force(k: int, block_v: int) -> dict:
    """{buffer: (cols, {access: [(bf16 elements per lane access, [(row, col) per lane])]})}."""
    warps = 2 * (block_v // 16)   # a pair of warps per 16 value columns
    nt = 32 * warps

    def fill(rows: int, cols: int) -> list:
        per_row = cols // 8
        ops = []
        for w in range(warps):
            for it in range(-(-rows * per_row // nt)):
                lanes = []
                for lane in range(32):
                    f = it * nt + 32 * w + lane
                    lanes.append((f // per_row, f % per_row * 8) if f < rows * per_row else None)
                ops.append((8, lanes))
        return ops

    def ldmatrix(cols: int) -> list:  # x4: matrices (rows 0-7, col 0), (rows 8-15, col 0), (0-7, +8), (8-15, +8)
        return [(8, [(mb * 16 + (lane // 8 % 2) * 8 + lane % 8, ks * 16 + lane // 16 * 8) for lane in range(32)])
                for mb in range(4) for ks in range(cols // 16)]

    frag = [(2, [(w // 2 * 16 + h * 8 + lane // 4, ks * 16 + c * 8 + lane % 4 * 2) for lane in range(32)])
            for w in range(warps) for ks in range(4) for h in range(2) for c in range(2)]
    return {"kv": (k, {"kv_fill": fill(64, k), "kv_ldmatrix": ldmatrix(k)}),
            "ut": (64, {"ut_fill": fill(block_v, 64), "ut_frag": frag})}


def bf16_degree(ops: list, stride: int) -> int:
    """Worst degree with bf16 elements: a phase is 32 / (bytes / 4) lanes; distinct words per bank."""
    worst = 0
    for elems, lanes in ops:
        per_phase = 32 if elems * 2 <= 4 else 16  # 8- and 16-byte accesses: half-warp phases
        floor = 2 if elems * 2 == 16 else 1       # a 16-byte half-warp phase takes 2 wavefronts at best
        for p in range(0, 32, per_phase):
            words = {((r * stride + c + e) * 2) // 4 for rc in lanes[p:p + per_phase] if rc is not None
                     for r, c in [rc] for e in range(elems)}
            worst = max(worst, -(-max(Counter(w % 32 for w in words).values(), default=0) // floor))
    return worst


def _t16_copy_lanes(warp: int, m: int) -> list:
    """chunk.cuh step 5: warps 4-7 copy T1 (rows 0..31, cols 0..31) and T2 (rows 32..63, cols 32..63) to 16 bits while
    level 2 runs: thread p = 32 (warp - 4) + lane, row r(p / 8) + 16 m, 4 columns from 4 (p % 8), + 32 for m >= 2."""
    out = []
    for lane in range(32):
        q, j4 = (32 * (warp - 4) + lane) >> 3, 4 * (lane & 7)
        row = (q >> 1 & 3) + 4 * (q & 1) + 8 * (q >> 3)
        out.append((row + 16 * m, j4 + (32 if m >= 2 else 0)))
    return out


@pytest.mark.parametrize("k", [64, 128, 256])
def test_chunk_t16_beside_level2_and_l2norm_lanes(k: int):
    """The 16-bit T copy made beside level 2 covers exactly T's two final 32-blocks, its 8-byte stores and level 2's
    T21 fragment words are conflict-free at the planned LDS_T16, the 16-bit tile fits over A's dead rows 0..31; the
    l2norm's lanes (two 16-byte pieces a lane from K = 128) are conflict-free at the planned LDS_KV."""
    plan = plan_variant(chunk_cfg(k=k, v=k, block_v=16 if k != 128 else 32, stages=1), BUDGET)
    lds_t16, lds_t = plan["lds_t16"], plan["lds_t"]
    assert 64 * lds_t16 * 2 <= 32 * lds_t * 4
    covered = Counter((r, c + e) for w in range(4, 8) for m in range(4) for r, c in _t16_copy_lanes(w, m) for e in range(4))
    want = {(r, c) for r in range(64) for c in range(64) if (r < 32) == (c < 32)}
    assert set(covered) == want and set(covered.values()) == {1}
    copy = [(4, _t16_copy_lanes(w, m)) for w in range(4, 8) for m in range(4)]
    t21 = [(2, [(32 + 16 * m + lane // 4 + 8 * h, 8 * w + lane % 4 * 2) for lane in range(32)])
           for w in range(4) for m in range(2) for h in range(2)]
    assert bf16_degree(copy, lds_t16) == 1 and bf16_degree(t21, lds_t16) == 1
    # at a stride of 64 the copy's two rows per half-warp share their banks: the test can tell
    assert bf16_degree(copy, 64) > 1
    for name in ("t16_store", "t21_store", "t_convert", "kv_l2norm"):
        assert plan["conflicts_after"][name] == 1, name
    kc = k // 8
    ln = kc // 2 if kc >= 16 else kc
    l2n = [(8, [((32 * w + lane) // ln + mm * (256 // ln), (lane % ln + pp * ln) * 8) for lane in range(32)])
           for w in range(8) for mm in range(64 * ln // 256) for pp in range(kc // ln)]
    rows = Counter((r, c + e) for _, lanes in l2n for r, c in lanes for e in range(8))
    assert set(rows) == {(r, c) for r in range(64) for c in range(k)} and set(rows.values()) == {1}
    assert bf16_degree(l2n, plan["lds_kv"]) == 1


def _diag_copy_lanes(warp: int, m: int) -> list:
    """chunk.cuh diag_copy_row: warps 4-7 copy the four inverted diagonal blocks into T during level 1: thread p =
    32 (warp - 4) + lane, piece m; a quarter-warp (8 lanes) takes rows base, base + 2 of a block, 4 floats a lane."""
    out = []
    for lane in range(32):
        idx = 32 * (warp - 4) + lane + 128 * m
        q8 = (idx >> 3) & 7
        row = 16 * (idx >> 6) + (q8 & 1) + 4 * (q8 >> 1) + 2 * ((idx >> 2) & 1)
        out.append((row, 16 * (row // 16) + 4 * (lane & 3)))
    return out


def _step6_stsm_lanes(k: int, warp: int, transposed: bool) -> list:
    """chunk.cuh step 6 on sm_90: per row block j and 16-column piece np of the warp, one stmatrix; lane 8 m + r
    addresses row r of quarter m (tokens 16 rb + 8 (m % 2), columns 16 (np0 + np) + 8 (m / 2)); .trans for uᵀ, whose
    rows are the value columns. (row, col) of each lane's 16-byte row, per instruction."""
    pieces = k // 16
    rbg = 1 if pieces >= 8 else 2
    nrb, npc = 4 // rbg, pieces * rbg // 8
    grp, np0 = (0, npc * warp) if rbg == 1 else (warp >> 2, npc * (warp & 3))
    rb = [3 - j for j in range(4)] if rbg == 1 else [3 - grp, grp]
    ops = []
    for j in range(nrb):
        for np_ in range(npc):
            lanes = []
            for lane in range(32):
                m, r = lane >> 3, lane & 7
                tok, col = 16 * rb[j] + 8 * (m & 1), 16 * (np0 + np_) + 8 * (m >> 1)
                lanes.append((col + r, tok) if transposed else (tok + r, col))
            ops.append((8, lanes))
    return ops


@pytest.mark.parametrize("k", [64, 128, 256])
def test_chunk_diagonal_copy_and_stmatrix_staging(k: int):
    """The inverted diagonal blocks' copy during level 1 covers the four 16×16 blocks once, conflict-free at the
    planned LDS_T; step 6's stmatrix staging covers w [64][K] and uᵀ [V][64] once, conflict-free at the planned
    LDS_KV and LDS_U (index arithmetic from chunk.cuh, independent of the TIR model)."""
    plan = plan_variant(chunk_cfg(k=k, v=k, block_v=16 if k != 128 else 32, stages=1), BUDGET)
    copy = [_diag_copy_lanes(w, m) for w in range(4, 8) for m in range(2)]
    covered = Counter((r, c + e) for lanes in copy for r, c in lanes for e in range(4))
    assert set(covered) == {(r, c) for r in range(64) for c in range(16 * (r // 16), 16 * (r // 16) + 16)}
    assert set(covered.values()) == {1}
    # fp32 16-byte pieces as 8 bf16 elements at twice the column and stride
    as_bf16 = [(8, [(r, 2 * c) for r, c in lanes]) for lanes in copy]
    assert bf16_degree(as_bf16, 2 * plan["lds_t"]) == 1
    # a half-warp's four rows 4 apart (row index within the block transposed 4 × 4) share their banks at LDS_T = 72:
    # the test can tell
    spread = [(8, [(r // 16 * 16 + r % 4 * 4 + r % 16 // 4, c) for r, c in lanes]) for _, lanes in as_bf16]
    assert bf16_degree(spread, 2 * 72) > 1
    for transposed, key, shape in ((False, "lds_kv", (64, k)), (True, "lds_u", (k, 64))):
        ops = [op for w in range(8) for op in _step6_stsm_lanes(k, w, transposed)]
        rows = Counter((r, c + e) for _, lanes in ops for r, c in lanes for e in range(8))
        assert set(rows) == {(r, c) for r in range(shape[0]) for c in range(shape[1])} and set(rows.values()) == {1}
        assert bf16_degree(ops, plan[key]) == 1, key
        assert bf16_degree(ops, shape[1]) > 1, key   # unpadded rows: 8 rows of a quarter on the same banks
    for name in ("t_diag_copy", "kv_w_stsm", "ut_stsm"):
        assert plan["conflicts_after"][name] == 1, name


def _exchange_cells(pair: int, part: int, reflected: bool) -> set:
    """chunk.cuh step 3: the A-tile cells one warp of pair I writes before the pair barrier. Rows 16 I + lane/4 (+8) of
    the diagonal tiles (columns 16 I + 8 c + 2 (lane % 4), +1) and rows ro + lane/4 (+8) of the off-diagonal tiles
    nt_lo <= nt < nt_hi (columns 8 nt + 2 (lane % 4), +1; pair 0 borrows pair 3's first two, rows 48..). Part 0: its
    Aqk partials at their own positions, on and below the diagonal; part 1: its A partials strictly below it, at
    (63 - i, 63 - j)."""
    r = 16 * pair
    nt_lo, nt_hi, ro = (2 if pair == 3 else 0), (2 if pair == 0 else 2 * pair), (48 if pair == 0 else r)
    out = set()
    for lane in range(32):
        g8, t4 = lane // 4, lane % 4
        cells = [(ro + g8 + 8 * h, 8 * nt + 2 * t4 + e) for nt in range(nt_lo, nt_hi) for h in range(2) for e in range(2)]
        diag = [(r + g8 + 8 * h, r + 8 * c + 2 * t4 + e) for c in range(2) for h in range(2) for e in range(2)]
        cells += [(i, j) for i, j in diag if (j < i if reflected else j <= i)]
        out |= {(63 - i, 63 - j) if reflected else (i, j) for i, j in cells}
    return out


def test_chunk_reflected_exchange_cells():
    """Both K halves hand over before one pair barrier: every pair's Aqk cells (own positions) and A cells (reflected)
    are disjoint, from each other and across pairs; the reflected A covers every A_IJ (I > J) and every diagonal
    block's strict lower triangle the inverse and the levels read; level 2's A21 lies in rows 0..31, off the 16-bit T
    over rows 32..63 (index arithmetic from chunk.cuh, independent of the TIR model)."""
    writes = [(pair, part, _exchange_cells(pair, part, part == 1)) for pair in range(4) for part in range(2)]
    for n, (_, _, a) in enumerate(writes):
        for _, _, b in writes[n + 1:]:
            assert not a & b
    a_cells = set().union(*(c for _, part, c in writes if part == 1))
    aqk_cells = set().union(*(c for _, part, c in writes if part == 0))
    assert a_cells == {(63 - i, 63 - j) for i in range(64) for j in range(i)}
    assert aqk_cells == {(i, j) for i in range(64) for j in range(i + 1)}
    assert all(i < j for i, j in a_cells)          # the strict upper triangle, which nothing else writes in step 3
    a21 = {(63 - i, 63 - j) for i in range(32, 64) for j in range(32)}
    assert a21 <= a_cells and all(i < 32 for i, _ in a21)
    # without the reflection (A's partials at their own positions) the halves' cells would collide: the test can tell
    assert _exchange_cells(1, 0, False) & _exchange_cells(1, 1, False)


@pytest.mark.parametrize("k,block_v", [(64, 16), (64, 64), (256, 16), (256, 64)])
def test_chunk_other_head_dims_plan(k: int, block_v: int):
    """K = V = 64 and 256 (spec/knobs.py CHUNK_HEAD_DIMS): the prep's T tile runs over the k tile into Γ at
    K = 64 (fp32 [64][lds_t] is longer than a bf16 k row), and its sizes follow the smem formulas."""
    plan = plan_variant(chunk_cfg(k=k, v=k, block_v=block_v, stages=1), BUDGET)
    s = {key: plan[key] for key in ("lds_kv", "lds_g", "lds_t", "lds_u", "lds_o", "lds_y", "lds_x")}
    assert plan["prep_smem_bytes"] == 3 * 64 * s["lds_kv"] * 2 + 64 * s["lds_g"] * 4 + 64 * s["lds_t"] * 4 + 64 * 4
    assert plan["state_smem_bytes"] == (3 * 64 * k * 2 + 64 * 64 * 2 + k * 4 + block_v * s["lds_u"] * 2
                                        + block_v // 8 * (12 * 32 * 16 + 32 * s["lds_o"] * 2) + 16)
    assert plan["tiles"]["kv"] == [64, k] and plan["tiles"]["x"] == [k, COMBINE_COLS]
    assert plan["conflicts_after"]["kv_ldmatrix"] == 1 and plan["conflicts_after"]["kv_l2norm"] == 1
    pad, scores = _best_pad(_ops_gamma(k), k, 4)
    assert plan["lds_g"] == k + pad, scores


def test_chunk_head_dims_refused_by_name():
    with pytest.raises(TirConfigError, match=r"'k' must be one of \(64, 128, 256\), got 32"):
        plan_variant(chunk_cfg(k=32, v=32, block_v=16), BUDGET)
    with pytest.raises(TirConfigError, match=r"'v' \(64\) must equal k \(128\)"):
        plan_variant(chunk_cfg(v=64, block_v=16), BUDGET)


@pytest.mark.parametrize("k,block_v", [(128, 16), (128, 32), (128, 64)])
def test_chunk_pass_pads_the_ldmatrix_tiles(k: int, block_v: int):
    plan = plan_variant(chunk_cfg(k=k, block_v=block_v), BUDGET)
    assert (plan["lds_kv"], plan["lds_u"]) == (k + 8, 72) and "lds_a" not in plan
    bf = chunk_brute_force(k, block_v)
    for buf, key in (("kv", "lds_kv"), ("ut", "lds_u")):
        cols, accesses = bf[buf]
        for name, ops in accesses.items():
            assert plan["conflicts_before"][name] == bf16_degree(ops, cols), name
            assert plan["conflicts_after"][name] == bf16_degree(ops, plan[key]) == 1, name
        # the smallest 16-byte-aligned pad that is conflict-free
        assert all(max(bf16_degree(ops, cols + p) for ops in accesses.values()) > 1 for p in range(0, plan[key] - cols, 8))
    # the read patterns are 8-way unpadded (8 rows on the same 4 banks); the fills are row-contiguous
    assert {a: plan["conflicts_before"][a] for a in ("kv_ldmatrix", "ut_frag", "kv_fill", "ut_fill")} == {
        "kv_ldmatrix": 8, "ut_frag": 8, "kv_fill": 1, "ut_fill": 1}
    assert plan["state_threads"] == block_v // 16 * 64 and plan["prep_threads"] == 256


# An independent model of the other tiles (docs: kda2/tir/chunk.py), from the kernel's index arithmetic in
# include/kda2/chunk.cuh: per warp and access instruction, the (row, col) each lane touches, its element
# bytes and vector width. Wavefronts of a phase = its worst bank's distinct 4-byte words; the pass must pick
# the layout with the fewest wavefronts (then the lowest worst degree, then the smallest pad).

def _ops_gamma(k):
    ops = []
    for pw in range(8):
        L = range(32)
        for m in range(64 * k // 4 // 256):                                   # raw gate fill, 16 B
            ops.append((4, 4, [((pw * 32 + l + m * 256) // (k // 4), (pw * 32 + l + m * 256) % (k // 4) * 4) for l in L]))
        rows = 64 // (256 // k)                                              # scan: 256 / k threads per channel
        for e in range(rows):
            ops.append((4, 1, [((pw * 32 + l) // k * rows + e, (pw * 32 + l) % k) for l in L]))
        I, part = pw % 4, pw // 4
        for ks in range(k // 16):
            for hr in range(2):
                for hc in range(2):
                    ops.append((4, 2, [(16 * I + l // 4 + 8 * hr, 16 * ks + 2 * (l % 4) + 8 * hc) for l in L]))
            for nt in range(I):
                for hc in range(2):
                    ops.append((4, 2, [(8 * (part * I + nt) + l // 4, 16 * ks + 2 * (l % 4) + 8 * hc) for l in L]))
        for m in range(64 * k // 8 // 256):                                   # element-wise float2 reads
            for q in range(4):
                ops.append((4, 2, [((pw * 32 + l + m * 256) // (k // 8), (pw * 32 + l + m * 256) % (k // 8) * 8 + 2 * q)
                                   for l in L]))
    return ops


def _ops_x(cols=32):
    ops = []
    for pw in range(8):
        L = range(32)
        for m in range(128 * cols // 256):
            ops.append((4, 1, [((pw * 32 + l + m * 256) // cols, (pw * 32 + l + m * 256) % cols) for l in L]))
        for q in range(cols // 8):                                           # row stores, 16 B
            ops.append((4, 4, [((pw * 32 + l) // 2, l % 2 * (cols // 2) + 4 * q) for l in L]))
    for j in range(4):
        for q in range(cols // 8):
            ops.append((4, 4, [(j, l % 2 * (cols // 2) + 4 * q) for l in range(32)]))
    return ops


def _ops_ldmatrix_nk(rows_tiles, k_of_warp):
    """ldmatrix.x4 of [n][k] tiles: lanes 0-7 rows 0-7 at k, 8-15 rows 0-7 at k+8, 16-31 rows 8-15."""
    return [(2, 8, [(16 * np_ + l % 8 + 8 * (l // 16), kk + 8 * (l // 8 % 2)) for l in range(32)])
            for np_ in range(rows_tiles) for kk in k_of_warp]


def _wavefronts(ops, offset) -> tuple[int, int]:
    total = worst = 0
    for eb, vec, lanes in ops:
        per_phase = 32 if eb * vec <= 4 else 16
        for p in range(0, 32, per_phase):
            words = {(offset(r, c + e) * eb) // 4 for r, c in lanes[p:p + per_phase] for e in range(vec)}
            d = max(Counter(w % 32 for w in words).values())
            total, worst = total + d, max(worst, d)
    return total, worst


def _best_pad(ops, cols, quantum):
    scores = {pad: _wavefronts(ops, lambda r, c, s=cols + pad: r * s + c) for pad in range(0, 17, quantum)}
    return min(scores, key=lambda p: (*scores[p], p)), scores


def test_chunk_layouts_are_the_fewest_wavefronts():
    plan = plan_variant(chunk_cfg(k=128, block_v=32), BUDGET)
    pad, scores = _best_pad(_ops_gamma(128), 128, 4)
    assert plan["lds_g"] == 128 + pad == 136, scores
    # the old hand-picked K + 4 left the float2 fragment reads 2-way: more wavefronts than K + 8
    assert scores[4][0] > scores[8][0]
    pad, scores = _best_pad(_ops_x(COMBINE_COLS), COMBINE_COLS, 4)
    assert plan["lds_x"] == COMBINE_COLS + pad, scores
    # the TIR pass's count for the unpadded layout agrees with this model's (a conflict-free 16-byte phase is 2
    # wavefronts; at 32 columns it was 8 words on one bank, 4x)
    assert plan["conflicts_before"]["x_store"] == scores[0][1] // 2
    assert _best_pad(_ops_x(32), 32, 4)[1][0][1] == 8
    # whole-tile-copied tiles: the XOR swizzle of 16-byte pieces by row beats the plain layout
    w_ops = _ops_ldmatrix_nk(4, [kb + 16 * ks for kb in (0, 64) for ks in range(4)])
    plain = _wavefronts(w_ops, lambda r, c: r * 128 + c)
    xor = _wavefronts(w_ops, lambda r, c: r * 128 + (((c >> 3) ^ (r & 7)) << 3 | (c & 7)))
    assert plain[1] == 8 and xor[1] == 2 and plain[0] > xor[0]  # raw words per bank per half-warp phase
    assert plan["swz_w"] is True and plan["swz_qg"] is True and plan["swz_kg"] is True and plan["swz_aqk"] is True
    assert plan["conflicts_before"]["w_ldmatrix"] == 8 and plan["conflicts_after"]["w_ldmatrix"] == 1
    layouts = plan["pass"]["layouts"]
    assert layouts["xch"]["transform"] == "fixed" and layouts["w"]["swizzle"] == "xor"
    assert set(plan["wavefronts_after"]) == set(plan["conflicts_after"])
    for name, lay in layouts.items():  # every tile: the chosen candidate has the fewest wavefronts
        chosen = "xor" if lay["swizzle"] == "xor" else str(lay["pad"])
        assert lay["candidates"][chosen] == min(lay["candidates"].values()), name


def test_chunk_plan_smem_formulas():
    # prep: q, k, v and Γ at a row of 136, A / T at 72 (the block levels' tf32 fragment reads: rows lane/4 at columns
    # lane%4 for A operands, rows lane%4 at columns lane/4 for B operands), β. State, per stage: w, qg, kg [64][128]
    # and Aqk [64][64] unpadded, 2^Γlast, uᵀ [block_v][72]; per warp (two per 16 value columns): a 12 x 32 float4
    # exchange tile and a [32][24] o tile; 16 B of mbarrier per stage
    for block_v, state in ((32, 155680), (64, 195616)):
        plan = plan_variant(chunk_cfg(block_v=block_v), BUDGET)
        assert plan["prep_smem_bytes"] == 3 * 64 * 136 * 2 + 64 * 136 * 4 + 64 * 72 * 4 + 64 * 4 == 105728
        assert plan["state_smem_bytes"] == (2 * (3 * 64 * 128 * 2 + 64 * 64 * 2 + 128 * 4 + block_v * 72 * 2)
                                            + block_v // 8 * (12 * 32 * 16 + 32 * 24 * 2) + 2 * 16) == state
    one = plan_variant(chunk_cfg(block_v=64, stages=1), BUDGET)
    assert one["state_smem_bytes"] == (3 * 64 * 128 * 2 + 64 * 64 * 2 + 128 * 4 + 64 * 72 * 2
                                       + 8 * (12 * 32 * 16 + 32 * 24 * 2) + 16)


def test_chunk_plan_decides_the_prep_tensor_copies():
    """The plan says whether the prep's tiles land by tensor copies (chunk.cuh PREP_TMA): sm_90 only, and only where
    each chosen row stride is one box row (at most 256 elements, a multiple of 16 bytes)."""
    from kda2.plan.smem import prep_tma

    assert plan_variant(chunk_cfg(), BUDGET)["prep_tma"] is True                      # K = 128: rows of 136
    assert plan_variant(chunk_cfg(arch="sm_80"), BUDGET)["prep_tma"] is False         # cp.async there
    assert prep_tma("sm_90a", {"lds_kv": 72, "lds_g": 72})                              # K = 64
    assert not prep_tma("sm_90a", {"lds_kv": 264, "lds_g": 264})                        # K = 256: over a box row
    assert not prep_tma("sm_90a", {"lds_kv": 132, "lds_g": 136})                        # 264-byte rows
    assert not prep_tma("sm_90a", {"lds_kv": 136, "lds_g": 258})


def test_chunk_tir_dumps_differ_and_record_the_pass(tmp_path):
    plan = write_plan(chunk_cfg(), BUDGET, tmp_path / "plan.json", tmp_path / "b.tir", tmp_path / "a.tir")
    assert plan["tir_before"] != plan["tir_after"]
    assert 'T.alloc_shared((64, 128), "bfloat16")' in plan["tir_before"]
    assert 'T.alloc_shared((64, 136), "bfloat16")' in plan["tir_after"]
    assert 'T.alloc_shared((128, 72), "bfloat16")' in plan["tir_after"]
    assert 'T.alloc_shared((64, 64), "bfloat16")' in plan["tir_after"]  # Aqk: swizzled, not padded
    assert '"kda2.access": "kv_ldmatrix"' in plan["tir_after"] and "kda2.bank_pad" in plan["tir_after"]
    on_disk = json.loads((tmp_path / "plan.json").read_text())
    assert on_disk["family"] == "chunk" and on_disk["pass"]["name"] == "kda2.bank_pad"
    assert set(on_disk["pass"]["layouts"]["kv"]["candidates"]) == {"0", "8", "16"}
    assert on_disk["conflicts_before"]["kv_ldmatrix"] > on_disk["conflicts_after"]["kv_ldmatrix"]
    assert on_disk["pass"]["layouts"]["aqk"] == {"transform": "xor", "row_stride": 64, "pad": 0, "swizzle": "xor",
                                                 "candidates": on_disk["pass"]["layouts"]["aqk"]["candidates"]}
    off = plan_variant(chunk_cfg(), BUDGET, enable_pass=False)
    assert (off["lds_kv"], off["lds_u"]) == (128, 64)
    assert off["conflicts_after"] == off["conflicts_before"] == plan["conflicts_before"]


def test_chunk_budget_error():
    c = chunk_cfg(block_v=64)
    assert plan_variant(c, 195616)["state_smem_bytes"] == 195616  # exactly fits
    with pytest.raises(TirBudgetError) as e:
        plan_variant(c, 195615)
    msg = str(e.value)
    assert "\n" not in msg and variant_name(c) in msg and "state kernel needs 195616" in msg and "195615" in msg
    with pytest.raises(TirBudgetError, match="prep kernel needs 105728"):
        plan_variant(chunk_cfg(), 101376)  # sm_86's limit


def test_chunk_bad_configs_name_the_field():
    for field, value in (("block_v", 48), ("stages", 3), ("chunk", 32), ("k", 96), ("v", 96)):
        with pytest.raises(TirConfigError, match=repr(field)):
            plan_variant(chunk_cfg(**{field: value}), BUDGET)
    with pytest.raises(TirConfigError, match="'block_v'"):  # wider than V
        plan_variant(chunk_cfg(k=64, v=64, block_v=128), BUDGET)
    with pytest.raises(TirConfigError, match="families"):
        plan_variant(chunk_cfg(family="parallel"), BUDGET)


def test_chunk_panel_placement_has_the_modelled_banks():
    """chunk.cuh stores the xor-swizzled tiles of rows ≤ 128 elements as 64-column panels (the wgmma operand
    layout); the bank pass models the row-major swizzle. Every element lands on the same 4-byte bank either way,
    so the pass's wavefront counts are the kernel's."""
    from kda2.tir.bankpass import XOR_PIECE_BYTES, XOR_ROWS

    piece = XOR_PIECE_BYTES // 2  # bf16 elements per piece
    for cols in (64, 128):
        for r in range(64):
            for c in range(cols):
                row_xor = r * cols + ((c // piece) ^ (r % XOR_ROWS)) * piece + c % piece
                panel = (c // 64) * 64 * 64 + r * 64 + (((c // piece) % 8) ^ (r % 8)) * piece + c % piece
                assert (row_xor * 2 // 4) % 32 == (panel * 2 // 4) % 32, (cols, r, c)


def test_chunk_wgmma_state_plan():
    """state_mma wgmma: a warpgroup per 64 value columns, 1024-byte-aligned stages of the tiles and one uᵀ slice after
    them, no exchange or o tiles; only on sm_90 with block_v a multiple of 64, and only with the panel (xor) layout of
    the tiles it reads by descriptor. The two-stage 64-column pass fits on an H200 SM beside a prep CTA (the overlap)."""
    for k, bv, stages in ((128, 64, 2), (128, 128, 1), (64, 64, 2), (64, 64, 1)):   # K = 64: a warpgroup a head
        plan = plan_variant(chunk_cfg(k=k, v=k, block_v=bv, stages=stages, state_mma="wgmma"), BUDGET)
        assert plan["state_threads"] == 128 * (bv // 64)
        tiles = 3 * 64 * k * 2 + 64 * 64 * 2 + k * 4
        assert plan["state_smem_bytes"] == ((stages - 1) * (-(-tiles // 1024) * 1024) + tiles + bv * plan["lds_u"] * 2
                                            + 16 * stages)
        if (bv, stages) == (64, 2):   # both kernels' dynamic bytes, a 1 KB reservation per CTA, ≤ 64 B of static ones
            assert plan["prep_smem_bytes"] + plan["state_smem_bytes"] + 2 * 1024 + 64 <= load_profiles()["h200"].smem_per_sm_bytes
        assert plan["swz_w"] and plan["swz_qg"] and plan["swz_kg"] and plan["swz_aqk"]
        mma = plan_variant(chunk_cfg(k=k, v=k, block_v=bv, stages=stages), BUDGET)
        assert {k: plan[k] for k in ("lds_u", "lds_kv", "swz_w")} == {k: mma[k] for k in ("lds_u", "lds_kv", "swz_w")}
    # its o staging in the consumed w tile is modelled (stmatrix.trans: 8 rows of 16 bytes in one column piece per
    # phase, 8-way unswizzled, conflict-free swizzled); the mma_sync plan has the accesses with no instruction
    wg, mma = plan_variant(chunk_cfg(block_v=64, state_mma="wgmma"), BUDGET), plan_variant(chunk_cfg(block_v=64), BUDGET)
    assert wg["conflicts_before"]["w_ostage_store"] == 8 and wg["conflicts_after"]["w_ostage_store"] == 1
    assert wg["instructions"]["w_ostage_store"] > 0 and wg["conflicts_after"]["w_ostage_read"] == 1
    assert mma["instructions"]["w_ostage_store"] == mma["instructions"]["w_ostage_read"] == 0
    with pytest.raises(TirConfigError, match="wgmma needs block_v a multiple of 64"):
        plan_variant(chunk_cfg(block_v=32, state_mma="wgmma"), BUDGET)
    with pytest.raises(TirConfigError, match="arch sm_90a"):
        plan_variant(chunk_cfg(arch="sm_80", block_v=64, state_mma="wgmma"), BUDGET)
    with pytest.raises(TirConfigError, match="needs their panel"):
        plan_variant(chunk_cfg(block_v=64, state_mma="wgmma"), BUDGET, enable_pass=False)
    with pytest.raises(TirConfigError, match="'state_mma'"):
        plan_variant(chunk_cfg(state_mma="hgmma"), BUDGET)


def test_chunk_prep_wu_bfs_is_sm90a_only_and_plans_like_levels():
    """prep_wu bfs: warpgroup MMAs, so sm_90a only (named, with what runs elsewhere); its shared memory and layouts are
    the levels variant's (the panels and the u staging live in the Γ tile the prep has anyway: kda2/chunk.cuh)."""
    for k in (64, 128, 256):
        shape = dict(k=k, v=k, block_v=32 if k < 256 else 16, stages=2 if k < 256 else 1)
        bfs = plan_variant(chunk_cfg(**shape, prep_wu="bfs"), BUDGET)
        lev = plan_variant(chunk_cfg(**shape), BUDGET)
        assert {x: bfs[x] for x in ("prep_smem_bytes", "lds_kv", "lds_g", "lds_t", "lds_u")} == \
            {x: lev[x] for x in ("prep_smem_bytes", "lds_kv", "lds_g", "lds_t", "lds_u")}
    with pytest.raises(TirConfigError, match="'prep_wu': bfs runs on warpgroup MMAs, which need arch sm_90a"):
        plan_variant(chunk_cfg(arch="sm_80", prep_wu="bfs"), BUDGET)
    with pytest.raises(TirConfigError, match="'prep_wu'"):
        plan_variant(chunk_cfg(prep_wu="wgmma"), BUDGET)
