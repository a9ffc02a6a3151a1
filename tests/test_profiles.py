"""Hardware profiles (profiles/*.yaml, kda2.plan.profile) and the agents that read them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kda2.plan.planner import plan_all, plan_spec
from kda2.plan.profile import ProfileError, load_profile, load_profiles, resolve_targets
from kda2.spec.model import load_spec
from kda2.spec.rules import load_rules

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "kernel_specs"
KIMI = SPECS / "kimi_linear_recurrent.yaml"
KIMI_CHUNK = Path(__file__).resolve().parent / "specs" / "two_tiles" / "kimi_linear_chunk.yaml"  # pinned knob lists


@pytest.fixture(scope="module")
def profiles():
    return load_profiles(REPO / "profiles")


def edited(tmp_path: Path, src: Path, *subs: tuple[str, str], name: str | None = None) -> Path:
    text = src.read_text()
    for old, new in subs:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / (name or src.name)
    path.write_text(text)
    return path


# ---- the shipped profiles ------------------------------------------------------------------------

def test_shipped_profiles_are_published_and_one_default_per_arch(profiles) -> None:
    assert set(profiles) >= {"a100", "h100", "h200"}
    assert (profiles["a100"].arch, profiles["h100"].arch, profiles["h200"].arch) == ("sm_80", "sm_90a", "sm_90a")
    for name in ("a100", "h100", "h200"):
        p = profiles[name]
        assert p.source == "published" and p.citation
        assert p.smem_per_block_bytes <= p.smem_per_sm_bytes
    # a measured profile (kda2 calibrate on a GPU) says when and how, and never silently becomes a default
    for p in profiles.values():
        if p.source == "measured":
            assert p.date and p.command.startswith("kda2 calibrate") and not p.default_for_arch
    assert profiles["h200"].default_for_arch and profiles["a100"].default_for_arch
    assert not profiles["h100"].default_for_arch
    # the datasheets: same SM array, different memory
    assert profiles["h100"].sm_count == profiles["h200"].sm_count == 132 and profiles["a100"].sm_count == 108
    assert profiles["h200"].copy_bandwidth_bytes_per_s > profiles["h100"].copy_bandwidth_bytes_per_s


# ---- loading errors: file, field, allowed -----------------------------------------------------------

def write_profile(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


BASE = (REPO / "profiles" / "a100.yaml").read_text()


@pytest.mark.parametrize("sub, want", [
    (("sm_count: 108", "sm_count: many"), ("sm_count", "expected an integer")),
    (("arch: sm_80", "arch: sm_100"), ("arch", "allowed: sm_80, sm_86, sm_89, sm_90, sm_90a", "sm_100")),
    (("source: published", "source: guessed"), ("source", "allowed: published, measured")),
    (("launch_latency_us: 4.0", "launch_latency_us: 0.0"), ("launch_latency_us", "out of range")),
    (("sm_count: 108", "sm_count: 108\nwarp_size: 32"), ("unknown field 'warp_size'", "allowed: name, gpu")),
    (("tensor_flops_per_s: {bf16: 3.12e+14, tf32: 1.56e+14}", "tensor_flops_per_s: {bf16: 3.12e+14}"),
     ("tensor_flops_per_s.tf32", "required field is missing")),
    (("smem_per_block_bytes: 166912", "smem_per_block_bytes: 200000"),
     ("smem_per_block_bytes", "larger than smem_per_sm_bytes", "<= 167936")),
])
def test_profile_errors_name_file_field_and_allowed(tmp_path, sub, want) -> None:
    assert sub[0] in BASE
    path = write_profile(tmp_path, "a100", BASE.replace(sub[0], sub[1]))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg, msg
    for part in want:
        assert part in msg, (part, msg)


def test_measured_profile_needs_date_and_command_and_name_matches_file(tmp_path) -> None:
    text = re.sub(r"source: published", "source: measured", BASE)
    with pytest.raises(ProfileError, match=r"date: required when source is 'measured'"):
        load_profile(write_profile(tmp_path, "a100", text))
    with pytest.raises(ProfileError, match=r"name: must equal the file name; allowed: 'other'"):
        load_profile(write_profile(tmp_path, "other", BASE))


def test_two_defaults_for_one_arch_is_an_error(tmp_path) -> None:
    write_profile(tmp_path, "a100", BASE)
    write_profile(tmp_path, "a100b", BASE.replace("name: a100", "name: a100b"))
    with pytest.raises(ProfileError, match="already has a default profile"):
        load_profiles(tmp_path)


def test_spec_targets_resolve_and_errors(tmp_path, profiles) -> None:
    kimi = load_spec(KIMI)
    assert {a: p.name for a, p in resolve_targets(kimi, profiles).items()} == {"sm_90a": "h200", "sm_80": "a100"}
    # no targets: each arch's default profile (backward compatible)
    plain = load_spec(edited(tmp_path, KIMI, ("targets: [h200, a100]", "")))
    assert plain.targets is None
    assert {a: p.name for a, p in resolve_targets(plain, profiles).items()} == {"sm_90a": "h200", "sm_80": "a100"}
    for bad, want in ((["h200", "nope"], "unknown profile 'nope'; allowed: a100, h100, h200"),
                      (["h200", "h100"], "h200 and h100 are both sm_90a"),
                      (["h200"], "targets: h200 is sm_90a but archs is [sm_90a, sm_80]; allowed: one target per "
                                 "arch of archs (archs: [sm_90a] for these targets)")):
        spec = load_spec(edited(tmp_path, KIMI, ("targets: [h200, a100]", f"targets: [{', '.join(bad)}]")))
        with pytest.raises(ProfileError, match=re.escape(want)):
            resolve_targets(spec, profiles)
    sm86 = load_spec(edited(tmp_path, KIMI, ("targets: [h200, a100]", ""), ("archs: [sm_90a, sm_80]", "archs: [sm_86]")))
    with pytest.raises(ProfileError, match=r"archs: no hardware profile is sm_86, so it cannot be planned; allowed: "
                                           r"an arch with a profile \(sm_80, sm_90a\), or write profiles/<gpu>.yaml"):
        resolve_targets(sm86, profiles)


# ---- agents read the profile ------------------------------------------------------------------------

def test_every_agent_decision_on_hardware_cites_the_profile(profiles) -> None:
    rules = load_rules(REPO / "rules")
    for spec_path, agents in ((KIMI, ("budget",)), (KIMI_CHUNK, ("tile", "budget"))):
        spec = load_spec(spec_path)
        for arch, hw in resolve_targets(spec, profiles).items():
            for v in plan_spec(spec, arch, rules, profile=hw).variants:
                why = dict(v.reasons)
                for agent in agents:
                    assert f"profile {hw.name} ({hw.source})" in why[agent], (agent, why[agent])


def test_a_profile_edit_changes_the_plan(tmp_path, profiles) -> None:
    """The chunk budget agent's limit is the profile's smem per block: shrink it and block_v 64 goes."""
    spec, rules = load_spec(KIMI_CHUNK), load_rules(REPO / "rules")
    before = {v.config["block_v"] for v in plan_spec(spec, "sm_90a", rules, profile=profiles["h200"]).variants}
    small = profiles["h200"].model_copy(update={"smem_per_block_bytes": 180000})
    after = plan_spec(spec, "sm_90a", rules, profile=small)
    assert before == {32, 64} and {v.config["block_v"] for v in after.variants} == {32}
    assert all("smem_per_block_bytes=180000" in dict(v.reasons)["budget"] for v in after.variants)


def test_changing_the_target_profile_changes_the_plan(tmp_path, profiles) -> None:
    """Same arch, another GPU: the chunk tile agent ranks the long bucket by how its chains fill the SMs.
    A 100-SM sm_90a part cannot hold block_v 32's 128 chains (N=1, H=32) in one wave: wide slices first."""
    d = tmp_path / "profiles"
    d.mkdir()
    for name in ("a100", "h200"):
        (d / f"{name}.yaml").write_text((REPO / "profiles" / f"{name}.yaml").read_text())
    (d / "h100pcie.yaml").write_text((REPO / "profiles" / "h100.yaml").read_text()
                                     .replace("name: h100", "name: h100pcie").replace("sm_count: 132", "sm_count: 100"))
    spec = load_spec(edited(tmp_path, KIMI_CHUNK, ("targets: [h200, a100]", "targets: [h100pcie, a100]")))
    rules = load_rules(REPO / "rules")
    ref = load_spec(KIMI_CHUNK)

    def long_row(plan, layout="k_first"):
        row = next(r for r in plan.dispatch if r["bucket"] == 65536 and r["state_layout"] == layout)
        return [next(v for v in plan.variants if v.id == i).config["block_v"] for i in row["candidates"]]

    h200 = next(p for p in plan_all([ref], rules, None, load_profiles(d))[0] if p.arch == "sm_90a")
    other = next(p for p in plan_all([spec], rules, None, load_profiles(d))[0] if p.arch == "sm_90a")
    assert other.profile.name == "h100pcie" and h200.profile.name == "h200"
    assert long_row(h200) == [32, 64] and long_row(other) == [64, 32]
    assert all("profile h100pcie (published): sm_count=100" in dict(v.reasons)["tile"] for v in other.variants)


