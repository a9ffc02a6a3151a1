"""kda2.codegen.render: the .cu a variant becomes (config struct over kda2/recurrent.cuh, TIR plan in it), the library TU.

Real tools: every rendered kernel is compiled with nvcc to a cubin and ptxas's `-v` report is checked;
the library TU is compiled with the host C++ compiler. All nvcc compiles of this file run once, in
parallel, in a module fixture (a few seconds each).
"""
from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kda2.artifact.abi import GATE_MODES
from kda2.artifact.canonical import canonical_json
from kda2.codegen.render import INCLUDE_DIR, kernel_symbol, render_library, render_variant
from kda2.compile.ptxas import check, parse_ptxas
from kda2.compile.toolchain import find_toolchain
from kda2.plan.profile import load_profiles, resolve_targets
from kda2.plan.model import smem_budget
from kda2.plan.planner import plan_spec
from kda2.plan.variant import variant_id, variant_name
from kda2.spec.model import load_spec
from kda2.spec.rules import load_rules
from kda2.tir import plan_variant

REPO = Path(__file__).resolve().parents[1]
BUDGET = 49152
#: the spec-level run-time features a chunk library checks calls against (recurrent configs fix their own)
ALL_FEATURES = {"qk_l2norm": True, "beta_sigmoid": True, "varlen": True}

# Kernel configs as the planner makes them: no bucket (a bucket is a dispatch row, not code); the
# recurrent pipeline knob `prefetch` is what a bucket > 1 used to switch on.
BASE: dict[str, Any] = {
    "family": "recurrent", "arch": "sm_90a", "k": 128, "v": 128, "prefetch": True,
    "gate_modes": ["lower_bound", "precomputed", "softplus"], "qk_l2norm": True, "beta_sigmoid": True,
    "varlen": True,
}
SMEM_CFG = {**BASE, "state_layout": "k_first", "v_per_warp": 8, "warps": 4, "staging": "smem",
            "k_map": "strided", "reduce": "scatter", "lane_cols": 1}
ALL_K_CFG = {**BASE, "prefetch": False, "state_layout": "k_first", "v_per_warp": 16, "warps": 4,
             "staging": "direct", "k_map": "all", "reduce": "butterfly", "lane_cols": 2}
V_FIRST_CFG = {**BASE, "state_layout": "v_first", "v_per_warp": 8, "warps": 4, "staging": "direct",
               "k_map": "blocked", "reduce": "scatter", "lane_cols": 1}
OTHER_CASES = [(name, arch) for name in ("all_k", "v_first") for arch in ("sm_90a", "sm_80")]
# Multi-token decode with every token's inputs in shared memory (PreloadAgent): both token loops, the staged one too,
# at the bucket's T and at a T that is not a power of two.
PRELOAD_CASES = {"preload_all_k": {**ALL_K_CFG, "intermediate": True, "preload": 8},
                 "preload_v_first": {**V_FIRST_CFG, "prefetch": False, "intermediate": True, "preload": 8},
                 "preload_smem": {**SMEM_CFG, "prefetch": False, "intermediate": True, "preload": 5}}
# Persistent decode kernels (issue 13 item 5), bf16 and fp32 states: k_map=all under the launch bounds the occupancy
# agent gives them, v_first blocked, k_first direct strided (two cp.async pieces per run).
# Bulk-staged decode kernels (sm_90a only), bf16 and fp32 states: a k_first tile by the state tensor maps, a v_first one
# by linear copies; both tiles in dynamic shared memory.
BULK_CASES = {
    "bulk_k_first": {**ALL_K_CFG, "prefetch": False, "staging": "bulk", "lane_cols": 4, "state_dtypes": ["fp32", "bf16"]},
    "bulk_v_first": {**V_FIRST_CFG, "prefetch": False, "staging": "bulk", "v_per_warp": 16, "state_dtypes": ["fp32", "bf16"]},
    "bulk_v_first_2cta": {**V_FIRST_CFG, "prefetch": False, "staging": "bulk", "v_per_warp": 16, "min_ctas": 2},
}
PERSISTENT_CASES = {
    "all_k_ps": {**ALL_K_CFG, "persistent": True, "min_ctas": 3, "state_dtypes": ["fp32", "bf16"]},
    "v_first_ps": {**V_FIRST_CFG, "prefetch": False, "persistent": True, "state_dtypes": ["fp32", "bf16"]},
    "k_first_ps": {**SMEM_CFG, "prefetch": False, "staging": "direct", "persistent": True},
}


def nvcc() -> str:
    path = shutil.which("nvcc")
    assert path, "nvcc must be on PATH (pip install -e '.[test]' and the CUDA 13.0 toolkit)"
    return path


def with_arch(cfg: dict[str, Any], arch: str) -> dict[str, Any]:
    return {**cfg, "arch": arch}


