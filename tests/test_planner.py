"""kda2.plan.planner on the real specs and rules: ids, routing, reasons, rule flags, tune locks, the budget."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from kda2.plan.agents.recurrent import latency_vpws
from kda2.plan.planner import PlanError, SpecPlan, plan_all, plan_spec
from kda2.spec.rules import load_rules
from kda2.spec.model import Spec, load_spec, load_specs
from kda2.plan.lock import read_lock, record_path
from kda2.plan.profile import load_profiles, resolve_targets
from kda2.artifact.canonical import canonical_json
from kda2.plan.variant import variant_id
from kda2.plan.model import class_rows, workloads

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "kernel_specs"
KIMI = SPECS / "kimi_linear_recurrent.yaml"
KIMI_CHUNK = Path(__file__).resolve().parent / "specs" / "two_tiles" / "kimi_linear_chunk.yaml"  # pinned knob lists
AGENTS = ("layout", "pipeline", "staging", "tile", "reduce", "preload", "schedule", "occupancy", "budget")
CHUNK_AGENTS = ("layout", "chunk", "tile", "stages", "state_mma", "prep_wu", "budget")


@pytest.fixture(scope="module")
def rules():
    return load_rules(REPO / "rules")


@pytest.fixture(scope="module")
def kimi() -> Spec:
    return load_spec(KIMI)


def groups(plan: SpecPlan) -> dict[tuple[str, int], list[str]]:
    """Candidate kernel ids per dispatch row (layout, bucket), in rank order."""
    return {(d["state_layout"], d["bucket"]): list(d["candidates"]) for d in plan.dispatch}


def budget_groups(plan: SpecPlan) -> dict[tuple[str, int, str], list[str]]:
    """Candidate ids per (layout, bucket, kind): what budget.max_candidates counts (BudgetAgent); kind is "" for
    the per-token grid candidates, "preload" (multi-token decode), "persistent" (decode), "preload persistent",
    "bulk" (decode, bulk-staged; "preload bulk" too), and "latency" after any of them for the T = 1 bucket's
    latency tiles."""
    cfg = {v.id: v.config for v in plan.variants}
    out: dict[tuple[str, int, str], list[str]] = {}
    for (layout, bucket), ids in groups(plan).items():
        for i in ids:
            kind = " ".join(k for k, on in (("preload", cfg[i].get("preload")), ("persistent", cfg[i].get("persistent")),
                                             ("bulk", cfg[i]["staging"] == "bulk"),
                                             ("latency", cfg[i]["v_per_warp"] in latency_vpws(plan.spec, cfg[i]["k_map"],
                                                                                            bucket)))
                            if on)
            out.setdefault((layout, bucket, kind), []).append(i)
    return out


def routes(plan: SpecPlan) -> dict[str, dict[str, Any]]:
    """Dispatch rows by "<layout>:<bucket>:<batch class>"."""
    return {f"{d['state_layout']}:{d['bucket']}:{d['class']}": d for d in plan.dispatch}


def rows_of(plan: SpecPlan, key: str) -> list[dict[str, Any]]:
    """The rows (one per batch class) of "<layout>:<bucket>"."""
    return [d for k, d in routes(plan).items() if k.rsplit(":", 1)[0] == key]


def spec_variant(tmp_path: Path, name: str = "kimi_linear_recurrent", subs: tuple = (), **budget: int) -> Path:
    """The real kimi spec with budget fields replaced (and the text substitutions `subs` made), written to tmp."""
    text = KIMI.read_text()
    for old, new in subs:
        assert old in text, old
        text = text.replace(old, new)
    for key, value in budget.items():
        text, n = re.subn(rf"^(\s+{key}:) \d+$", rf"\1 {value}", text, flags=re.M)
        assert n == 1, key
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


# ---- plan_spec on the real spec ----------------------------------------------------------------

def test_plan_is_deterministic(kimi, rules) -> None:
    for arch in kimi.archs:
        a, b = plan_spec(kimi, arch, rules), plan_spec(load_spec(KIMI), arch, load_rules(REPO / "rules"))
        assert [v.id for v in a.variants] == [v.id for v in b.variants]
        assert a.dispatch == b.dispatch
        assert [v.reasons for v in a.variants] == [v.reasons for v in b.variants]
        ids = [v.id for v in a.variants]
        assert len(set(ids)) == len(ids)
        assert all(v.id == variant_id(v.config) and re.fullmatch(r"[0-9a-f]{12}", v.id) for v in a.variants)
        assert all(v.config["arch"] == arch for v in a.variants)
    assert {v.id for v in plan_spec(kimi, "sm_80", rules).variants}.isdisjoint(
        {v.id for v in plan_spec(kimi, "sm_90a", rules).variants})


def test_every_layout_and_bucket_is_routed_exactly_once(kimi, rules) -> None:
    for arch in kimi.archs:
        plan = plan_spec(kimi, arch, rules)
        keys = [(d["state_layout"], d["bucket"], d["class"], d["min_chains"]) for d in plan.dispatch]
        expected = [(lay, b, w.name, m) for lay in ("k_first", "v_first") if lay in kimi.features.state_layouts
                    for b in kimi.seq_len_buckets for w, m in class_rows("recurrent", b)]
        assert keys == expected  # once each, sorted by (layout, bucket, min_chains)
        g = groups(plan)
        assert sorted(g) == sorted({k[:2] for k in expected})
        for d in plan.dispatch:
            v = plan.variants[d["index"]]
            assert v.id == d["variant"]
            assert v.config["state_layout"] == d["state_layout"] and "bucket" not in v.config
            # what the bucket changes in the code (the all-K decode loop has no prefetch: shared by buckets 1 and 8;
            # a preload kernel's copies replace it)
            assert v.config["prefetch"] == (d["bucket"] > 1 and v.config["k_map"] != "all" and not v.config.get("preload"))
            assert v.config["intermediate"] == (1 < d["bucket"] <= 16)
            assert d["routed_by"] == "rank" and d["variant"] == g[(d["state_layout"], d["bucket"])][0]
        # every kernel is some row's candidate, and kernels are unique: buckets with the same code share one
        assert {i for ids in g.values() for i in ids} == {v.id for v in plan.variants}
        assert len({canonical_json(v.config) for v in plan.variants}) == len(plan.variants)


def test_buckets_with_the_same_code_share_kernels(kimi, rules) -> None:
    """Buckets 64 and 1024 of the kimi spec plan the same prefill kernels; bucket 1 its own decode ones."""
    plan = plan_spec(kimi, "sm_90a", rules)
    g = groups(plan)
    for layout in kimi.features.state_layouts:
        assert g[(layout, 64)] == g[(layout, 1024)]
        assert set(g[(layout, 1)]).isdisjoint(g[(layout, 64)])
    assert len(plan.variants) < sum(len(ids) for ids in g.values())


def test_reasons_from_every_agent(kimi, rules) -> None:
    for arch in kimi.archs:
        for v in plan_spec(kimi, arch, rules).variants:
            agents = [a for a, _ in v.reasons]
            want = [a for a in AGENTS if a != "preload" or v.config.get("preload")]  # it speaks for its twins only
            assert agents[:len(want)] == want, agents
            assert all(why.strip() for _, why in v.reasons), v.reasons


def test_rule_scoped_to_a_profile_changes_only_that_profiles_plan(kimi, tmp_path) -> None:
    """A flags rule matching `profile: a100` reaches the sm_80 (a100) variants only, with its reason."""
    (tmp_path / "0001-a100-flag.yaml").write_text(
        "id: 1\nversion: 1\nmatch: {profile: a100}\naction: flags\nflags: [-Xptxas=-warn-spills]\n"
        "reason: report spills on the A100 path.\nevidence: test\n")
    rules = load_rules(tmp_path)
    sm80 = plan_spec(kimi, "sm_80", rules).variants
    assert sm80
    for v in sm80:
        assert v.flags == ("-Xptxas=-warn-spills",) and v.rules == ("0001@v1",)
        assert any(agent == "rule 0001 v1" for agent, _ in v.reasons)
    for v in plan_spec(kimi, "sm_90a", rules).variants:
        assert v.flags == () and v.rules == ()


# ---- tune locks --------------------------------------------------------------------------------

def write_lock(path: Path, spec: str, routes_: dict[str, str]) -> Path:
    path.write_text(json.dumps({"schema": 1, "spec": spec, "archs": {"sm_90a": {
        "gpu": "x", "date": "d", "routes": {k: {"variant": v, "candidates": {}} for k, v in routes_.items()}}}}))
    return path


def test_lock_routes_to_a_non_first_candidate(kimi, rules, tmp_path) -> None:
    ranked = plan_spec(kimi, "sm_90a", rules)
    group = groups(ranked)[("v_first", 1)]
    assert len(group) > 1
    chosen = group[2 if len(group) > 2 else 1]
    lock = read_lock(write_lock(tmp_path / "x.lock.json", kimi.name, {"v_first:1": chosen}))
    assert lock == {"sm_90a": {"v_first:1": chosen}}
    plans, warnings = plan_all([kimi], rules, locks={kimi.name: lock})
    assert not [w for w in warnings if "tuning record" in w], warnings
    by_arch = {p.arch: p for p in plans}
    tuned = routes(by_arch["sm_90a"])
    # a record of one class per bucket (no "classes") routes every batch class of the row
    assert len(rows_of(by_arch["sm_90a"], "v_first:1")) == len(workloads("recurrent", 1)) > 1
    for d in rows_of(by_arch["sm_90a"], "v_first:1"):
        assert d["variant"] == chosen and d["routed_by"] == "tune"
        assert by_arch["sm_90a"].variants[d["index"]].id == chosen
    for key, d in tuned.items():
        if not key.startswith("v_first:1:"):
            assert d["routed_by"] == "rank" and d == routes(ranked)[key]
    assert all(d["routed_by"] == "rank" for d in by_arch["sm_80"].dispatch)
    # the lock only re-routes: the variants built are the same, in the same order
    assert [v.id for v in by_arch["sm_90a"].variants] == [v.id for v in ranked.variants]


def test_record_routes_each_batch_class_to_its_own_winner(kimi, rules, tmp_path) -> None:
    """A schema-2 record with per-class winners: each class row calls its own kernel, the rest stay ranked."""
    ranked = plan_spec(kimi, "sm_90a", rules)
    group = groups(ranked)[("k_first", 1)]
    names = [w.name for w, _ in class_rows("recurrent", 1)]
    winners = {name: group[i % len(group)] for i, name in enumerate(names)}
    assert len(set(winners.values())) > 1
    path = tmp_path / f"{kimi.name}.h200.json"
    path.write_text(json.dumps({"schema": 2, "spec": kimi.name, "profile": "h200", "arch": "sm_90a", "gpu": "x",
                                "date": "d", "routes": {"k_first:1": {
                                    "variant": winners[workloads("recurrent", 1)[0].name], "candidates": {},
                                    "classes": {n: {"variant": v, "us": 1.0, "shape": {"N": 1, "T": 1, "H": 32}}
                                                for n, v in winners.items()}}}}))
    plans, warnings = plan_all([kimi], rules, locks={kimi.name: read_lock(path)})
    assert not [w for w in warnings if "tuning record" in w], warnings
    plan = next(p for p in plans if p.arch == "sm_90a")
    got = {d["class"]: (d["variant"], d["routed_by"]) for d in rows_of(plan, "k_first:1")}
    assert got == {n: (v, "tune") for n, v in winners.items()}
    assert [v.id for v in plan.variants] == [v.id for v in ranked.variants]  # routing only, same kernels


def test_a_class_the_record_did_not_time_takes_its_rows_winner_and_says_so(kimi, rules, tmp_path) -> None:
    """A batch class newer than the record (model.workloads changed since the tune) routes to its row's winner, with
    one warning naming it; the classes the record timed keep their own winners."""
    ranked = plan_spec(kimi, "sm_90a", rules)
    group = groups(ranked)[("k_first", 1)]
    names = [w.name for w, _ in class_rows("recurrent", 1)]
    first, timed, missing = names[0], names[:-1], names[-1]
    path = tmp_path / f"{kimi.name}.h200.json"
    path.write_text(json.dumps({"schema": 2, "spec": kimi.name, "profile": "h200", "arch": "sm_90a", "gpu": "x",
                                "date": "d", "routes": {"k_first:1": {
                                    "variant": group[-1], "candidates": {},
                                    "classes": {n: {"variant": group[0], "us": 1.0, "shape": {"N": 1, "T": 1, "H": 32}}
                                                for n in timed}}}}))
    plans, warnings = plan_all([kimi], rules, locks={kimi.name: read_lock(path)})
    ws = [w for w in warnings if "did not time" in w]
    assert len(ws) == 1 and f"k_first:1 ({missing})" in ws[0] and first not in ws[0], warnings
    got = {d["class"]: d["variant"] for d in rows_of(next(p for p in plans if p.arch == "sm_90a"), "k_first:1")}
    assert got == {**{n: group[0] for n in timed}, missing: group[-1]}


def test_lock_naming_an_unknown_variant_warns_and_falls_back(kimi, rules, tmp_path) -> None:
    ranked = plan_spec(kimi, "sm_90a", rules)
    lock = read_lock(write_lock(tmp_path / "x.lock.json", kimi.name, {"v_first:1": "0123456789ab"}))
    plans, warnings = plan_all([kimi], rules, locks={kimi.name: lock})
    ws = [w for w in warnings if "tuning record" in w]
    assert len(ws) == 1, ws   # one line, naming every batch class the stale winner would have routed
    w = ws[0]
    assert f"{len(workloads('recurrent', 1))} dispatch row(s)" in w and "\n" not in w
    for klass in [c.name for c, _ in class_rows("recurrent", 1)]:
        assert f"v_first:1 ({klass}): 0123456789ab" in w and "sm_90a" in w and kimi.name in w
    for d in rows_of(next(p for p in plans if p.arch == "sm_90a"), "v_first:1"):
        assert d["routed_by"] == "rank" and d == routes(ranked)[f"v_first:1:{d['class']}"]


@pytest.mark.parametrize("text", ["{not json", "[]", '{"archs": []}', '{"archs": {"sm_90a": []}}',
                                  '{"archs": {"sm_90a": {"routes": {"v_first:1": "abc"}}}}',
                                  '{"schema": 1, "spec": "s"}'])
def test_unreadable_lock_raises_with_path(tmp_path, text: str) -> None:
    path = tmp_path / "broken.lock.json"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        read_lock(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_missing_lock_is_empty(tmp_path) -> None:
    assert read_lock(tmp_path / "none.lock.json") == {}


def test_record_gives_each_class_every_candidates_time(tmp_path) -> None:
    """class_times: per class, what the record timed each candidate at (a twin's fallback is picked from them)."""
    from kda2.plan.lock import class_times, read_baselines

    path = tmp_path / "s.h200.json"
    path.write_text(json.dumps({"schema": 2, "spec": "s", "profile": "h200", "arch": "sm_90a", "gpu": "x", "date": "d",
                                "routes": {"v_first:2048": {
                                    "variant": "aaaaaaaaaaaa", "candidates": {
                                        "aaaaaaaaaaaa": {"us": 5.0, "classes": {"c1": 5.0, "c2": 9.0}},
                                        "bbbbbbbbbbbb": {"us": 6.0, "classes": {"c1": 6.0, "c2": 7.0}},
                                        "cccccccccccc": {"failure": "wrong_result"}},
                                    "classes": {n: {"variant": v, "us": 1.0, "shape": {}}
                                                for n, v in (("c1", "aaaaaaaaaaaa"), ("c2", "bbbbbbbbbbbb"))}}}}))
    got = class_times(read_baselines(path))
    assert got == {"sm_90a": {"v_first:2048:c1": {"aaaaaaaaaaaa": 5.0, "bbbbbbbbbbbb": 6.0},
                              "v_first:2048:c2": {"aaaaaaaaaaaa": 9.0, "bbbbbbbbbbbb": 7.0}}}


#: Batch classes newer than a committed record, which route to their row's winner until `kda2 tune` times them: P4's
#: mixed packing replaced the uniform 6 × 4096 class after the H200 tune of 2026-12-05 (experiments/2026-12-05-h200);
#: no H200 could be had for the re-tune. (At K = 64 and 256 the old class's winner was its row's winner anyway.)
UNTIMED_CLASSES = {spec: ["k_first:8192 (prefill-mixed6h64)", "v_first:8192 (prefill-mixed6h64)"]
                   for spec in ("kimi_linear_chunk", "small_head_chunk", "large_head_chunk")}


def test_committed_tuning_records_name_current_candidates(rules) -> None:
    """tuning/<spec>.<profile>.json (migrated from kernel_specs/*.lock.json, same winners) route every row of
    the plan they cover to a current candidate; specs or targets without a record route by rank."""
    specs = load_specs(SPECS)
    profiles = load_profiles()
    locks: dict[str, dict[str, dict[str, str]]] = {}
    raws = {}
    for s in specs:
        for arch, prof in resolve_targets(s, profiles).items():
            path = record_path(s.name, prof.name, REPO / "tuning")
            if not path.is_file():
                continue
            raw = json.loads(path.read_text())
            assert raw["spec"] == s.name and raw["schema"] == 2 and raw["profile"] == prof.name and raw["arch"] == arch
            locks.setdefault(s.name, {}).update(read_lock(path))
            raws[(s.name, arch)] = raw
    assert ("kimi_linear_recurrent", "sm_90a") in raws and ("small_head_recurrent", "sm_90a") in raws
    # read_lock gives each route's winner as the record names it (the record is re-tuned often: read, not restated)
    for name in ("kimi_linear_recurrent", "small_head_recurrent"):
        routes = raws[(name, "sm_90a")]["routes"]
        assert {k: locks[name]["sm_90a"][k] for k in routes} == {k: x["variant"] for k, x in routes.items()}
    plans, warnings = plan_all(specs, rules, locks=locks)
    untimed = [w for w in warnings if "tuning record" in w and "did not time" in w]
    assert not [w for w in warnings if "tuning record" in w and w not in untimed], warnings
    for spec_name, classes in UNTIMED_CLASSES.items():   # each awaits a re-tune; then it leaves this table
        hits = [w for w in untimed if f"tuning/{spec_name}." in w]
        assert len(hits) == 1 and all(c in hits[0] for c in classes), \
            f"{spec_name}: re-tuned? then drop it from UNTIMED_CLASSES ({hits})"
    assert len(untimed) == len(UNTIMED_CLASSES), untimed
    for plan in plans:
        entry = raws.get((plan.spec.name, plan.arch))
        if entry is None:
            assert all(d["routed_by"] == "rank" for d in plan.dispatch)
            continue
        g, r = groups(plan), {f"{lay}:{b}": rows_of(plan, f"{lay}:{b}") for lay, b in groups(plan)}
        assert set(entry["routes"]) <= set(r), "the record must name only routes of the plan"
        for key in set(r) - set(entry["routes"]):  # a route added since the record (issue 13: the multi-token
            assert all(d["routed_by"] == "rank" for d in r[key]), key  # bucket 8) runs the agents' first choice
        for key, route in entry["routes"].items():
            layout, bucket = key.split(":")
            group = g[(layout, int(bucket))]
            assert route["variant"] in group
            # timed candidates are current ones, or ones the run recorded as failures (rules derived from them
            # may have removed them since)
            fpath = REPO / "tuning" / "failures" / f"{plan.spec.name}.{entry['profile']}.jsonl"
            failed = {json.loads(line)["variant"] for line in (fpath.read_text().splitlines() if fpath.is_file() else [])}
            gone = set(route["candidates"]) - set(group)
            assert gone <= failed, f"{plan.spec.name} {key}: stale timed candidates {sorted(gone - failed)}"
            for d in r[key]:  # each class its own winner when the record has them, else the row's
                want = route.get("classes", {}).get(d["class"], {}).get("variant", route["variant"])
                assert d["variant"] == want and d["routed_by"] == "tune", (key, d["class"])


# ---- budget ------------------------------------------------------------------------------------

@pytest.mark.parametrize("cap", [1, 2, 3])
def test_max_candidates_caps_each_group(kimi, rules, tmp_path, cap: int) -> None:
    """The cap holds per (layout, bucket) and kind: preload candidates, persistent ones and persistent preload ones
    (both decode buckets) are kept beside the per-token grid ones, which come first.
    Without rules: they apply after the agents (a forbidden candidate leaves its slot empty), which is not the cap."""
    both = load_spec(spec_variant(tmp_path, "both", subs=(BOTH_INPUTS,)))  # per-token and preload multi-token kernels
    capped = load_spec(spec_variant(tmp_path, subs=(BOTH_INPUTS,), max_candidates=cap))
    rules = []
    for arch in kimi.archs:
        full, small = budget_groups(plan_spec(both, arch, rules)), budget_groups(plan_spec(capped, arch, rules))
        assert sorted(small) == sorted(full)
        assert {b for _, b, k in full if k == "persistent"} == {1, 8}
        assert {b for _, b, k in full if k == "preload"} == {1, 8} == {b for _, b, k in full if k == "preload persistent"}
        for key, ids in small.items():
            assert len(ids) == min(cap, len(full[key]))
            assert ids == full[key][:cap]  # the best-ranked are kept
        assert any(len(ids) > cap for ids in full.values())
        for (layout, bucket), ids in groups(plan_spec(capped, arch, rules)).items():
            grid = small[layout, bucket, ""]
            kinds = sum(1 for (lay, b, _) in small if (lay, b) == (layout, bucket))
            assert ids[:len(grid)] == grid and len(ids) <= kinds * cap


def test_all_k_latency_widths_are_planned_apart_from_the_usual_tiles(kimi, rules, tmp_path) -> None:
    """A k_map=all width listed in tile.latency_v_per_warp is planned at T = 1 as a latency tile in a budget group of
    its own, whatever the usual group's cap (so the 8-column one-sequence tile reaches the build), and stays among the
    usual shapes in the other buckets; without the listing the T = 1 bucket's cap leaves no 8-column k_map=all grid
    tile (only persistent ones, a group of their own)."""
    def all_k(plan: SpecPlan, bucket: int) -> dict[str, dict[str, Any]]:
        cfg = {v.id: v.config for v in plan.variants}
        return {i: cfg[i] for d in plan.dispatch if d["bucket"] == bucket for i in d["candidates"]
                if cfg[i]["k_map"] == "all"}

    assert 8 in kimi.agents.tile.latency_v_per_warp
    for arch in kimi.archs:
        plan = plan_spec(kimi, arch, rules)
        t1 = all_k(plan, 1)
        narrow = [c for c in t1.values() if c["v_per_warp"] == 8]
        assert narrow and all(c["lane_cols"] == 4 and not c.get("persistent") for c in narrow)
        lat = [i for (lay, b, kind), ids in budget_groups(plan).items() if (lay, b) == ("k_first", 1)
               and kind.endswith("latency") for i in ids]   # the grid tiles' group and the bulk ones' ("bulk latency")
        assert {i for i, c in t1.items() if c["v_per_warp"] == 8} <= set(lat)
        assert any(c["v_per_warp"] == 8 for c in all_k(plan, 8).values())   # usual shape in the multi-token bucket
    text = KIMI.read_text().replace("latency_v_per_warp: [8, 4]", "latency_v_per_warp: [4]")
    assert text != KIMI.read_text()
    (tmp_path / "kimi_linear_recurrent.yaml").write_text(text)
    without = plan_spec(load_spec(tmp_path / "kimi_linear_recurrent.yaml"), "sm_90a", rules)
    assert not any(c["v_per_warp"] == 8 and not c.get("persistent") for c in all_k(without, 1).values())


def test_a_routed_build_keeps_the_routed_variants_and_reindexes_the_rows(kimi, rules, monkeypatch) -> None:
    """kda2.plan.planner.built: "routed" keeps the variants some dispatch row routes to (and, for a state layout whose
    routed chunk variant has no fold, the layout's first that has one: where kda2_fwd sends a split call), library
    order kept; every row's index points at its own variant in the reduced list and its candidates are the kept
    ones; "all" is the plan itself; any other set is refused naming the allowed ones."""
    import kda2.plan.planner as planner
    from kda2.plan.planner import built

    chunk = load_spec(SPECS / "kimi_linear_chunk.yaml")
    for spec in (kimi, chunk):
        for arch in spec.archs:
            plan = plan_spec(spec, arch, rules)
            assert built(plan, "all") is plan
            small = built(plan, "routed")
            keep = {d["variant"] for d in plan.dispatch}   # every chunk variant has a fold: nothing else is kept
            assert [v.id for v in small.variants] == [v.id for v in plan.variants if v.id in keep]
            assert len(small.variants) < len(plan.variants)
            for d, e in zip(plan.dispatch, small.dispatch):
                assert small.variants[e["index"]].id == e["variant"] == d["variant"]
                assert e["candidates"] == [c for c in d["candidates"] if c in keep] and d["variant"] in e["candidates"]
    # A variant kind without a fold (none today): said here of the mma_sync pass, which the untuned plan routes to,
    # so each layout also keeps its first wgmma variant.
    monkeypatch.setattr(planner, "splits", lambda c: c.get("family") == "chunk" and c.get("state_mma") == "wgmma")
    plan = plan_spec(chunk, "sm_90a", rules)
    small = {v.id for v in built(plan, "routed").variants}
    routed = {d["variant"] for d in plan.dispatch}
    for layout in chunk.features.state_layouts:
        first = next(v.id for v in plan.variants
                     if v.config["state_layout"] == layout and v.config.get("state_mma") == "wgmma")
        assert first not in routed and first in small
    assert len(small) == len(routed) + len(chunk.features.state_layouts)
    # a record routing a row to its last candidate: that variant is built
    plan = plan_spec(kimi, "sm_90a", rules)
    row = next(d for d in plan.dispatch if len(d["candidates"]) > 1 and d["class"] == "decode-n1")
    other = row["candidates"][-1]
    small = built(plan_spec(kimi, "sm_90a", rules, {f"{row['state_layout']}:{row['bucket']}:{row['class']}": other}),
                  "routed")
    assert other in {v.id for v in small.variants}
    with pytest.raises(ValueError, match="allowed: routed, all"):
        built(plan, "everything")


def test_budget_reason_names_the_rank(rules, tmp_path) -> None:
    spec = load_spec(spec_variant(tmp_path, max_candidates=2))
    for (_, _, kind), ids_group in budget_groups(plan := plan_spec(spec, "sm_90a", rules)).items():
        for rank, vid in enumerate(ids_group, 1):
            v = next(x for x in plan.variants if x.id == vid)
            (why,) = [w for a, w in v.reasons if a == "budget"]
            assert f"rank {rank} of max 2" in why and "budget 255" in why
            assert ("preload candidates" in why) == kind.startswith("preload")
            assert why.endswith(" (persistent)") == kind.endswith("persistent")
            assert ("(bulk staging" in why) == ("bulk" in kind)


# ---- preload (decode) --------------------------------------------------------------------------

def edited_kimi(tmp_path: Path, *subs: tuple[str, str]) -> Spec:
    text = KIMI.read_text()
    for old, new in subs:
        assert old in text, old
        text = text.replace(old, new)
    (tmp_path / "kimi_linear_recurrent.yaml").write_text(text)
    return load_spec(tmp_path / "kimi_linear_recurrent.yaml")


INPUTS = "inputs: [preload]"   # the Kimi spec's: its multi-token bucket on preload kernels only, T = 1 on both
#: The agents' other mode beside it (the tests of the PreloadAgent plan both).
BOTH_INPUTS = (INPUTS, "inputs: [per_token, preload]")


def test_preload_is_proposed_for_decode_buckets_only(kimi, rules, tmp_path) -> None:
    """Each candidate of a T <= DECODE_MAX_T bucket comes again with every token's inputs preloaded: preload = the
    bucket's T, no prefetch, per-token states in the multi-token buckets; prefill buckets get none. Checked at the kimi
    spec's buckets and at the edges of the range (1, 2, DECODE_MAX_T in; DECODE_MAX_T + 1 out)."""
    from kda2.plan.model import DECODE_MAX_T, preload_bytes, smem_estimate, stage_bytes

    both = edited_kimi(tmp_path, BOTH_INPUTS)
    edges = edited_kimi(tmp_path, BOTH_INPUTS, ("seq_len_buckets: [1, 8, 64, 1024]",
                                                f"seq_len_buckets: [1, 2, {DECODE_MAX_T}, {DECODE_MAX_T + 1}, 64]"))
    for spec in (both, edges):
        for arch in spec.archs:
            plan = plan_spec(spec, arch, rules)
            cfg = {v.id: v for v in plan.variants}
            for (layout, bucket), ids in groups(plan).items():
                pre = [cfg[i] for i in ids if cfg[i].config.get("preload")]
                if not 1 <= bucket <= DECODE_MAX_T:
                    assert not pre, (arch, layout, bucket)
                    continue
                assert pre and not cfg[ids[0]].config.get("preload"), (arch, layout, bucket)  # untuned: per-token
                for v in pre:
                    c = v.config
                    assert c["preload"] == bucket and c["prefetch"] is False and c["intermediate"] == (bucket > 1), c
                    plain = {**c, "preload": 0}  # the prepared table replaces a k_map=all kernel's token stage
                    assert smem_estimate(c) == smem_estimate(plain) + preload_bytes(c) - stage_bytes(plain)
                    why = dict(v.reasons)["preload"]
                    assert f"T<={bucket}" in why and ("prepared once per CTA" if bucket == 1 else "round trip to memory") in why, why
                    pipe = dict(v.reasons).get("pipeline", "")  # a twin's reasons do not claim the prefetch it lacks
                    assert "prefetch token t+1" not in pipe or " — not in " in pipe, pipe
                    assert f"_pl{bucket}_" in v.name


def test_spec_edit_without_preload_leaves_the_per_token_plan(kimi, rules, tmp_path) -> None:
    """`inputs: [per_token]` (the default) removes exactly the preload candidates: every other kernel, candidate
    order and route is the plan with them (the budget counts preload candidates apart, so they push no incumbent
    out); `inputs: [preload]` leaves multi-token buckets only preload candidates, T = 1 both kinds, and the others as
    they were."""
    both = edited_kimi(tmp_path, BOTH_INPUTS)
    off = edited_kimi(tmp_path, (INPUTS, "inputs: [per_token]"))
    for arch in kimi.archs:
        with_pre, without, pre_only = (plan_spec(s, arch, rules) for s in (both, off, kimi))
        assert not any(v.config.get("preload") for v in without.variants)
        assert any(v.config.get("preload") for v in with_pre.variants)
        assert [v.id for v in with_pre.variants if not v.config.get("preload")] == [v.id for v in without.variants]
        assert [d["variant"] for d in with_pre.dispatch] == [d["variant"] for d in without.dispatch]
        b_with, b_without, b_only = budget_groups(with_pre), budget_groups(without), budget_groups(pre_only)
        assert {k: ids for k, ids in b_with.items() if "preload" not in k[2]} == b_without
        for (layout, bucket, kind), ids in b_only.items():
            if bucket == 8:
                assert kind.startswith("preload") and ids == b_with[(layout, bucket, kind)]
            elif bucket == 1:
                assert ids == b_with[(layout, bucket, kind)]
            else:
                assert "preload" not in kind and ids == b_without[(layout, bucket, kind)]


@pytest.mark.parametrize("max_registers,layout,bucket", [(40, "k_first", 1), (80, "v_first", 8)])
def test_register_budget_leaving_no_candidate_is_a_plan_error(rules, tmp_path, max_registers: int,
                                                              layout: str, bucket: int) -> None:
    """40: nothing fits; 80: k_first keeps a k_map=all variant in every bucket, v_first only a T = 1 preload twin (the
    gate and norms prepared once per CTA, not held in every warp) and none at T = 8."""
    path = spec_variant(tmp_path, max_registers=max_registers)
    spec = load_spec(path)
    with pytest.raises(PlanError) as info:
        plan_all([spec], rules)
    msg = str(info.value)
    assert "\n" not in msg
    assert str(path) in msg
    assert f"state_layout={layout}" in msg and f"bucket {bucket} " in msg
    other = "v_first" if layout == "k_first" else "k_first"
    assert f"state_layout={other}" not in msg


def test_no_variant_error_names_the_binding_register_budget_and_what_keeps_one(rules, tmp_path) -> None:
    """The error names the budget field that dropped every candidate and the least value that keeps one (the budget
    agent's own verdict, asked again): at that value the row plans, one below it it does not."""
    def error(max_registers: int) -> str:
        with pytest.raises(PlanError) as info:
            plan_all([load_spec(spec_variant(tmp_path, max_registers=max_registers))], rules)
        return str(info.value)

    msg = error(40)
    m = re.search(r"on sm_90a: the agents' budget dropped all (\d+) candidate\(s\) the agents proposed; "
                  r"budget\.max_registers 40 binds: the leanest candidate within the rest of the budget is estimated at "
                  r"(\d+) registers \(budget\.max_registers (\d+) keeps one\)$", msg)
    assert m and "state_layout=k_first, bucket 1 " in msg and "\n" not in msg, msg
    need = int(m[2])
    assert m[3] == m[2] and 40 < need <= 255 and int(m[1]) > 0
    assert "state_layout=k_first, bucket 1 " in error(need - 1)
    assert "state_layout=k_first, bucket 1 " not in error(need)  # it plans; a later row is the one that fails


def test_no_variant_error_names_the_binding_smem_budget_or_the_hardware(rules, tmp_path) -> None:
    msg = str(pytest.raises(PlanError, plan_all, [chunk_spec(tmp_path, max_smem_bytes="100000")], rules).value)
    assert msg.endswith("the agents' budget dropped all 2 candidate(s) the agents proposed; budget.max_smem_bytes "
                        "100000 binds: the leanest candidate within the rest of the budget is estimated at 158752 B of "
                        "shared memory (budget.max_smem_bytes 158752 keeps one)"), msg  # block_v 32's state kernel
    # a profile with 99 KB per block: no budget helps, the profile's limit binds and is cited
    ga102 = load_profiles()["a100"].model_copy(update={"name": "ga102", "arch": "sm_86",
                                                        "smem_per_block_bytes": 101376, "smem_per_sm_bytes": 102400})
    spec = chunk_spec(tmp_path, archs="[sm_90a, sm_80, sm_86]")
    msg = str(pytest.raises(PlanError, plan_spec, spec, "sm_86", rules, profile=ga102).value)
    assert "no variant survives for state_layout=k_first, bucket 2048 on sm_86: the agents' budget dropped all" in msg
    assert ("and would at any budget (budget.max_registers 255, budget.max_smem_bytes 232448): the hardware's limits "
            "bind (profile ga102 (published): registers_per_thread_max=255, smem_per_block_bytes=101376)") in msg, msg


def test_no_variant_error_names_the_forbidding_rules(tmp_path) -> None:
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    for rid, match in ((1, "{family: chunk, config: {block_v: 64}}"), (2, "{family: chunk}")):
        (rules_dir / f"000{rid}-no-chunk.yaml").write_text(
            f"id: {rid}\nversion: 1\nmatch: {match}\naction: forbid\nreason: test.\nevidence: test\n")
    rules = load_rules(rules_dir)
    spec = load_spec(KIMI_CHUNK)
    msg = str(pytest.raises(PlanError, plan_spec, spec, "sm_90a", rules).value)
    kept = [c for c in plan_spec(spec, "sm_90a", []).dispatch
            if (c["state_layout"], c["bucket"]) == ("k_first", 2048)][0]["candidates"]
    by_64 = sum(1 for v in plan_spec(spec, "sm_90a", []).variants
                if v.id in kept and v.config["block_v"] == 64)
    assert 0 < by_64 < len(kept)
    assert msg.endswith(f"state_layout=k_first, bucket 2048 on sm_90a: rules forbid all {len(kept)} candidate(s) the "
                        f"agents' budget kept: rule 0001 v1 ({rules_dir / '0001-no-chunk.yaml'}) forbids {by_64}, "
                        f"rule 0002 v1 ({rules_dir / '0002-no-chunk.yaml'}) forbids {len(kept) - by_64}; relax or "
                        "narrow the forbidding rule, or widen agents/budget in the spec"), msg


# ---- chunk family ------------------------------------------------------------------------------

def chunk_spec(tmp_path: Path, **edits: str) -> Spec:
    """The real chunk spec with top-level YAML lines replaced (key -> new value text)."""
    text = KIMI_CHUNK.read_text()
    for key, value in edits.items():
        text, n = re.subn(rf"^(\s*{key}:) .*$", rf"\1 {value}", text, flags=re.M)
        assert n == 1, key
    path = tmp_path / "kimi_linear_chunk.yaml"
    path.write_text(text)
    return load_spec(path)


def test_chunk_plan_ranks_block_v_by_bucket(rules) -> None:
    spec = load_spec(KIMI_CHUNK)
    for arch in spec.archs:
        plan = plan_spec(spec, arch, rules)
        g = groups(plan)
        assert sorted(g) == sorted((lay, b) for lay in ("k_first", "v_first") for b in (2048, 8192, 65536))
        for (layout, bucket), ids in g.items():
            cfgs = [next(v.config for v in plan.variants if v.id == i) for i in ids]
            want = [32, 64] if bucket >= 16384 else [64, 32]
            if arch == "sm_80":  # block_v 64's state kernel (195616 B) is over Ampere's 166912 B
                want = [32]
            assert [c["block_v"] for c in cfgs] == want, (arch, layout, bucket)
            assert all(c["chunk"] == 64 and c["stages"] == 2 and c["family"] == "chunk" for c in cfgs)
            assert {d["variant"] for d in rows_of(plan, f"{layout}:{bucket}")} == {ids[0]}
        for v in plan.variants:
            assert [a for a, _ in v.reasons][:len(CHUNK_AGENTS)] == list(CHUNK_AGENTS)
            why = dict(v.reasons)
            assert "FLA" in why["chunk"] and "<= 0" in why["chunk"]
            assert f"block_v={v.config['block_v']}" in why["tile"]
            assert "overlap" in why["stages"]
            # the budget agent's estimate: every padded tile at the most the TIR pass may pad it (MAX_ROW_PAD)
            assert re.search(r"~112896 B smem prep.*~(158752|201760) B smem state", why["budget"]), why["budget"]
            assert v.name.startswith(f"kda2_chunk_{arch}_k128v128_") and f"c64bv{v.config['block_v']}s2_{v.id}" in v.name
        if arch == "sm_80":  # the limit comes from the a100 profile, and the reason says so
            assert all("limit 166912 B (profile a100 (published): smem_per_block_bytes=166912)"
                       in dict(v.reasons)["budget"] for v in plan.variants)


def test_chunk_budget_agent_respects_the_arch_limit(rules, tmp_path) -> None:
    # stages 1 and 2, block_v up to 128 (state kernel bytes: 128/2 275488, 128/1 199184, 64/2 195616,
    # 64/1 128528): above sm_90a's 227 KB only 128/2, above sm_80's 163 KB all but 64/1
    spec = chunk_spec(tmp_path, chunk="{block_v: [128, 64], stages: [1, 2]}", max_candidates="8",
                      archs="[sm_90a, sm_80, sm_86]")
    profiles = load_profiles()
    by_arch = {arch: plan_spec(spec, arch, rules, profile=profiles[name])
               for arch, name in (("sm_90a", "h200"), ("sm_80", "a100"))}
    shapes = {arch: {(v.config["block_v"], v.config["stages"]) for v in p.variants} for arch, p in by_arch.items()}
    assert shapes["sm_90a"] == {(128, 1), (64, 2), (64, 1)}
    assert shapes["sm_80"] == {(64, 1)}
    # a profile with 99 KB per block (the 8.6 parts): even the prep kernel (at most 112896 B) does not fit
    ga102 = profiles["a100"].model_copy(update={"name": "ga102", "arch": "sm_86", "smem_per_block_bytes": 101376,
                                                 "smem_per_sm_bytes": 102400})
    with pytest.raises(PlanError, match="sm_86"):
        plan_spec(spec, "sm_86", rules, profile=ga102)
    capped = plan_spec(chunk_spec(tmp_path, max_candidates="1"), "sm_90a", rules)
    assert all(len(ids) == 1 for ids in groups(capped).values())
    with pytest.raises(PlanError, match="no variant survives"):
        plan_all([chunk_spec(tmp_path, max_smem_bytes="100000")], rules)


def test_state_mma_agent_twins_on_sm90a_only(rules, tmp_path) -> None:
    """The real chunk spec asks for wgmma: on sm_90a every mma_sync candidate of block_v 64 gets warpgroup twins at
    64 and at the whole V (128), after the mma_sync candidates (the rank-1 route stays mma_sync until tuned); the
    A100 plan has none (no wgmma), nor does a K = 256 spec (Sᵀ would not fit one m64nK accumulator); the K = 64 spec's
    are one warpgroup a head."""
    spec = load_spec(SPECS / "kimi_linear_chunk.yaml")
    p90, p80 = plan_spec(spec, "sm_90a", rules), plan_spec(spec, "sm_80", rules)
    assert not any(v.config.get("state_mma") for v in p80.variants)
    # (the levels candidates: the spec also asks for each one's bfs twin, test_prep_wu_agent_twins_bfs_...)
    # (and the fused twins, test_fused_agent_twins_...)
    wg = [v for v in p90.variants if v.config.get("state_mma") == "wgmma" and "prep_wu" not in v.config
          and "fused" not in v.config]
    assert {(v.config["block_v"], v.config["stages"]) for v in wg} == {(64, 2), (64, 1), (128, 2), (128, 1)} and \
        len(wg) == 8
    order = [v.config.get("state_mma", "mma_sync") for v in p90.variants
             if v.config["state_layout"] == "k_first" and "prep_wu" not in v.config and "fused" not in v.config]
    assert order == sorted(order, key=["mma_sync", "wgmma"].index)  # every mma_sync candidate first
    for v in wg:
        assert "wgmma (profile h200" in dict(v.reasons)["state_mma"] and "arch=sm_90a" in dict(v.reasons)["state_mma"]
    # K = 64 asks for them too: V = 64 is one warpgroup's columns, so the twin at block_v 64 is also the whole-V one
    small = plan_spec(load_spec(SPECS / "small_head_chunk.yaml"), "sm_90a", rules)
    wg64 = [v for v in small.variants if v.config.get("state_mma") == "wgmma" and "prep_wu" not in v.config]
    assert sorted((v.config["state_layout"], v.config["block_v"], v.config["stages"]) for v in wg64) == \
        [(layout, 64, s) for layout in ("k_first", "v_first") for s in (1, 2)]
    text = (SPECS / "large_head_chunk.yaml").read_text()
    text, n = re.subn(r"^(  chunk: \{.*)\}$", r"\1, state_mma: [mma_sync, wgmma]}", text, flags=re.M)
    assert n == 1
    (tmp_path / "large_head_chunk.yaml").write_text(text)
    large = load_spec(tmp_path / "large_head_chunk.yaml")
    assert large.agents.chunk.state_mma == ["mma_sync", "wgmma"]
    assert not any(v.config.get("state_mma") for v in plan_spec(large, "sm_90a", rules).variants)


def test_bulk_k_first_tiles_take_tensor_maps_and_dynamic_shared_memory(kimi, rules) -> None:
    """sm_90a decode: the k_first bulk candidates (any BV: one tensor-map box per tile) take the state tensor maps,
    their unpadded K x BV tile the dynamic part of their shared memory; every candidate's static shared memory
    (everything but that tile) stays within CUDA's 48 KB, and so does the whole of every non-bulk recurrent kernel.
    sm_80 has no bulk copies."""
    from kda2.codegen.render import takes_state_maps
    from kda2.plan.hardware import STATIC_SMEM_PER_BLOCK
    from kda2.plan.model import bulk_tile_bytes, smem_estimate

    plan = plan_spec(kimi, "sm_90a", rules)
    bulk = [v.config for v in plan.variants if v.config["staging"] == "bulk"]
    kf = [c for c in bulk if c["state_layout"] == "k_first"]
    assert kf and any(c["warps"] * c["v_per_warp"] < c["v"] for c in kf)   # tiles narrower than V: not contiguous
    assert all(takes_state_maps(c) == (c["state_layout"] == "k_first") for c in bulk)
    assert all(bulk_tile_bytes(c) == 128 * c["warps"] * c["v_per_warp"] * 4 for c in bulk)
    for v in plan.variants:
        assert smem_estimate(v.config) - bulk_tile_bytes(v.config) <= STATIC_SMEM_PER_BLOCK, v.id
        assert takes_state_maps(v.config) == (v.config in kf)
    assert not any(v.config["staging"] == "bulk" for v in plan_spec(kimi, "sm_80", rules).variants)


def test_a_partial_plan_does_not_call_rules_unmatched(kimi, rules) -> None:
    """plan_all over a subset of the specs (a `SPECS=` build) cannot tell a rule that matches nothing from one for a
    spec left out: the chunk family's rule 0001 is flagged when only the recurrent spec is planned as the whole set,
    not when it is planned as a subset."""
    _, every = plan_all([kimi], rules)
    _, part = plan_all([kimi], rules, every_spec=False)
    assert any("rule 0001 matches no current variant" in w for w in every)
    assert not any("matches no current variant" in w for w in part)


def test_each_chunk_row_carries_a_split_knob_from_the_profile_and_the_record(rules) -> None:
    """The exact split's knob per dispatch row (kda2.plan.agents.chunk row_split): judged at the row's fewest chains
    and the bucket's length with the profile's SMs — a row whose calls can be one long sequence splits (3 to 16
    segments of >= 12 chunks at K = 128), a row of short sequences or of chains that fill the GPU does not, a GPU with
    fewer SMs gets fewer segments; a tuning record's split routes the row where its winner is routed, and only there."""
    from kda2.plan.smem import SPLIT_MAX_SEGMENTS, SPLIT_MIN_SEGMENTS, SPLIT_SEGMENT_STEPS, split_min_chunks

    spec = load_spec(SPECS / "kimi_linear_chunk.yaml")
    h200 = load_profiles()["h200"]
    plan = plan_spec(spec, "sm_90a", rules, profile=h200)
    rows = routes(plan)
    for key, d in rows.items():
        assert d["split_by"] == "agents" and isinstance(d["split"], int) and d["split_why"], key
        if d["bucket"] // 64 < SPLIT_MIN_SEGMENTS * split_min_chunks(spec.head_dims.k) or d["min_chains"] >= 46:
            assert d["split"] == 1 and d["split_why"].startswith("unsplit"), (key, d["split_why"])
    longest = [d for d in plan.dispatch if d["bucket"] == max(spec.seq_len_buckets) and d["min_chains"] == 0]
    assert longest and all(SPLIT_MIN_SEGMENTS <= d["split"] <= SPLIT_MAX_SEGMENTS for d in longest), longest
    # one chain of 128 chunks: the fold's 4 CTAs leave the wave free, so the walk-vs-combine balance decides
    assert all(d["split"] == math.isqrt(2 * 128 // SPLIT_SEGMENT_STEPS) for d in plan.dispatch
               if d["bucket"] == 8192 and d["min_chains"] == 0)
    # a GPU with an eighth of the SMs: the fold's one wave holds fewer segments of the one-sequence rows
    small = h200.model_copy(update={"sm_count": h200.sm_count // 8})
    fewer = {k: d["split"] for k, d in routes(plan_spec(spec, "sm_90a", rules, profile=small)).items()}
    assert all(fewer[k] <= d["split"] for k, d in rows.items())
    assert any(fewer[k] < rows[k]["split"] for k in rows), fewer
    # a record's split: applied to the row routed to the record's winner, not to a row whose winner is gone
    key = f"{longest[0]['state_layout']}:{longest[0]['bucket']}:{longest[0]['class']}"
    other = next(k for k, d in rows.items() if d["split"] > 1 and k != key)
    tuned = {key: longest[0]["variant"], other: "0" * 12}
    got = routes(plan_spec(spec, "sm_90a", rules, tuned, profile=h200, tuned_splits={key: 2, other: 1}))
    assert (got[key]["split"], got[key]["split_by"]) == (2, "tune") and "tune: 2 segment(s)" in got[key]["split_why"]
    assert got[other]["routed_by"] == "rank" and (got[other]["split"], got[other]["split_by"]) == (
        rows[other]["split"], "agents")
    recurrent = plan_spec(load_spec(KIMI), "sm_90a", rules)
    assert all((d["split"], d["split_by"]) == (1, "family") for d in recurrent.dispatch)


def test_a_record_whose_winners_are_gone_warns_once(kimi, rules) -> None:
    """A tuning record made for another version of the spec (other head dims or knobs: none of its winners is a
    candidate any more) routes every row by rank with one warning that counts and names the rows, not one per row;
    a record whose winners are candidates warns nothing."""
    plan = plan_spec(kimi, "sm_90a", rules)
    keys = sorted({f"{d['state_layout']}:{d['bucket']}" for d in plan.dispatch})
    gone = plan_spec(kimi, "sm_90a", rules, tuned={k: "0123456789ab" for k in keys})
    assert len(gone.warnings) == 1, gone.warnings
    rows = len(gone.dispatch)
    assert f"the tuned variant of {rows} dispatch row(s) is no longer a candidate" in gone.warnings[0]
    assert all(d["routed_by"] == "rank" for d in gone.dispatch)
    assert [d["variant"] for d in gone.dispatch] == [d["variant"] for d in plan.dispatch]
    d0 = plan.dispatch[0]
    kept = plan_spec(kimi, "sm_90a", rules, tuned={f"{d0['state_layout']}:{d0['bucket']}": d0["candidates"][-1]})
    assert not kept.warnings


def test_prep_wu_agent_twins_bfs_on_sm90a_only_when_asked(rules, tmp_path) -> None:
    """agents.chunk.prep_wu [levels, bfs] (the Kimi spec asks for both): on sm_90a every levels candidate gets a bfs
    twin after all levels ones (the routed variants stay levels until the tuner says otherwise), the A100 plan none;
    asked for levels alone the plan is the levels half of it, with the same ids (no config names prep_wu there)."""
    both = load_spec(SPECS / "kimi_linear_chunk.yaml")
    assert both.agents.chunk.prep_wu == ["levels", "bfs"]
    text, n = re.subn(r"prep_wu: \[levels, bfs\]", "prep_wu: [levels]", (SPECS / "kimi_linear_chunk.yaml").read_text())
    assert n == 1
    (tmp_path / "kimi_linear_chunk.yaml").write_text(text)
    before = plan_spec(load_spec(tmp_path / "kimi_linear_chunk.yaml"), "sm_90a", rules)
    assert not any("prep_wu" in v.config for v in before.variants)
    p90, p80 = plan_spec(both, "sm_90a", rules), plan_spec(both, "sm_80", rules)
    assert not any(v.config.get("prep_wu") for v in p80.variants)
    bfs = [v for v in p90.variants if v.config.get("prep_wu") == "bfs"]
    levels = [v for v in p90.variants if "prep_wu" not in v.config]
    assert bfs and {v.id for v in levels} == {v.id for v in before.variants}
    # each bfs twin is a levels candidate's config plus the knob
    strip = lambda c: {k: x for k, x in c.items() if k != "prep_wu"}  # noqa: E731
    assert all(strip(v.config) in [lv.config for lv in levels] for v in bfs)
    for layout in ("k_first", "v_first"):
        order = [v.config.get("prep_wu", "levels") for v in p90.variants
                 if v.config["state_layout"] == layout and "fused" not in v.config]   # (the fused twins: last)
        assert order == sorted(order, key=["levels", "bfs"].index)
    assert all("bfs (profile h200" in dict(v.reasons)["prep_wu"] for v in bfs)
    # the routes (rank 1 per row) are levels variants
    assert all(p90.variants[d["index"]].config.get("prep_wu") is None for d in p90.dispatch)
