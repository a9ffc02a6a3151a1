"""The fused twin of a chunk variant (docs/DESIGN.md §1): planned by the agents where the spec asks for it (sm_90a,
K = V = 128), laid out by the TIR stage (its kernel's block and shared memory), rendered as a third kernel beside the
two, and launched by the library for the twin's unsplit calls. On the CPU: the plan, the TIR plan, the rendered text
and the library's tables; `-m compile` checks the shared-memory formula against the header with nvcc. The GPU side is
tests/gpu/test_chunk_fused_twin_gpu.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kda2.codegen.render import chunk_symbols, kernel_symbols, render_library, render_variant
from kda2.plan.model import estimate_resources, prune_reason
from kda2.plan.planner import plan_spec
from kda2.plan.smem import FUSED_MAX_IMBALANCE_PCT, FUSED_THREADS, fused_smem_bytes, fused_takes
from kda2.plan.variant import splits, variant_id
from kda2.spec.model import load_spec
from kda2.spec.rules import load_rules
from kda2.tir import plan_variant
from kda2.tir.errors import TirConfigError

ROOT = Path(__file__).resolve().parents[1]
SPECS, RULES = ROOT / "kernel_specs", ROOT / "rules"
TWIN = {"family": "chunk", "arch": "sm_90a", "k": 128, "v": 128, "state_layout": "v_first", "chunk": 64,
        "block_v": 64, "stages": 2, "gate_modes": ["lower_bound", "precomputed", "softplus"],
        "dtypes": ["bf16", "fp16"], "fused": True}
FEATURES = {"qk_l2norm": True, "beta_sigmoid": True, "varlen": True}


def _strip(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "fused"}


def test_agents_plan_a_twin_of_each_layout_and_state_mma_first_on_sm90a_only(tmp_path) -> None:
    rules = load_rules(RULES)
    spec = load_spec(SPECS / "kimi_linear_chunk.yaml")
    p90, p80 = plan_spec(spec, "sm_90a", rules), plan_spec(spec, "sm_80", rules)
    assert not any(v.config.get("fused") for v in p80.variants)   # warpgroup MMAs: sm_90a's own
    twins = [v for v in p90.variants if v.config.get("fused")]
    others = [v for v in p90.variants if not v.config.get("fused")]
    assert {(v.config["state_layout"], v.config.get("state_mma", "mma_sync")) for v in twins} == {
        (lay, mma) for lay in ("k_first", "v_first") for mma in ("mma_sync", "wgmma")}
    for v in twins:
        # the twin is a candidate's config plus the knob, that candidate the first of its (layout, state_mma) in some
        # bucket, and it comes after every candidate of its layout
        base = _strip(v.config)
        assert base in [o.config for o in others], v.id
        assert "fused twin (profile h200" in dict(v.reasons)["fused"] and "85376 B smem" in dict(v.reasons)["fused"]
        assert splits(v.config)   # its split calls run on its own two kernels
        # its base passes the tuner's prune (a pruned base would take the twin with it, unmeasured)
        assert prune_reason(base, estimate_resources(base), p90.profile, spec.budget) is None, v.id
    for layout in ("k_first", "v_first"):
        kinds = [bool(v.config.get("fused")) for v in p90.variants if v.config["state_layout"] == layout]
        assert kinds == sorted(kinds)
    # untuned, no row routes to a twin (the tuner decides where they win)
    untuned = plan_spec(spec, "sm_90a", rules, tuned={})
    assert not any(untuned.variants[d["index"]].config.get("fused") for d in untuned.dispatch)
    # fused: [false] plans none, and the other candidates are the same
    text, n = re.subn(r", fused: \[false, true\]", "", (SPECS / "kimi_linear_chunk.yaml").read_text())
    assert n == 1
    (tmp_path / "kimi_linear_chunk.yaml").write_text(text)
    without = plan_spec(load_spec(tmp_path / "kimi_linear_chunk.yaml"), "sm_90a", rules)
    assert [v.id for v in without.variants] == [v.id for v in others]


def test_tir_plans_the_fused_kernel_and_refuses_where_it_cannot_run() -> None:
    plan = plan_variant(TWIN, 232448)
    assert (plan["fused_threads"], plan["fused_smem_bytes"]) == (FUSED_THREADS, fused_smem_bytes(128)) == (256, 85376)
    two = plan_variant(_strip(TWIN), 232448)
    assert (two["fused_threads"], two["fused_smem_bytes"]) == (0, 0)
    # the two kernels' layout is the base variant's
    assert {k: v for k, v in plan.items() if not k.startswith("fused_")} == \
        {k: v for k, v in two.items() if not k.startswith("fused_")}
    for bad, what in ((dict(TWIN, arch="sm_80"), "arch 'sm_80'"), (dict(TWIN, k=64, v=64, block_v=64), "K 64"),
                      (dict(TWIN, fused="yes"), "got 'yes'")):
        with pytest.raises(TirConfigError, match="config field 'fused'") as e:
            plan_variant(bad, 232448)
        assert what in str(e.value)
    # (its 85376 B are below the prep's, so the prep's budget check binds first)
    assert plan["fused_smem_bytes"] < plan["prep_smem_bytes"]


def test_twin_renders_a_fused_entry_per_dtype_after_the_two_kernels() -> None:
    vid = variant_id(TWIN)
    syms = kernel_symbols(TWIN)
    assert syms[:7] == chunk_symbols(vid, ("bf16", "fp16"))
    assert syms[7:] == (f"kda2_chunk_fused_{vid}", f"kda2_chunk_fused_f16_{vid}")
    text = render_variant(TWIN, plan_variant(TWIN, 232448))
    assert text.count('#include "kda2/fused.cuh"') == 1
    for sym, elem in zip(syms[7:], ("__nv_bfloat16", "__half")):
        assert re.search(rf"{sym}\(const KDA2RecurrentArgs a\) {{\n  kda2::fused::Fused16<{elem}>::run\(a\);", text)
        assert f"kda2::fused::Fused16<{elem}>::SMEM_BYTES == 85376" in text
    plain = render_variant(_strip(TWIN), plan_variant(_strip(TWIN), 232448))
    assert "fused" not in plain   # a variant without the knob renders as before the twin existed


def test_library_table_sends_unsplit_calls_of_a_twin_to_its_fused_kernel() -> None:
    variants = [{"id": variant_id(c), "config": c, "cubin_path": "x.cubin", "plan": plan_variant(c, 232448)}
                for c in (_strip(TWIN), TWIN)]
    dispatch = [{"state_layout": "v_first", "bucket": 2048, "class": "c", "min_chains": 0, "index": 1}]
    lib = render_library("c", "sm_90a", variants, dispatch, '"{}"', FEATURES)
    rows = re.findall(r'^    \{"([0-9a-f]{12})", \{(.*)\}, (\d+),\n.*\n\s+\{ ([\d, ]+) \},\n\s+\{ ([\d, ]+) \},\n'
                      r'(?:.*\n){3}\s+\{ ([-\d, ]+) \}\},$', lib, re.M)
    assert [r[0] for r in rows] == [v["id"] for v in variants], lib
    (_, _, n0, _, _, f0), (_, names, n1, threads, smem, f1) = rows
    assert (n0, f0) == ("7", "-1, -1, -1, -1")
    # slots (fp16 input) + 2 · (bf16 state): bf16 → kernel 7, fp16 → 8, no bf16-state entries
    assert (n1, f1) == ("9", "7, 8, -1, -1") and names.count("kda2_chunk_fused_") == 2
    assert threads.split(", ")[7:] == ["256", "256"] and smem.split(", ")[7:] == ["85376", "85376"]
    launch = lib[lib.index("static int launch_variant("):]
    assert "v.fused_kernel[entry_slot(&a)] >= 0 && fused_takes(a)" in launch
    assert "constexpr int kMaxKernels = 9;" in lib
    assert f"constexpr int64_t kFusedMaxImbalancePct = {FUSED_MAX_IMBALANCE_PCT};" in lib


def test_a_row_routed_to_a_twin_falls_back_to_the_fastest_non_twin_timed_at_its_class() -> None:
    """The calls a twin's fused kernel does not take (uneven varlen, split) run on the fastest non-twin the record timed
    at the row's class, not on the twin's own two kernels (whose base is the agents' first candidate, not the best);
    the routed build keeps that variant, and the library's row names it."""
    from kda2.plan.planner import built

    rules = load_rules(RULES)
    spec = load_spec(SPECS / "kimi_linear_chunk.yaml")
    ranked = plan_spec(spec, "sm_90a", rules)
    group = [v for v in ranked.variants if v.config["state_layout"] == "v_first"]
    twin = next(v for v in group if v.config.get("fused"))
    plain = [v for v in group if not v.config.get("fused")]
    assert len(plain) >= 3
    key, klass = "v_first:2048", "prefill-n8"
    # the twin fastest; a non-twin second, another slower, the twin's own base (when timed) slowest of the non-twins
    timed = {twin.id: 500.0, plain[1].id: 600.0, plain[2].id: 650.0, plain[0].id: 700.0}
    plan = plan_spec(spec, "sm_90a", rules, tuned={f"{key}:{klass}": twin.id},
                     tuned_times={f"{key}:{klass}": timed})
    rows = {(d["state_layout"], d["bucket"], d["class"]): d for d in plan.dispatch}
    row = rows[("v_first", 2048, klass)]
    assert row["variant"] == twin.id and row["fallback"] == plain[1].id
    assert plan.variants[row["fallback_index"]].id == plain[1].id
    assert all(d["fallback"] is None and d["fallback_index"] == -1 for d in plan.dispatch if d is not row)
    # untimed: no fallback (the twin's two kernels, as before)
    bare = plan_spec(spec, "sm_90a", rules, tuned={f"{key}:{klass}": twin.id})
    assert all(d["fallback"] is None for d in bare.dispatch)
    # the routed build compiles the fallback and points the row at its new index
    small = built(plan, "routed")
    srow = next(d for d in small.dispatch if (d["state_layout"], d["bucket"], d["class"]) == ("v_first", 2048, klass))
    assert small.variants[srow["fallback_index"]].id == plain[1].id and small.variants[srow["index"]].id == twin.id
    # the library's row carries it, and kda2_fwd hands it to the launch
    variants = [{"id": v.id, "config": v.config, "cubin_path": "x.cubin", "plan": plan_variant(v.config, 232448)}
                for v in small.variants]
    lib = render_library("c", "sm_90a", variants, list(small.dispatch), '"{}"', FEATURES)
    assert re.search(rf"\{{ 1, 2048, {srow['min_chains']}, {srow['index']}, 1, {srow['fallback_index']} \}},"
                     rf"\s+// {klass}: {twin.id}, split <= 1 \(agents\), else {plain[1].id}", lib), lib
    assert "kRoutes[row].max_split, kRoutes[row].fallback)" in lib
    assert "fallback >= 0 && v.fused_kernel[entry_slot(&a)] >= 0 && !fused_takes(a)" in lib


@pytest.mark.parametrize("max_seqlen, n, total, varlen, split, takes", [
    (2048, 8, 8 * 2048, False, 1, True),                 # P3: dense
    (3063, 6, 8192, True, 1, False),                     # P4: the longest 2.24x the mean
    (2048, 8, 8 * 2048, True, 1, True),                  # K10: uniform varlen
    (2048, 8, 8 * 2048, False, 2, False),                # an explicit split runs the two kernels
    (1 << 31, 1, 1 << 31, False, 1, False),              # past 32 bits (kda2/fused.cuh)
])
def test_fused_takes_dense_and_even_unsplit_calls(max_seqlen, n, total, varlen, split, takes) -> None:
    """The library's rule (templates/library.cpp.j2 fused_takes), mirrored in kda2.plan.smem for the GPU test that
    tells which kernel ran."""
    assert fused_takes(max_seqlen, n, total, varlen=varlen, split=split) is takes


@pytest.mark.compile
def test_fused_smem_formula_is_the_headers(tmp_path) -> None:
    """kda2.plan.smem fused_smem_bytes / FUSED_THREADS against kda2/fused.cuh Fused16, by nvcc (the rendered twin
    asserts the same); a wrong figure fails to compile."""
    from kda2.codegen.render import INCLUDE_DIR
    from kda2.compile.toolchain import _which_nvcc
    import subprocess

    def compiles(smem: int) -> subprocess.CompletedProcess:
        src = tmp_path / f"f{smem}.cu"
        src.write_text('#include "kda2/fused.cuh"\n'
                       f"static_assert(kda2::fused::Fused16<__nv_bfloat16>::SMEM_BYTES == {smem}, \"smem\");\n"
                       f"static_assert(kda2::fused::Fused16<__half>::THREADS == {FUSED_THREADS}, \"threads\");\n")
        return subprocess.run([_which_nvcc(), "-c", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
                               f"-I{INCLUDE_DIR}", "-o", str(tmp_path / "f.o"), str(src)], capture_output=True, text=True)

    ok = compiles(fused_smem_bytes(128))
    assert ok.returncode == 0, ok.stderr[-2000:]
    bad = compiles(fused_smem_bytes(128) + 16)
    assert bad.returncode != 0 and "smem" in bad.stderr