def compile_cubin(cu: Path, arch: str) -> str:
    """nvcc -cubin with ptxas -v; returns the ptxas report (fails the test on a compile error)."""
    num = arch.removeprefix("sm_")
    argv = [nvcc(), "-std=c++17", "-O3", f"-I{INCLUDE_DIR}", "-cubin",
            "-gencode", f"arch=compute_{num},code=sm_{num}", "-Xptxas", "-v", str(cu), "-o", str(cu.with_suffix(".cubin"))]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{' '.join(argv)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert cu.with_suffix(".cubin").stat().st_size > 0
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Render and compile every kernel of this file once: {case: {config, plan, text, ptxas}}."""
    d = tmp_path_factory.mktemp("render")
    cases: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "pass": (SMEM_CFG, plan_variant(SMEM_CFG, BUDGET)),
        "no_pass": (SMEM_CFG, plan_variant(SMEM_CFG, BUDGET, enable_pass=False)),
    }
    for name, arch in OTHER_CASES:
        cfg = with_arch(ALL_K_CFG if name == "all_k" else V_FIRST_CFG, arch)
        cases[f"{name}-{arch}"] = (cfg, plan_variant(cfg, BUDGET))
    for name, base in PRELOAD_CASES.items():
        for arch in ("sm_90a", "sm_80"):
            cfg = with_arch(base, arch)
            cases[f"{name}-{arch}"] = (cfg, plan_variant(cfg, BUDGET))
    for name, cfg in PERSISTENT_CASES.items():
        for arch in ("sm_90a", "sm_80"):
            cases[f"{name}-{arch}"] = (with_arch(cfg, arch), plan_variant(with_arch(cfg, arch), BUDGET))
    for name, cfg in BULK_CASES.items():
        cases[name] = (cfg, plan_variant(cfg, BUDGET))
    out: dict[str, dict[str, Any]] = {}
    for key, (cfg, plan) in cases.items():
        text = render_variant(cfg, plan)
        (d / f"{key}.cu").write_text(text + (prefetch_asserts(cfg, plan) if cfg.get("persistent") else ""))
        out[key] = {"config": cfg, "plan": plan, "text": text, "cu": d / f"{key}.cu"}
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        logs = dict(zip(out, pool.map(lambda k: compile_cubin(out[k]["cu"], out[k]["config"]["arch"]), out)))
    for key, log in logs.items():
        out[key]["ptxas"] = log
        out[key]["resources"] = parse_ptxas(log)
    return out


def prefetch_asserts(cfg: dict[str, Any], plan: dict[str, Any]) -> str:
    """static_asserts that the kernel header's copy buffer (Kernel::PF_*) is the TIR plan's: rows, piece width and
    bytes (fp32 states), for a persistent variant's .cu."""
    k = f"kda2::recurrent::Kernel<kda2_{variant_id(cfg)}::Config, __nv_bfloat16, float>"
    return (f"static_assert({k}::PF_RUNS * {k}::PF_PIECES == {plan['prefetch_rows']}, \"copy buffer rows\");\n"
            f"static_assert({k}::PF_VEC == {plan['prefetch_vec']} && {k}::PF_ROW == {plan['prefetch_row']}, \"pc\");\n"
            f"static_assert(sizeof(float) * {k}::PF_ELEMS == {plan['prefetch_bytes']}, \"copy buffer bytes\");\n")


# ---- the TIR pass changes what is built --------------------------------------------------------

def stride_of(text: str) -> int:
    (m,) = re.findall(r"^  static constexpr int SMEM_STRIDE = (\d+);", text, re.M)
    return int(m)


@pytest.mark.compile  # real nvcc / g++
def test_pass_plans_differ_as_expected(built) -> None:
    p, n = built["pass"]["plan"], built["no_pass"]["plan"]
    k, bv = SMEM_CFG["k"], SMEM_CFG["warps"] * SMEM_CFG["v_per_warp"]
    assert p["tile"] == n["tile"] == [k, bv] == [128, 32]
    assert n["smem_stride"] == bv == 32 and n["smem_pad"] == 0
    assert max(n["conflicts_after"].values()) > 1, n["conflicts_after"]
    assert p["smem_stride"] != bv and p["smem_stride"] == bv + p["smem_pad"]
    assert max(p["conflicts_after"].values()) == 1, p["conflicts_after"]
    assert p["smem_stride"] % 4 == 0  # float4 rows stay 16-byte aligned


@pytest.mark.compile  # real nvcc / g++
def test_pass_changes_only_smem_stride(built) -> None:
    a, b = built["pass"]["text"], built["no_pass"]["text"]
    assert stride_of(a) == built["pass"]["plan"]["smem_stride"]
    assert stride_of(b) == built["no_pass"]["plan"]["smem_stride"] == 32
    la, lb = a.splitlines(), b.splitlines()
    assert len(la) == len(lb)
    changed = [i for i, (x, y) in enumerate(zip(la, lb)) if x != y]
    line = "  static constexpr int SMEM_STRIDE = {};  // chosen by the TIR pass"
    assert [la[i] for i in changed] == [line.format(stride_of(a))], \
        "\n".join(difflib.unified_diff(lb, la, lineterm=""))
    assert [lb[i] for i in changed] == [line.format(32)]


@pytest.mark.compile  # real nvcc / g++
def test_pass_and_no_pass_compile_with_different_smem(built) -> None:
    k = SMEM_CFG["k"]
    smem = {}
    for case in ("pass", "no_pass"):
        res = built[case]["resources"]
        sym = kernel_symbol(variant_id(SMEM_CFG))
        assert list(res) == [sym], built[case]["ptxas"]
        r = res[sym]
        assert r["arch"] == "sm_90a"
        assert check(res, allow_spills=False, max_registers=255) == [], built[case]["ptxas"]
        assert r["smem"] == k * built[case]["plan"]["smem_stride"] * 4, built[case]["ptxas"]
        smem[case] = r["smem"]
    assert smem["pass"] != smem["no_pass"]
    assert smem["no_pass"] == 128 * 32 * 4


# ---- the rendered .cu: config only, no provenance; determinism ----------------------------------------

def config_values(text: str) -> dict[str, str]:
    """The Config struct's members as written: {"K": "128", "ALL_K": "false", ...}."""
    return dict(re.findall(r"^  static constexpr (?:int|bool) (\w+) = (\w+);", text, re.M))


def without_identity(text: str, config: dict[str, Any]) -> str:
    """The .cu with its variant's id and name blanked: what is left is the code the config selects."""
    return text.replace(variant_name(config), "NAME").replace(variant_id(config), "ID")


def test_cu_is_config_and_entry_without_reasons_spec_version_or_bucket() -> None:
    """Straight from the planner: the .cu names the variant and fixes its config; the agents' reasons,
    the spec, the kda2 version (the manifest and why.json have them) and the bucket are not in it."""
    from kda2 import __version__

    spec = load_spec(REPO / "kernel_specs" / "kimi_linear_recurrent.yaml")
    spec_plan = plan_spec(spec, "sm_80", load_rules(REPO / "rules"))
    pv = next(v for v in spec_plan.variants if v.config["staging"] == "direct")
    tplan = {"smem_stride": 0, "stage_row": 20, "smem_pad": 0, "smem_bytes": 0, "conflicts_before": {}, "conflicts_after": {},
             "pass": {"name": "kda2.bank_pad"}}
    text = render_variant(pv.config, tplan)
    lines = text.splitlines()
    assert lines[0].startswith(f"// {variant_name(pv.config)}: ") and "kda2/recurrent.cuh" in lines[0]
    assert len(lines) <= 52  # config + up to four entries (input dtype x state dtype)
    assert '#include "kda2/recurrent.cuh"' in lines
    assert f"namespace kda2_{pv.id} {{" in lines
    assert f"kda2::recurrent::Kernel<kda2_{pv.id}::Config, __nv_bfloat16, float>::run(a);" in text
    assert re.search(rf'^extern "C" __global__ void __launch_bounds__\(kda2_{pv.id}::Config::WARPS \* 32, '
                     rf"kda2_{pv.id}::Config::MIN_CTAS\) "
                     rf"{kernel_symbol(pv.id)}\(const KDA2RecurrentArgs a\) \{{$", text, re.M)
    assert "static constexpr int MIN_CTAS = 1;" in text  # ptxas's own choice unless the occupancy agent raised it
    raised = next(v for v in spec_plan.variants if v.config.get("min_ctas", 1) > 1)
    assert f"static constexpr int MIN_CTAS = {raised.config['min_ctas']};" in render_variant(raised.config, tplan)
    assert "static constexpr int PRELOAD = 0;" in text  # inputs loaded in the token loop unless the preload agent
    for t in (1, 8):  # the bucket's T
        preload = next(v for v in spec_plan.variants if v.config.get("preload") == t)
        assert f"static constexpr int PRELOAD = {t};" in render_variant(preload.config, tplan)
    for _, why in pv.reasons:
        assert why not in text, why
    assert spec.name not in text and __version__ not in text and "Generated" not in text
    # no bucket: neither the word nor the old `_t<bucket>` part of the name
    assert not re.search(r"bucket|_t\d+_", text, re.I), text
    c, cfg = config_values(text), pv.config
    assert c == {
        "K": str(cfg["k"]), "V": str(cfg["v"]), "WARPS": str(cfg["warps"]), "VPW": str(cfg["v_per_warp"]),
        "LANE_COLS": str(cfg["lane_cols"]), "ALL_K": str(cfg["k_map"] == "all").lower(),
        "STRIDED": str(cfg["k_map"] in ("strided", "all")).lower(),
        "V_FIRST": str(cfg["state_layout"] == "v_first").lower(), "SMEM_STAGING": "false", "SMEM_STRIDE": "1",
        "STAGE_ROW": "20" if cfg["k_map"] == "all" else "4",
        "HAS_SOFTPLUS": str("softplus" in cfg["gate_modes"]).lower(),
        "HAS_LOWER_BOUND": str("lower_bound" in cfg["gate_modes"]).lower(),
        "HAS_L2NORM": str(cfg["qk_l2norm"]).lower(), "HAS_BETA_SIGMOID": str(cfg["beta_sigmoid"]).lower(),
        "HAS_VARLEN": str(cfg["varlen"]).lower(), "SCATTER": str(cfg["reduce"] == "scatter").lower(),
        "PREFETCH": str(cfg["prefetch"]).lower(), "INTERMEDIATE": str(cfg["intermediate"]).lower(),
        "MIN_CTAS": str(cfg.get("min_ctas", 1)), "PRELOAD": str(cfg.get("preload", 0)),
        "PERSISTENT": "false", "PF_VEC": "1", "PF_ROW": "1", "BULK": "false", "BULK_PITCH": "1",
    }, text


@pytest.mark.compile  # real nvcc / g++
def test_prefetch_knob_changes_exactly_the_prefetch_line(built) -> None:
    """`prefetch` (what a bucket > 1 used to switch on) is a config knob: flipping it changes the
    PREFETCH constant and nothing else but the variant's id and name; a config without it does not render."""
    import jinja2

    plan = built["pass"]["plan"]
    assert config_values(built["pass"]["text"])["PREFETCH"] == "true"            # SMEM_CFG: prefetch
    assert config_values(built["all_k-sm_90a"]["text"])["PREFETCH"] == "false"   # ALL_K_CFG: decode-only
    on, off = SMEM_CFG, {**SMEM_CFG, "prefetch": False}
    assert variant_id(on) != variant_id(off)
    la = without_identity(render_variant(on, plan), on).splitlines()
    lb = without_identity(render_variant(off, plan), off).splitlines()
    assert len(la) == len(lb)
    changed = [(x, y) for x, y in zip(la, lb) if x != y]
    assert len(changed) == 1, "\n".join(difflib.unified_diff(la, lb, lineterm=""))
    ((x, y),) = changed
    assert re.fullmatch(r"  static constexpr bool PREFETCH = true;.*", x), x
    assert y == x.replace("= true;", "= false;")
    # no default (the bucket used to supply one): a recurrent config must say
    with pytest.raises(jinja2.UndefinedError, match="prefetch"):
        render_variant({k: v for k, v in SMEM_CFG.items() if k != "prefetch"}, plan)


@pytest.mark.compile  # real nvcc / g++
def test_preload_kernels_compile_with_the_planned_buffer(built) -> None:
    """Preload kernels (both token loops, sm_90a and sm_80) compile without spills; ptxas's shared memory is the same
    kernel's without preload plus exactly model.preload_bytes (the copy buffer and the prepared-token table), less
    the k_map=all per-warp token stage the table replaces (model.stage_bytes), so the budget and occupancy the
    planner computes from smem_estimate see what the kernel declares; flipping the knob changes the PRELOAD line and
    the name only."""
    from kda2.plan.model import preload_bytes, stage_bytes

    plain = {"preload_all_k": "all_k-{}", "preload_v_first": "v_first-{}", "preload_smem": "pass"}
    for name, base in PRELOAD_CASES.items():
        for arch in ("sm_90a", "sm_80"):
            case, other = built[f"{name}-{arch}"], built[plain[name].format(arch)]
            cfg, res = case["config"], case["resources"]
            assert config_values(case["text"])["PRELOAD"] == str(cfg["preload"])
            assert config_values(other["text"])["PRELOAD"] == "0"
            assert check(res, allow_spills=False, max_registers=255) == [], case["ptxas"]
            smem = {r["smem"] for r in res.values()}
            base_smem = {r["smem"] for r in other["resources"].values()}
            assert len(smem) == len(base_smem) == 1, (case["ptxas"], other["ptxas"])
            stage = stage_bytes(other["config"], other["plan"].get("stage_row"))
            assert (stage > 0) == (cfg["k_map"] == "all")
            assert smem.pop() - base_smem.pop() == preload_bytes(cfg) - stage, case["ptxas"]
            assert preload_bytes(cfg) > 0 and stage_bytes(cfg) == 0
    # v_first, 32 columns per CTA: copy buffer (q, k 16-bit, g fp32, v, beta) + table (decay rows, 4 scalars)
    assert preload_bytes(PRELOAD_CASES["preload_v_first"]) == (8 * (2 * 128 * 2 + 128 * 4) + 8 * 32 * 2 + 32
                                                              + 8 * (128 + 4) * 4)
    on = PRELOAD_CASES["preload_v_first"]
    off = {k: v for k, v in on.items() if k != "preload"}
    assert variant_id(on) != variant_id(off) and variant_name(on).endswith(f"_pl8_{variant_id(on)}")
    plan = built["preload_v_first-sm_90a"]["plan"]
    la = without_identity(render_variant(on, plan), on).splitlines()
    lb = without_identity(render_variant(off, plan), off).splitlines()
    changed = [(x, y) for x, y in zip(la, lb) if x != y]
    assert len(la) == len(lb) and len(changed) == 1, "\n".join(difflib.unified_diff(la, lb, lineterm=""))
    ((x, y),) = changed
    assert re.fullmatch(r"  static constexpr int PRELOAD = 8;.*", x) and y == x.replace("= 8;", "= 0;"), (x, y)


@pytest.mark.compile  # real nvcc / g++
def test_smem_estimate_is_what_ptxas_reports(built) -> None:
    """The planner's shared-memory estimate (model.smem_estimate, which the budget holds to the spec's bound — 48 KB
    of static shared memory for the recurrent kernels) is never below what ptxas reports for a recurrent case built
    here (staged, k_map=all at lane_cols 2, whose token stage rows depend on it, v_first, preload, persistent, both
    archs), and exact where no pad of the TIR pass enters (direct staging): an estimate below the kernel let a
    49 696-byte sm_80 kernel into a plan (ptxas: 0xc000 max). The staged tile's pad is the pass's choice (<= 8)."""
    from kda2.plan.model import smem_estimate

    checked = 0
    for name, case in built.items():
        cfg = case["config"]
        if cfg["family"] != "recurrent":
            continue
        got = max(r["smem"] for r in case["resources"].values())  # (bf16-state entries copy half the bytes)
        est = smem_estimate(cfg)
        assert got <= est, (name, got, est)
        if cfg["staging"] == "direct":
            assert got == est, (name, got, est)
            checked += 1
    assert checked >= 8


@pytest.mark.compile  # real nvcc / g++
def test_render_is_deterministic(built) -> None:
    cfg, plan = SMEM_CFG, built["pass"]["plan"]
    first = render_variant(cfg, plan)
    assert first == built["pass"]["text"]
    assert render_variant(cfg, plan) == first
    # key order of the config and the plan must not matter
    shuffled_cfg = dict(reversed(list(cfg.items())))
    shuffled_plan = json.loads(json.dumps(dict(reversed(list(plan.items())))))
    assert render_variant(shuffled_cfg, shuffled_plan) == first
    # ... but the config does, beyond the id
    for change in ({"v_per_warp": 4}, {"reduce": "butterfly"}):
        other = {**cfg, **change}
        assert without_identity(render_variant(other, plan), other) != without_identity(first, cfg), change


def planned_variants() -> list[tuple[str, str, Any, dict[str, Any]]]:
    """(spec, arch, planned variant, TIR plan) of every kernel the repository's specs build."""
    rules = load_rules(REPO / "rules")
    out = []
    for path in sorted((REPO / "kernel_specs").glob("*.yaml")):
        spec = load_spec(path)
        for arch, hw in resolve_targets(spec, load_profiles()).items():
            for pv in plan_spec(spec, arch, rules).variants:
                budget = smem_budget(pv.config, spec.budget.max_smem_bytes, hw.smem_per_block_bytes)
                out.append((spec.name, arch, pv, plan_variant(pv.config, budget)))
    return out


def test_planned_kernels_with_different_ids_render_different_code() -> None:
    """Kernel identity at the source (docs/DESIGN.md §2.2): with its id and name blanked, every kernel the
    specs plan for an arch renders a .cu of its own (the arch reaches the code through -gencode). Two that
    did not would be one kernel built twice (a config field that changes no code); buckets served by the
    same code share one variant and render it once."""
    from kda2 import __version__

    seen: dict[tuple[str, str], str] = {}
    families = set()
    for spec_name, arch, pv, tplan in planned_variants():
        text = render_variant(pv.config, tplan)
        assert spec_name not in text and __version__ not in text and not re.search(r"bucket", text, re.I)
        for _, why in pv.reasons:
            assert why not in text, (pv.name, why)
        body = without_identity(text, pv.config)
        where = f"{spec_name}/{arch}/{pv.name}"
        assert seen.setdefault((arch, body), where) == where, \
            f"{where} renders the same code as {seen[arch, body]}"
        families.add(pv.config["family"])
    assert families == {"recurrent", "chunk"}


# ---- library TU --------------------------------------------------------------------------------

def test_render_library_bulk_tile_is_dynamic_shared_memory(tmp_path) -> None:
    """A bulk-staged recurrent variant is launched with its tile as dynamic shared memory (recurrent.cuh bulk_smem):
    rows x pitch elements of each entry's state dtype, from its TIR plan; other recurrent variants take none. A k_first
    one's entries take the state tensor maps as a second parameter."""
    from kda2.runtime import abi

    bulk = {**ALL_K_CFG, "staging": "bulk", "lane_cols": 4, "dtypes": ["bf16", "fp16"], "state_dtypes": ["fp32", "bf16"]}
    plan = plan_variant(bulk, 227 * 1024)
    variants = [{"id": variant_id(c), "config": c, "cubin_path": str(tmp_path / "x.cubin"),
                 **({"plan": {k: plan[k] for k in ("bulk_rows", "bulk_pitch")}} if c is bulk else {})}
                for c in (ALL_K_CFG, bulk)]
    dispatch = [{"state_layout": "k_first", "bucket": 1, "class": "c", "min_chains": 0, "index": 1}]
    lib_json = {"abi_version": abi.ABI_VERSION, "spec": "t", "arch": "sm_90a",
                "variants": [v["id"] for v in variants], "dispatch": dispatch}
    text = render_library("t", "sm_90a", variants, dispatch, json.dumps(canonical_json(lib_json)), ALL_FEATURES)
    rows = {m[0]: (m[1], m[2], m[3]) for m in
            re.findall(r'^    \{"([0-9a-f]{12})", \{.*\n.*\n\s+\{ ([\d, ]+) \}, \{ ([\d, ]+) \},\n.*\n.*, (\d), 0, \{0, 0\},\n'
                       r'\s+\{ -1, -1, -1, -1 \}\},$',
                       text, re.M)}
    assert rows[variants[0]["id"]] == ("128", "0", "0")
    # entries: (bf16, fp32), (fp16, fp32), (bf16, bf16 state), (fp16, bf16 state); the tile is 128 key rows of 64
    # columns, moved by the h0 / ht tensor maps the launcher encodes (the last field)
    assert rows[variants[1]["id"]] == ("128, 128, 128, 128", "32768, 32768, 16384, 16384", "1")
    cu = render_variant(bulk, plan)
    assert cu.count("const __grid_constant__ kda2::recurrent::StateMaps maps") == 4 and cu.count("::run(a, &maps)") == 4
    assert "StateMaps" not in render_variant(ALL_K_CFG, plan_variant(ALL_K_CFG, 227 * 1024))


@pytest.mark.compile  # real nvcc / g++
def test_render_library_contains_variants_and_dispatch_and_compiles(built, tmp_path) -> None:
    import ctypes

    from kda2.runtime import abi

    cubin = tmp_path / "dummy.cubin"
    cubin.write_bytes(b"\x7fELF not really a cubin\x00" * 4)
    # one gate mode short of all in two of them: the library's gate masks must use the ABI's codes
    cfgs = [SMEM_CFG, {**built["all_k-sm_90a"]["config"], "gate_modes": ["softplus"]},
            {**built["v_first-sm_90a"]["config"], "gate_modes": ["lower_bound", "precomputed"]}]
    variants = [{"id": variant_id(c), "config": c, "cubin_path": str(cubin)} for c in cfgs]
    dispatch = [{"state_layout": "k_first", "bucket": 1, "class": "c", "min_chains": 0, "index": 1},
                {"state_layout": "k_first", "bucket": 64, "class": "c", "min_chains": 0, "index": 0},
                {"state_layout": "v_first", "bucket": 64, "class": "c", "min_chains": 0, "index": 2}]
    lib_json = {"abi_version": abi.ABI_VERSION, "spec": "t", "arch": "sm_90a",
                "variants": [v["id"] for v in variants], "dispatch": dispatch}
    text = render_library("t", "sm_90a", variants, dispatch, json.dumps(canonical_json(lib_json)), ALL_FEATURES)
    assert text == render_library("t", "sm_90a", variants, dispatch, json.dumps(canonical_json(lib_json)), ALL_FEATURES)
    for v in variants:
        assert f'"{kernel_symbol(v["id"])}"' in text
        assert f'kda2_cubin_{v["id"]}' in text
        assert f'.incbin \\"{cubin}\\"' in text
    # never split, no fallback (no twin)
    rows = re.findall(r"^\s*\{ (\d), (\d+), (\d+), (\d+), 1, -1 \},  // c: ([0-9a-f]{12})$", text, re.M)
    assert rows == [(str(int(d["state_layout"] == "v_first")), str(d["bucket"]), "0", str(d["index"]),
                     variants[d["index"]]["id"]) for d in dispatch]
    assert "constexpr int kNumVariants = 3;" in text and "constexpr int kNumRoutes = 3;" in text

    tc = find_toolchain()
    src = tmp_path / "library.cpp"
    src.write_text(text)
    so = tmp_path / "libt.so"
    argv = [tc.cxx, "-std=c++17", "-O2", "-fPIC", "-shared", f"-I{INCLUDE_DIR}", f"-I{tc.include_dir()}",
            str(src), "-o", str(so), "-ldl"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{' '.join(argv)}:\n{out.stderr[-3000:]}"
    nm = shutil.which("nm")
    assert nm, "binutils nm is needed (it comes with g++)"
    syms = subprocess.run([nm, str(so)], capture_output=True, text=True, check=True).stdout
    for v in variants:
        assert re.search(rf"\bkda2_cubin_{v['id']}\b", syms)
    for entry in ("kda2_select", "kda2_route", "kda2_launch", "kda2_recurrent_fwd", "kda2_library_json", "kda2_num_variants"):
        assert re.search(rf" T {entry}$", syms, re.M), entry

    # the launcher's feature check reads the rendered gate masks with the header's KDA2_GATE_* codes:
    # each variant takes exactly its config's gate modes (N = 0: every check runs, nothing launches)
    lib = ctypes.CDLL(str(so))
    for name, (restype, argtypes) in abi.FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    assert lib.kda2_abi_version() == abi.ABI_VERSION
    assert lib.kda2_num_variants() == len(variants)
    a = abi.KDA2RecurrentArgs(N=0, T=1, H=1, HV=1)
    for index, v in enumerate(variants):
        a.state_v_first = int(v["config"]["state_layout"] == "v_first")
        for mode, code in GATE_MODES.items():
            a.gate_mode = code
            want = abi.OK if mode in v["config"]["gate_modes"] else abi.ERR_FEATURE
            assert lib.kda2_launch(index, ctypes.addressof(a), None) == want, (index, mode)


# ---- other layouts ------------------------------------------------------------------------------

@pytest.mark.compile  # real nvcc / g++
@pytest.mark.parametrize("name,arch", OTHER_CASES)
def test_other_layouts_compile_without_spills(built, name: str, arch: str) -> None:
    case = built[f"{name}-{arch}"]
    cfg = case["config"]
    assert case["plan"]["staging"] == "direct" and case["plan"]["smem_stride"] == 0
    text = case["text"]
    assert f"constexpr bool ALL_K = {'true' if name == 'all_k' else 'false'};" in text
    assert f"constexpr bool V_FIRST = {'true' if name == 'v_first' else 'false'};" in text
    assert "constexpr bool SMEM_STAGING = false;" in text
    res = case["resources"]
    sym = kernel_symbol(variant_id(cfg))
    assert list(res) == [sym], case["ptxas"]
    assert res[sym]["arch"] == arch
    assert check(res, allow_spills=False, max_registers=255) == [], case["ptxas"]
    assert res[sym]["spill_stores"] == res[sym]["spill_loads"] == res[sym]["stack"] == 0


# ---- persistent decode kernels -------------------------------------------------------------------------

@pytest.mark.compile  # real nvcc / g++
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", list(PERSISTENT_CASES))
def test_persistent_kernels_compile_without_spills(built, name: str, arch: str) -> None:
    """A persistent variant renders PERSISTENT with the TIR plan's copy buffer (its .cu also static_asserts that the
    header's buffer geometry is the plan's), compiles for both archs without spills, and ptxas reports the buffer
    (at the state dtype's width) beside the k_map=all token stage as the kernel's whole shared memory."""
    case = built[f"{name}-{arch}"]
    cfg, plan = case["config"], case["plan"]
    c = config_values(case["text"])
    assert (c["PERSISTENT"], c["PF_VEC"], c["PF_ROW"]) == ("true", str(plan["prefetch_vec"]), str(plan["prefetch_row"]))
    assert int(c["MIN_CTAS"]) == cfg.get("min_ctas", 1)
    assert plan["prefetch_bytes"] == cfg["k"] * cfg["warps"] * cfg["v_per_warp"] * 4  # the CTA's tile, no pad
    assert plan["prefetch"]["conflicts_after"] == {"prefetch_copy": 1, "prefetch_read": 1}
    res = case["resources"]
    vid = variant_id(cfg)
    states = cfg.get("state_dtypes", ["fp32"])
    assert sorted(res) == sorted(kernel_symbol(vid, "bf16", s) for s in states), case["ptxas"]
    assert check(res, allow_spills=False, max_registers=255) == [], case["ptxas"]
    stage = 0
    if cfg["k_map"] == "all":
        ksplit = 32 // (cfg["v_per_warp"] // cfg["lane_cols"])
        stage = cfg["warps"] * 3 * ksplit * plan["stage_row"] * 4
    for state, width in (("fp32", 4), ("bf16", 2)):
        sym = kernel_symbol(vid, "bf16", state)
        if sym in res:
            r = res[sym]
            assert r["spill_stores"] == r["spill_loads"] == r["stack"] == 0, case["ptxas"]
            assert r["smem"] == plan["prefetch_bytes"] // 4 * width + stage, (sym, case["ptxas"])
            assert r["registers"] <= 65536 // (32 * cfg["warps"] * cfg.get("min_ctas", 1)) // 8 * 8


# ---- bulk-staged decode kernels ------------------------------------------------------------------------

@pytest.mark.compile  # real nvcc / g++
@pytest.mark.parametrize("name", list(BULK_CASES))
def test_bulk_kernels_copy_by_tensor_maps_or_linear_copies(built, name: str) -> None:
    """A bulk-staged variant compiles without spills for both state dtypes; its static shared memory is what stays
    beside the tile (the k_map=all token stage and the mbarrier: the tile is dynamic, so ptxas does not count it),
    and its SASS moves the tile as planned: a k_first tile by tensor-map boxes (UTMALDG / UTMASTG), a v_first one by
    linear bulk copies (UBLKCP), both completing on an mbarrier — never by per-thread global loads and stores."""
    from kda2.compile.sass import check as sass_check, sass_opcodes

    case = built[name]
    cfg, plan = case["config"], case["plan"]
    assert plan["bulk_pad"] == 0 and plan["bulk_pitch"] == (cfg["k"] if cfg["state_layout"] == "v_first"
                                                            else cfg["warps"] * cfg["v_per_warp"])
    res = case["resources"]
    assert check(res, allow_spills=False, max_registers=255) == [], case["ptxas"]
    stage = 0
    if cfg["k_map"] == "all":
        stage = cfg["warps"] * 3 * (32 // (cfg["v_per_warp"] // cfg["lane_cols"])) * plan["stage_row"] * 4
    for sym, r in res.items():
        # the token stage and the mbarrier, not the tile (which starts 128-byte aligned after them)
        assert stage + 8 <= r["smem"] <= stage + 128, (sym, case["ptxas"])
    ops = sass_opcodes(case["cu"].with_suffix(".cubin"))
    expected, missing, local = sass_check(ops, "recurrent", "sm_90a", cfg)
    assert not missing and not local, (expected, missing, local)
    tensor = {op for op in ops if op.startswith(("UTMALDG", "UTMASTG"))}
    assert bool(tensor) == (cfg["state_layout"] == "k_first") and "LDG.E.EF" not in ops
    # the next wave's tile asked of L2 only at the compiler's occupancy (recurrent.cuh bulk_prefetch_ahead)
    prefetch = {op for op in ops if op.startswith(("UBLKPF", "UTMAPF"))}
    assert bool(prefetch) == (cfg.get("min_ctas", 1) == 1), prefetch


@pytest.mark.compile  # real nvcc / g++
def test_library_launches_persistent_variants_on_the_resident_slots(built, tmp_path) -> None:
    """The library TU marks each variant persistent or not (the config's knob, absent = grid), asks the driver for a
    persistent variant's resident CTAs per entry when its cubin loads, and launches min(tiles, slots) CTAs in x;
    a grid variant keeps the (V / block_v, HV, N) grid. It compiles, and a call without sequences is refused or
    accepted before any driver use alike."""
    import ctypes

    from kda2.runtime import abi

    cubin = tmp_path / "dummy.cubin"
    cubin.write_bytes(b"\x7fELF not really a cubin\x00" * 4)
    grid_cfg = {k: v for k, v in built["all_k_ps-sm_90a"]["config"].items() if k not in ("persistent", "min_ctas")}
    cfgs = [grid_cfg, built["all_k_ps-sm_90a"]["config"], built["v_first_ps-sm_90a"]["config"]]
    variants = [{"id": variant_id(c), "config": c, "cubin_path": str(cubin)} for c in cfgs]
    dispatch = [{"state_layout": "k_first", "bucket": 1, "class": "c", "min_chains": 0, "index": 0},
                {"state_layout": "v_first", "bucket": 1, "class": "c", "min_chains": 0, "index": 2}]
    lib_json = {"abi_version": abi.ABI_VERSION, "spec": "t", "arch": "sm_90a",
                "variants": [v["id"] for v in variants], "dispatch": dispatch}
    text = render_library("t", "sm_90a", variants, dispatch, json.dumps(canonical_json(lib_json)), ALL_FEATURES)
    rows = re.findall(r'^    \{"([0-9a-f]{12})", \{.*\n.*\n.*\n.*\n\s+(\d), (\d), (\d), (\d), 0, \{0, 0\},\n'
                      r'\s+\{ -1, -1, -1, -1 \}\},$', text,
                      re.M)
    # (intermediate, persistent, splits: recurrent rows never split, state maps: direct kernels take none; then the
    # chunk prep's maps, none)
    assert rows == [(v["id"], "0", str(int(bool(v["config"].get("persistent")))), "0", "0") for v in variants], text
    launch = text[text.index('static int launch_variant('):]
    assert "if (v.persistent)" in launch and "slots[e] > 0 && slots[e] < tiles ? slots[e] : tiles" in launch
    assert "static_cast<int64_t>(kValueDim / v.block_v) * a.HV * a.N" in launch
    assert "launch_recurrent(d, fn[e], static_cast<unsigned>(grid), 1, 1," in launch
    assert "launch_recurrent(d, fn[e], kValueDim / v.block_v, a.HV, a.N," in launch
    # sm_90+: programmatic dependent launches (the kernels' griddepcontrol is checked in their SASS); sm_80: plain
    assert "constexpr bool kPdl = true;" in text and "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION" in text
    text80 = render_library("t", "sm_80", variants, dispatch, json.dumps(canonical_json({**lib_json, "arch": "sm_80"})),
                            ALL_FEATURES)
    assert "constexpr bool kPdl = false;" in text80
    load = text[text.index("int get_functions("):text.index("// Slot of a call")]
    assert "if (v.persistent)" in load and "d.occupancy(&per_sm, loaded.fn[k], v.threads[k], v.smem[k])" in load
    tc = find_toolchain()
    src = tmp_path / "library.cpp"
    src.write_text(text)
    so = tmp_path / "libt.so"
    argv = [tc.cxx, "-std=c++17", "-O2", "-Wall", "-Werror", "-fPIC", "-shared", f"-I{INCLUDE_DIR}",
            f"-I{tc.include_dir()}", str(src), "-o", str(so), "-ldl"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{' '.join(argv)}:\n{out.stderr[-3000:]}"
    lib = ctypes.CDLL(str(so))
    for name, (restype, argtypes) in abi.FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    a = abi.KDA2RecurrentArgs(N=0, T=1, H=1, HV=1, gate_mode=GATE_MODES["softplus"])
    for index, v in enumerate(variants):
        a.state_v_first = int(v["config"]["state_layout"] == "v_first")
        assert lib.kda2_launch(index, ctypes.addressof(a), None) == abi.OK, index


# ---- family chunk: the library TU --------------------------------------------------------------------

CHUNK_CFG: dict[str, Any] = {
    "family": "chunk", "arch": "sm_90a", "k": 128, "v": 128, "state_layout": "v_first",
    "chunk": 64, "block_v": 32, "stages": 2, "gate_modes": ["lower_bound", "precomputed", "softplus"],
}


def chunk_library(tmp_path: Path, dispatch_buckets=(2048, 65536)) -> tuple[Path, list[dict[str, Any]]]:
    """Render, compile and link a chunk library.so (dummy cubins; nothing is launched)."""
    from kda2.runtime import abi

    cubin = tmp_path / "dummy.cubin"
    cubin.write_bytes(b"\x7fELF not really a cubin\x00" * 4)
    variants, dispatch = [], []
    for layout in ("k_first", "v_first"):
        for b in dispatch_buckets:
            bv = 32 if b > 16384 else 64
            cfg = dict(CHUNK_CFG, state_layout=layout, block_v=bv)
            plan = {"prep_threads": 256, "state_threads": bv // 16 * 64, "prep_smem_bytes": 103680,
                    "state_smem_bytes": {32: 155680, 64: 195616}[bv],  # (the TIR stage's numbers, test_tir)
                    "prep_tma": False}   # these preps copy by cp.async (a fake cubin; no tensor maps to encode)
            dispatch.append({"state_layout": layout, "bucket": b, "class": "few", "min_chains": 0,
                             "index": len(variants), "split": 1 + len(variants) % 3, "split_by": "agents"})
            variants.append({"id": variant_id(cfg), "config": cfg, "cubin_path": str(cubin), "plan": plan})
        # a second batch class in the first bucket, from 64 chains on, served by the last bucket's tiles
        dispatch.insert(len(dispatch) - len(dispatch_buckets) + 1, {
            "state_layout": layout, "bucket": dispatch_buckets[0], "class": "many", "min_chains": 64,
            "index": len(variants) - 1, "split": 1, "split_by": "tune"})
    lib_json = {"abi_version": abi.ABI_VERSION, "spec": "c", "arch": "sm_90a", "family": "chunk",
                "variants": [v["id"] for v in variants], "dispatch": dispatch}
    text = render_library("c", "sm_90a", variants, dispatch, json.dumps(canonical_json(lib_json)), ALL_FEATURES)
    tc = find_toolchain()
    src = tmp_path / "library.cpp"
    src.write_text(text)
    so = tmp_path / "libc.so"
    argv = [tc.cxx, "-std=c++17", "-O2", "-fPIC", "-shared", f"-I{INCLUDE_DIR}", f"-I{tc.include_dir()}", str(src),
            "-o", str(so), "-ldl"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{' '.join(argv)}:\n{out.stderr[-3000:]}"
    return so, variants


@pytest.mark.compile  # real nvcc / g++
def test_chunk_library_rows_dispatch_and_workspace(tmp_path) -> None:
    import ctypes

    from kda2.codegen.render import chunk_symbols
    from kda2.plan.smem import combine_shape
    from kda2.runtime import abi

    so, variants = chunk_library(tmp_path)
    text = (tmp_path / "library.cpp").read_text()
    assert "constexpr bool kChunk = true;" in text and "kKeyDim = 128, kValueDim = 128;" in text
    for v in variants:
        prep, state, fold, combine = chunk_symbols(v["id"])
        assert f'{{"{prep}", "{state}", "{fold}", "{combine}"}}, 4,\n     kda2_cubin_{v["id"]}' in text
        p = v["plan"]
        # fold runs the state kernel's code (same block, same shared memory); combine: static shared memory
        assert (f"{{ {p['prep_threads']}, {p['state_threads']}, {p['state_threads']}, {combine_shape(128)['threads']} }},\n"
                f"     {{ {p['prep_smem_bytes']}, {p['state_smem_bytes']}, {p['state_smem_bytes']}, 0 }}") in text
    assert "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES" in text and '"cuFuncSetAttribute"' in text

    lib = ctypes.CDLL(str(so))
    for name, (restype, argtypes) in abi.FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    # each row carries its split knob (the most segments the library's own choice takes for its calls), which
    # kda2_fwd hands to the launch; a launch by index takes the library-wide bound
    dispatch = json.loads(lib.kda2_library_json())["dispatch"]
    routes = re.findall(r"^    \{ (\d), (\d+), (\d+), (\d+), (\d+), (-?\d+) \},", text, re.M)
    assert routes == [(str(int(d["state_layout"] == "v_first")), str(d["bucket"]), str(d["min_chains"]),
                       str(d["index"]), str(d["split"]), "-1") for d in dispatch]
    assert {r[4] for r in routes} == {"1", "2", "3"}
    fwd = text[text.index('extern "C" int kda2_fwd('):]
    assert "launch_variant(index, &a, stream, kRoutes[row].max_split, kRoutes[row].fallback)" in fwd
    assert "launch_variant(index, args, stream, kSplitMaxSegments)" in text[text.index('extern "C" int kda2_launch('):]
    assert lib.kda2_abi_version() == abi.ABI_VERSION
    assert json.loads(lib.kda2_library_json())["family"] == "chunk"
    assert [lib.kda2_select(vf, t, 1) for vf in (0, 1) for t in (1, 2048, 2049, 65536, 1 << 20)] == [
        0, 0, 1, 1, 1, 2, 2, 3, 3, 3]  # above the largest bucket: the last bucket's variant
    # batch classes: from 64 chains on, bucket 2048 calls its "many" row (the 65536 tiles); 65536 has one class
    assert [lib.kda2_select(0, 2048, c) for c in (0, 63, 64, 10 ** 6)] == [0, 0, 1, 1]
    assert [lib.kda2_select(1, 100, c) for c in (5, 64)] == [2, 3] and lib.kda2_select(1, 3000, 10 ** 6) == 3
    assert [lib.kda2_route(vf, 2048, c) for vf in (0, 1) for c in (1, 64)] == [0, 1, 3, 4]
    assert lib.kda2_route(0, 1 << 20, 64) == 2 and lib.kda2_route(1, 1 << 20, 0) == 5
    a = abi.KDA2RecurrentArgs(N=3, T=1000, H=16, HV=32, gate_mode=abi.GATE_SOFTPLUS)
    addr = ctypes.addressof(a)
    for N, T, HV, varlen in ((3, 1000, 32, False), (1, 5000, 64, True), (8, 64, 8, False), (1, 0, 4, True)):
        a.N, a.T, a.HV, a.cu_seqlens = N, T, HV, 0x100 if varlen else None
        want = abi.chunk_workspace_bytes(N, T, HV, 128, 128, varlen)
        total = T if varlen else N * T
        ids = total // 64 + N + 1
        # slots, then the ready region (16-byte head, an int32 flag per slot, 16-byte aligned)
        assert want == (ids * HV * (3 * 64 * 128 * 2 + 128 * 64 * 2 + 64 * 64 * 2 + 128 * 4)
                        + 16 + -(-ids * HV * 4 // 16) * 16)
        assert lib.kda2_workspace_bytes(addr) == want
    a.N, a.T, a.HV, a.H, a.cu_seqlens = 2, 100, 32, 32, None
    need = lib.kda2_workspace_bytes(addr)
    # the launch checks that come before the driver (no GPU here: the last step reports the missing driver)
    assert lib.kda2_launch(0, addr, None) == abi.ERR_WORKSPACE            # no workspace
    a.workspace, a.workspace_bytes = 0x1000, need - 1
    assert lib.kda2_launch(0, addr, None) == abi.ERR_WORKSPACE            # too small
    a.workspace_bytes = need
    a.state_indices = 0x2000
    assert lib.kda2_launch(0, addr, None) == abi.ERR_FEATURE              # no state pool in chunk kernels
    a.state_indices = None
    a.max_seqlen = 50
    assert lib.kda2_launch(0, addr, None) == abi.ERR_SHAPE                # dense max_seqlen below T
    a.max_seqlen, a.cu_seqlens = 0, 0x100
    assert lib.kda2_launch(0, addr, None) == abi.ERR_SHAPE                # varlen needs max_seqlen
    a.cu_seqlens, a.T = None, 0
    assert lib.kda2_launch(0, addr, None) == abi.OK                       # no tokens: nothing to launch
    a.T, a.N = 100, 0
    assert lib.kda2_launch(0, addr, None) == abi.OK
    a.N = 2
    for rc in (lib.kda2_launch(0, addr, None), lib.kda2_fwd(addr, 100, None)):  # every check passed
        assert rc in (abi.ERR_DRIVER, abi.ERR_NO_CONTEXT) or rc > 0  # (no driver / context / real cubin here)
    a.state_v_first = 1
    assert lib.kda2_launch(0, addr, None) == abi.ERR_LAYOUT


def test_library_refuses_mixed_families() -> None:
    cfgs = [SMEM_CFG, CHUNK_CFG]
    variants = [{"id": variant_id(c), "config": c, "cubin_path": "x", "plan": {}} for c in cfgs]
    with pytest.raises(ValueError, match="one family"):
        render_library("t", "sm_90a", variants, [], '"{}"', ALL_FEATURES)


# ---- chunk kernels: the render context and the owner's template ------------------------------------

# Every name render_variant passes for a chunk variant (StrictUndefined: a missing one fails the render).
STUB_CHUNK = """// {{ name }} {{ vid }} {{ ns }}
#include "kda2/abi.h"
{%- for key in ["lds_kv", "lds_u", "lds_g", "lds_t", "lds_o", "lds_y", "lds_x", "prep_threads", "state_threads",
                "prep_smem_bytes", "state_smem_bytes"] %}
constexpr int {{ key|upper }} = {{ plan[key] }};
{%- endfor %}
constexpr int BLOCK_V = {{ config.block_v }}, STAGES = {{ config.stages }}, BT = {{ config.chunk }};
{%- for prep_symbol, state_symbol, fold_symbol, elem in entries %}
extern "C" __global__ void {{ prep_symbol }}(const KDA2RecurrentArgs a) {
  extern __shared__ char smem[];
  if (a.N < 0) smem[threadIdx.x] = (char)kda2_chunk_ids(&a);
}
extern "C" __global__ void {{ state_symbol }}(const KDA2RecurrentArgs a) {
  if (a.workspace_bytes < kda2_chunk_slot_bytes(a.H, a.HV)) ((char*)a.workspace)[threadIdx.x] = 0;
}
{%- endfor %}
"""


@pytest.fixture
def stub_templates(tmp_path, monkeypatch):
    """Point render's Jinja environment at a temp template dir (as `_env()` does with TEMPLATE_DIR) with
    `chunk_stub.cu.j2` in place of chunk.cu.j2 (the real kernels have their own owner); yields the dir."""
    from kda2.codegen import render

    tdir = tmp_path / "templates"
    tdir.mkdir()
    (tdir / "chunk_stub.cu.j2").write_text(STUB_CHUNK)
    monkeypatch.setattr(render, "TEMPLATE_DIR", tdir)
    monkeypatch.setitem(render.FAMILY_TEMPLATES, "chunk", ("chunk_stub.cu.j2",))
    render._env.cache_clear()
    yield tdir
    render._env.cache_clear()  # (monkeypatch restores TEMPLATE_DIR next; the next _env() reads it)


@pytest.mark.compile  # real nvcc / g++
def test_chunk_render_context(stub_templates, tmp_path) -> None:
    from kda2.codegen.render import chunk_symbols, kernel_symbols

    plan = plan_variant(CHUNK_CFG, 232448)
    vid = variant_id(CHUNK_CFG)
    text = render_variant(CHUNK_CFG, plan)
    prep, state, fold, combine = chunk_symbols(vid)
    assert (prep, state, fold, combine) == (f"kda2_chunk_prep_{vid}", f"kda2_chunk_state_{vid}",
                                            f"kda2_chunk_fold_{vid}", f"kda2_chunk_combine_{vid}") == kernel_symbols(CHUNK_CFG)
    # the name says what the kernel is and nothing of the buckets it serves
    name = variant_name(CHUNK_CFG)
    assert name == f"kda2_chunk_sm_90a_k128v128_vf_c64bv32s2_{vid}"
    assert text.splitlines()[0] == f"// {name} {vid} kda2_{vid}"
    expect = {"LDS_KV": 136, "LDS_U": 72, "LDS_G": 136, "LDS_T": 72, "LDS_O": 24, "LDS_Y": 8, "LDS_X": 8,
              "PREP_THREADS": 256, "STATE_THREADS": 128, "PREP_SMEM_BYTES": 105728, "STATE_SMEM_BYTES": 155680}
    for key, value in expect.items():
        assert f"constexpr int {key} = {value};" in text
    assert "BLOCK_V = 32, STAGES = 2, BT = 64;" in text
    assert f"void {prep}(" in text and f"void {state}(" in text
    # the ABI's chunk helpers compile in device code
    cu = tmp_path / "stub.cu"
    cu.write_text(text)
    res = parse_ptxas(compile_cubin(cu, "sm_90a"))
    assert sorted(res) == sorted([prep, state])
    # recurrent is unchanged: one kernel named kda2_recurrent_<id>
    assert kernel_symbols(SMEM_CFG) == (kernel_symbol(variant_id(SMEM_CFG)),) == (f"kda2_recurrent_{variant_id(SMEM_CFG)}",)


@pytest.mark.parametrize("family", ["recurrent", "chunk"])
@pytest.mark.parametrize("absent", ["reasons", "spec", "spec_name", "version", "kda2_version", "bucket"])
def test_render_context_leaves_out_what_the_code_does_not_depend_on(stub_templates, monkeypatch, family,
                                                                     absent) -> None:
    """Reasons, spec and kda2 version live in the manifest and why.json, the bucket in the dispatch table;
    a .cu that could name them would differ between builds whose code is the same."""
    import jinja2

    from kda2.codegen import render

    (stub_templates / "probe.cu.j2").write_text("{{ %s }}" % absent)
    monkeypatch.setitem(render.FAMILY_TEMPLATES, family, ("probe.cu.j2",))
    cfg = CHUNK_CFG if family == "chunk" else SMEM_CFG
    plan = plan_variant(cfg, 232448 if family == "chunk" else BUDGET)
    with pytest.raises(jinja2.UndefinedError, match=absent):
        render_variant(cfg, plan)


@pytest.mark.compile  # real nvcc / g++
def test_chunk_real_template_renders_and_compiles(tmp_path) -> None:
    """The owner's chunk.cu.j2 renders from the plan, defines both entries and compiles cleanly."""
    from kda2.codegen.render import chunk_symbols

    cfg = dict(CHUNK_CFG, block_v=64)
    plan = plan_variant(cfg, 232448)
    text = render_variant(cfg, plan)
    symbols = chunk_symbols(variant_id(cfg))
    for needle in (*symbols, str(plan["lds_kv"]), str(plan["state_smem_bytes"]), str(plan["prep_smem_bytes"])):
        assert needle in text, needle
    assert '#include "kda2/chunk.cuh"' in text.splitlines()
    # only the code's inputs: no kda2 version or bucket, and no Jinja left over
    # (reasons and spec: test_planned_kernels_with_different_ids_render_different_code)
    assert __import__("kda2").__version__ not in text and not re.search(r"bucket|_t\d+_", text, re.I)
    assert "{{" not in text and "{%" not in text
    # the config does change it, beyond the id
    other = dict(cfg, stages=1)
    assert without_identity(render_variant(other, plan), other) != without_identity(text, cfg)
    cu = tmp_path / "chunk.cu"
    cu.write_text(text)
    log = compile_cubin(cu, "sm_90a")
    res = parse_ptxas(log)
    assert set(symbols) <= set(res), res
    assert "warning" not in log, log  # e.g. #177, a constant declared but never read


@pytest.mark.compile  # real nvcc / g++
def test_chunk_headers_compile_on_their_own(tmp_path) -> None:
    """The kernels' headers are plain CUDA C++, not Jinja: nvcc compiles each as it is."""
    headers = sorted(INCLUDE_DIR.glob("kda2/*.cuh"))
    assert {h.name for h in headers} >= {"recurrent.cuh", "chunk.cuh", "mma.cuh"}
    for header_path in headers:
        argv = [nvcc(), "-std=c++17", "-x", "cu", f"-I{INCLUDE_DIR}", "-arch=sm_90a", "-c",
                str(header_path), "-o", str(tmp_path / f"{header_path.stem}.o")]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"{' '.join(argv)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


def test_chunk_fp16_entries_and_entry_table() -> None:
    """Issue 13, chunk family: a variant built for bf16 and fp16 has a prep and a state entry per input dtype (the
    bf16 names unchanged, fp16 with the `f16_` infix), a fold per dtype too (it reads the workspace, whose 16-bit
    tiles are in the input dtype) and one combine; the library's entry table points each dtype's slot at its prep
    kernel (its state and fold kernels next) and the launch rows follow the kernel order."""
    from kda2.codegen.render import _chunk_launch, _entry_table, entry_slot, kernel_symbols

    cfg = dict(CHUNK_CFG, dtypes=["bf16", "fp16"])
    vid = variant_id(cfg)
    syms = kernel_symbols(cfg)
    assert syms == (f"kda2_chunk_prep_{vid}", f"kda2_chunk_state_{vid}", f"kda2_chunk_fold_{vid}",
                    f"kda2_chunk_combine_{vid}", f"kda2_chunk_prep_f16_{vid}", f"kda2_chunk_state_f16_{vid}",
                    f"kda2_chunk_fold_f16_{vid}")
    table = _entry_table(cfg)
    assert table[entry_slot("bf16", "fp32")] == 0 and table[entry_slot("fp16", "fp32")] == 4
    assert table[entry_slot("bf16", "bf16")] == table[entry_slot("fp16", "bf16")] == -1  # chunk states are fp32
    assert _entry_table(dict(CHUNK_CFG, dtypes=["fp16"]))[entry_slot("fp16", "fp32")] == 0
    assert _entry_table(CHUNK_CFG) == [0, -1, -1, -1]  # configs without dtypes: bf16 (manifests before)
    plan = plan_variant(cfg, 232448)
    threads, smem = _chunk_launch({"config": cfg, "plan": plan})
    p, s = (plan["prep_threads"], plan["prep_smem_bytes"]), (plan["state_threads"], plan["state_smem_bytes"])
    assert list(zip(threads, smem)) == [p, s, s, (2 * cfg["k"], 0), p, s, s]  # combine: two threads per key row
    text = render_variant(cfg, plan)
    # sm_90a at K = 128: the plan's strides fit a tensor copy's box row, so each prep entry takes the tiles' maps
    assert plan["prep_tma"] and "static constexpr bool PREP_TMA = true;" in text
    maps = ", const __grid_constant__ kda2::chunk::PrepMaps maps"
    for sym, call, extra, arg in ((syms[0], "prep<__nv_bfloat16>", maps, "&maps"),
                                  (syms[1], "state<__nv_bfloat16, kda2::chunk::Pass::EMIT>", "", None),
                                  (syms[4], "prep<__half>", maps, "&maps"),
                                  (syms[5], "state<__half, kda2::chunk::Pass::EMIT>", "", None),
                                  (syms[2], "state<__nv_bfloat16, kda2::chunk::Pass::FOLD>", "", None),
                                  (syms[6], "state<__half, kda2::chunk::Pass::FOLD>", "", None)):
        args = f"a, {arg}" if arg else "a"
        assert re.search(rf"{sym}\(const KDA2RecurrentArgs a{re.escape(extra)}\) {{\n  \S+::Chunk::"
                         rf"{re.escape(call)}\({re.escape(args)}\);", text), sym
    # sm_80 (cp.async) and K = 256 (a 264-element row is more than a box row): the prep copies by cp.async
    for other in (dict(cfg, arch="sm_80"), dict(cfg, k=256, v=256, block_v=16, stages=1)):
        p_other = plan_variant(other, 232448)
        assert not p_other["prep_tma"] and "PrepMaps" not in render_variant(other, p_other)
        assert "prep<__nv_bfloat16>(a, nullptr);" in render_variant(other, p_other)


def test_chunk_bfs_variant_renders_and_compiles_for_its_arch() -> None:
    """prep_wu bfs: the config struct says so, the variant is built for its arch's own features (no LTO link: its
    prep issues wgmma) and its SASS must hold HGMMA; the levels variant's struct says false."""
    from kda2.compile.nvcc import uses_arch_features
    from kda2.compile.sass import expected_for

    bfs = dict(CHUNK_CFG, prep_wu="bfs")
    assert "static constexpr bool PREP_BFS = true;" in render_variant(bfs, plan_variant(bfs, 232448))
    assert "static constexpr bool PREP_BFS = false;" in render_variant(CHUNK_CFG, plan_variant(CHUNK_CFG, 232448))
    assert uses_arch_features(bfs) and not uses_arch_features(CHUNK_CFG)
    assert "HGMMA" in expected_for("chunk", "sm_90a", bfs) and "HGMMA" not in expected_for("chunk", "sm_90a", CHUNK_CFG)


def test_chunk_wgmma_variant_renders_and_splits() -> None:
    """A wgmma state variant: its config struct says so (the header dispatches its state and fold entries to
    state_wg), and its library row says it runs the exact split like an mma_sync one; kda2_fwd keeps the redirect of
    a split call to its layout's first variant with a fold for a variant kind without one (splittable)."""
    from kda2.codegen.render import _chunk_launch

    wg = dict(CHUNK_CFG, block_v=64, state_mma="wgmma")
    plan = plan_variant(wg, 232448)
    text = render_variant(wg, plan)
    assert "static constexpr bool STATE_WGMMA = true;" in text
    assert "STATE_WGMMA = false;" in render_variant(CHUNK_CFG, plan_variant(CHUNK_CFG, 232448))
    threads, _ = _chunk_launch({"config": wg, "plan": plan})
    assert threads[1] == 128  # one warpgroup per 64 value columns
    variants, dispatch = [], []
    for cfg in (dict(CHUNK_CFG), wg):
        p = plan_variant(cfg, 232448)
        variants.append({"id": variant_id(cfg), "config": cfg, "cubin_path": "x.cubin", "plan": p})
    dispatch = [{"state_layout": "v_first", "bucket": 2048, "class": "c", "min_chains": 0, "index": 1}]
    lib = render_library("c", "sm_90a", variants, dispatch, '"{}"', ALL_FEATURES)
    rows = re.findall(r'^    \{"([0-9a-f]{12})", \{.*\n.*\n.*\n.*\n.*\n\s+(\d), (\d), (\d), (\d), (\d),\n'
                      r'\s+\{ (\d+), (\d+) \},\n\s+\{ -1, -1, -1, -1 \}\},$', lib, re.M)
    # (intermediate, persistent, splits, state maps: chunk rows take none, prep maps and their box rows LDS_KV, LDS_G)
    kv, g = str(variants[0]["plan"]["lds_kv"]), str(variants[0]["plan"]["lds_g"])
    assert rows == [(variants[0]["id"], "0", "0", "1", "0", "1", kv, g),
                    (variants[1]["id"], "0", "0", "1", "0", "1", kv, g)], lib
    fwd = lib[lib.index('extern "C" int kda2_fwd('):]
    assert "const int index = splittable(kRoutes[row].index, args);" in fwd
    assert "if (a->split > 1 && !kVariants[index].splits) return KDA2_ERR_FEATURE;" in lib


# ---- the resource check's messages (compile/ptxas.py check / advice, compile/actions.py resources_action) -----

def _ptxas_log(registers: int, stores: int = 0, loads: int = 0, stack: int = 0, entry: str = "kda2_recurrent_abc") -> str:
    return (f"ptxas info    : Compiling entry function '{entry}' for 'sm_80'\n"
            f"ptxas info    : Function properties for {entry}\n"
            f"    {stack} bytes stack frame, {stores} bytes spill stores, {loads} bytes spill loads\n"
            f"ptxas info    : Used {registers} registers, used 1 barriers, 34816 bytes smem, 520 bytes cmem[0]\n")


def _resources_action(tmp_path, log: str, kernel: str, allow_spills: bool, max_registers: int, capsys):
    """resources_action as SCons calls it (file nodes are their paths, the limits a Value), its rc and stderr."""
    from kda2.compile.actions import resources_action

    class Value:
        def read(self) -> str:
            return json.dumps({"allow_spills": allow_spills, "kernel": kernel, "max_registers": max_registers})

    (tmp_path / "k.ptxas.log").write_text(log)
    rc = resources_action([str(tmp_path / "k.resources.json")], [str(tmp_path / "k.ptxas.log"), Value()], None)
    return rc, capsys.readouterr().err


def test_register_overrun_asks_for_a_larger_budget_not_a_smaller_one(tmp_path, capsys) -> None:
    """ptxas used 79 registers against budget.max_registers 72: the fix is a budget of at least 79 (lowering it only
    widens the gap), or leaving the config out; nothing about spills, which there are none of."""
    res = parse_ptxas(_ptxas_log(79))
    assert check(res, allow_spills=False, max_registers=72) == [
        "kda2_recurrent_abc needs 79 registers per thread, more than budget.max_registers 72"]
    name = "kda2_recurrent_sm_80_k128v128_kf_vpw16w4_smem_strided_scatter_pf_abc"
    rc, err = _resources_action(tmp_path, _ptxas_log(79), name, False, 72, capsys)
    assert rc == 1 and err.count("\n") == 1 and not (tmp_path / "k.resources.json").exists()
    assert err == (f"kda2: error: {name}: kda2_recurrent_abc needs 79 registers per thread, more than "
                   "budget.max_registers 72. Raise budget.max_registers to at least 79 in the spec; or ask the agents "
                   "for fewer value columns per warp (agents.tile.v_per_warp) so the planner no longer proposes this "
                   "config; or "
                   "add a rule that forbids this config (rules/NNNN-slug.yaml, action: forbid).\n"), err
    assert "Lower" not in err and "allow_spills" not in err
    # within the budget: resources.json written, nothing said
    assert _resources_action(tmp_path, _ptxas_log(72), name, False, 72, capsys) == (0, "")
    assert json.loads((tmp_path / "k.resources.json").read_text())["kda2_recurrent_abc"]["registers"] == 72


def test_spills_name_allow_spills_and_the_other_ways_out(tmp_path, capsys) -> None:
    res = parse_ptxas(_ptxas_log(72, stores=8, loads=8, stack=16))
    assert check(res, allow_spills=False, max_registers=255) == [
        "kda2_recurrent_abc spills (8 B stores, 8 B loads, 16 B stack frame) and budget.allow_spills is false"]
    assert check(res, allow_spills=True, max_registers=255) == []
    # a stack frame without spill stores or loads is local memory, not spills: said as such
    assert check(parse_ptxas(_ptxas_log(72, stack=32)), allow_spills=False, max_registers=255) == [
        "kda2_recurrent_abc has a 32 B stack frame (local memory, no spill stores or loads) and "
        "budget.allow_spills is false"]
    rc, err = _resources_action(tmp_path, _ptxas_log(72, stores=8, loads=8, stack=16, entry="kda2_chunk_state_abc"),
                                "kda2_chunk_sm_90a_k128v128_kf_c64bv64s2_abc", False, 255, capsys)
    assert rc == 1 and err.count("\n") == 1
    assert ("Set budget.allow_spills: true in the spec to accept the local memory; or narrow the agents' knobs "
            "(agents.chunk: block_v, stages, state_mma, prep_wu) (configs that hold fewer registers); or add a rule that "
            "forbids this config") in err, err
    assert "action: flags" in err and "max_registers" not in err.split(". ", 1)[1]
    # both at once: both problems, both remedies
    rc, err = _resources_action(tmp_path, _ptxas_log(80, stores=4, loads=4, stack=8), "kda2_recurrent_x", False, 64,
                                capsys)
    assert rc == 1 and "spills (4 B stores" in err and "needs 80 registers" in err
    assert "Raise budget.max_registers to at least 80" in err and "Set budget.allow_spills: true" in err