def test_sm80_and_sm90a_plans_differ_beyond_flags(profiles) -> None:
    """kimi_linear_chunk: the A100's 163 KB per block drops block_v 64 (its 2-stage state kernel needs
    195616 B), and the long bucket's order follows the 108 vs 132 SMs; the recurrent plans cite each GPU's
    SM count and bandwidth in their budget reasons."""
    rules = load_rules(REPO / "rules")
    chunk = {p.arch: p for p in plan_all([load_spec(KIMI_CHUNK)], rules, None, profiles)[0]}
    assert {v.config["block_v"] for v in chunk["sm_90a"].variants} == {32, 64}
    assert {v.config["block_v"] for v in chunk["sm_80"].variants} == {32}
    rec = {p.arch: p for p in plan_all([load_spec(KIMI)], rules, None, profiles)[0]}
    why90 = dict(rec["sm_90a"].variants[0].reasons)["budget"]
    why80 = dict(rec["sm_80"].variants[0].reasons)["budget"]
    assert "on 132 SMs" in why90 and "on 108 SMs" in why80
    assert "copy_bandwidth_bytes_per_s=4.8e+12" in why90 and "copy_bandwidth_bytes_per_s=2.04e+12" in why80


def test_disabling_a_knob_in_the_spec_changes_the_plan(tmp_path, profiles) -> None:
    """A spec edit that leaves the tile agent one width (block_v: [32]) removes the block_v 64 kernels."""
    spec = load_spec(edited(tmp_path, KIMI_CHUNK, ("block_v: [32, 64]", "block_v: [32]")))
    plan = plan_spec(spec, "sm_90a", load_rules(REPO / "rules"), profile=profiles["h200"])
    assert {v.config["block_v"] for v in plan.variants} == {32}


def test_plan_cache_key_holds_profiles_and_tuning_records(tmp_path) -> None:
    from kda2.plan.cache import _inputs_digest

    prof, tun = tmp_path / "profiles", tmp_path / "tuning"
    prof.mkdir(), tun.mkdir()
    (prof / "a.yaml").write_text("x")
    key = _inputs_digest(str(SPECS), str(REPO / "rules"), None, str(prof), str(tun))
    (tun / "kimi_linear_recurrent.h200.json").write_text("{}")
    key2 = _inputs_digest(str(SPECS), str(REPO / "rules"), None, str(prof), str(tun))
    (tun / "kimi_linear_recurrent.h200.partial.json").write_text("{}")  # an interrupted tune routes nothing
    key3 = _inputs_digest(str(SPECS), str(REPO / "rules"), None, str(prof), str(tun))
    (prof / "a.yaml").write_text("y")
    key4 = _inputs_digest(str(SPECS), str(REPO / "rules"), None, str(prof), str(tun))
    assert key != key2 and key2 == key3 and key3 != key4


def test_recurrent_warps_follow_the_waves_on_this_gpu(tmp_path, profiles) -> None:
    """Serial-chain buckets order the spec's warps options by the waves their chains need on the profile's
    SMs. With 32 blocks per SM the waves tie (registers scale with warps) and the spec's order stays; a GPU
    that holds only 4 CTAs per SM makes 2-warp CTAs need twice the waves: they go last."""
    spec = load_spec(edited(tmp_path, KIMI, ("warps: [4, 8]", "warps: [2, 4, 8]"), ("max_candidates: 8", "max_candidates: 64")))

    def order(hw):
        plan = plan_spec(spec, hw.arch, [], profile=hw)
        by = {v.id: v.config for v in plan.variants}
        row = next(r for r in plan.dispatch if r["bucket"] == 1024 and r["state_layout"] == "v_first")
        return [by[i]["warps"] for i in row["candidates"] if by[i]["v_per_warp"] == 8 and by[i]["reduce"] == "scatter"]

    assert order(profiles["h200"]) == [2, 4, 8]
    few_blocks = profiles["h200"].model_copy(update={"blocks_per_sm_max": 4})
    assert order(few_blocks) == [4, 8, 2]
    plan = plan_spec(spec, "sm_90a", [], profile=few_blocks)
    assert all("wave(s) of" in dict(v.reasons)["tile"] and "sm_count=132" in dict(v.reasons)["tile"]
               for v in plan.variants)


@pytest.mark.compile  # real NVRTC (or nvcc)
def test_calibration_kernels_compile_for_every_arch() -> None:
    """kda2 calibrate compiles its kernels on the GPU host; a bad compile option fails here first (it did: -O3
    is not an NVRTC option)."""
    from kda2.tools.calibrate import _compile

    for arch in ("sm_80", "sm_90a"):
        cubin = _compile(arch)
        assert cubin[:4] == b"\x7fELF", arch


def test_occupancy_agent_raises_launch_bounds_in_decode_buckets_only(tmp_path, profiles) -> None:
    """`occupancy: [compiler, raised]` adds, for decode buckets only, each shape again with launch bounds asking
    for the most CTAs per SM whose register cap (the profile's register file) holds the register floor + headroom;
    the spec edit back to `[compiler]` removes them, and a smaller register file asks for fewer CTAs."""
    from kda2.plan.agents.recurrent import OccupancyAgent
    from kda2.plan.model import DECODE_MAX_T, register_cap, registers_floor

    spec = load_spec(KIMI)
    hw = profiles["h200"]
    plan = plan_spec(spec, "sm_90a", [], profile=hw)
    raised = {v.id: v.config for v in plan.variants if v.config.get("min_ctas", 1) > 1}
    assert raised
    for d in plan.dispatch:
        if any(i in raised for i in d["candidates"]):
            assert d["bucket"] <= DECODE_MAX_T, d
    for cfg in raised.values():
        cap = register_cap(cfg, hw)
        assert registers_floor(cfg) + OccupancyAgent.HEADROOM <= cap < hw.registers_per_thread_max
        assert cap == hw.registers_per_sm // (32 * cfg["warps"] * cfg["min_ctas"]) // 8 * 8
    off = load_spec(edited(tmp_path, KIMI, ("occupancy: [compiler, raised]", "occupancy: [compiler]")))
    assert not any(v.config.get("min_ctas", 1) > 1 for v in plan_spec(off, "sm_90a", [], profile=hw).variants)
    small = hw.model_copy(update={"registers_per_sm": hw.registers_per_sm // 2})
    by_shape = lambda p: {(c["state_layout"], c["k_map"], c["v_per_warp"], c.get("lane_cols", 1), c["warps"],
                           c["intermediate"]): c.get("min_ctas", 1) for c in (v.config for v in p.variants)
                          if c.get("min_ctas", 1) > 1}
    big, half = by_shape(plan), by_shape(plan_spec(spec, "sm_90a", [], profile=small))
    assert half and any(k in big for k in half) and all(half[k] < big[k] for k in half if k in big)


def test_schedule_agent_adds_persistent_candidates_to_the_decode_buckets_only(tmp_path, profiles) -> None:
    """`schedule: [grid, persistent]` adds persistent candidates to the decode buckets (T = 1 and the multi-token
    one, both beside preload twins of their own) and not to prefill, after each row's grid candidates and
    without removing any (the budget ranks them apart); they are direct-staged with cp.async-sized pieces (a bf16
    piece of 4 bytes or more), their smem estimate holds the CTA's fp32 tile, their reasons cite the profile. With
    `schedule: [grid]` the plan is the same minus them; the untuned route of every row stays a grid kernel."""
    from kda2.plan.agents.recurrent import copy_run
    from kda2.plan.model import smem_budget, smem_estimate

    hw = profiles["h200"]
    spec = load_spec(KIMI)
    plan = plan_spec(spec, "sm_90a", [], profile=hw)
    off = plan_spec(load_spec(edited(tmp_path, KIMI, ("schedule: [grid, persistent]", "schedule: [grid]"))), "sm_90a",
                    [], profile=hw)
    by_id = {v.id: v for v in plan.variants}
    pers = {i for i, v in by_id.items() if v.config.get("persistent")}
    assert pers and not any(v.config.get("persistent") for v in off.variants)
    assert {v.id for v in off.variants} <= set(by_id)  # nothing lost, grid ids unchanged
    for d, d_off in zip(plan.dispatch, off.dispatch):
        assert (d["state_layout"], d["bucket"], d["class"]) == (d_off["state_layout"], d_off["bucket"], d_off["class"])
        grid = [i for i in d["candidates"] if i not in pers]
        assert grid == d_off["candidates"], d  # the grid candidates, in their order, as without persistent ones
        assert d["candidates"][:len(grid)] == grid  # ... and first: the untuned route is the first grid candidate
        mine = [i for i in d["candidates"] if i in pers]
        assert bool(mine) == (d["bucket"] <= 8), d
        assert len([i for i in mine if not by_id[i].config.get("preload")]) <= spec.budget.max_candidates
        assert len([i for i in mine if by_id[i].config.get("preload")]) <= spec.budget.max_candidates
        assert any(by_id[i].config.get("preload") for i in mine) == (d["bucket"] <= 8), d  # T = 1 has twins too
    for i in pers:
        v = by_id[i]
        c = v.config
        assert c["staging"] == "direct" and copy_run(c) >= 2
        grid_twin = {k: x for k, x in c.items() if k != "persistent"}
        tile_bytes = c["k"] * c["warps"] * c["v_per_warp"] * 4
        assert smem_estimate(c) == smem_estimate(grid_twin) + tile_bytes <= smem_budget(c, spec.budget.max_smem_bytes,
                                                                                        hw.smem_per_block_bytes)
        (why,) = [w for a, w in v.reasons if a == "schedule"]
        assert "persistent" in why and "sm_count=132" in why and "decode-n64" in why, why
    # a smaller GPU holds fewer CTAs: the reasons say so (the persistent grid is the resident CTA slots)
    small = plan_spec(spec, "sm_90a", [], profile=hw.model_copy(update={"sm_count": 66}))
    assert any("sm_count=66" in w for v in small.variants for a, w in v.reasons if a == "schedule")
