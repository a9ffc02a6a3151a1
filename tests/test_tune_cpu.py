"""kda2 tune without a GPU: the dry run, and the run's bookkeeping (resume, failures, the record, routing) with
the measuring step replaced by fixed numbers; then rules proposed from its failures (kda2.tools.feedback)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kda2.plan.cache import load_plans
from kda2.plan.planner import plan_spec
from kda2.plan.profile import load_profiles
from kda2.spec.model import load_spec
from kda2.spec.rules import RuleError, check_lock, load_rule, load_rules, write_lock
from kda2.tools import feedback, tune

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "kernel_specs"
KIMI_CHUNK = Path(__file__).resolve().parent / "specs" / "two_tiles" / "kimi_linear_chunk.yaml"  # pinned knob lists


def kda2(*args: object) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "kda2.tools.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env)


def test_dry_run_lists_candidates_without_a_gpu() -> None:
    p = kda2("tune", "--dry-run", KIMI_CHUNK)
    assert p.returncode == 0, p.stderr
    spec, rules, profiles = load_spec(KIMI_CHUNK), load_rules(REPO / "rules"), load_profiles()
    for arch, prof in (("sm_90a", "h200"), ("sm_80", "a100")):
        plan = plan_spec(spec, arch, rules, profile=profiles[prof])
        assert f"kimi_linear_chunk / {arch} on {prof} (published)" in p.stdout
        for v in plan.variants:
            assert v.id in p.stdout
    assert "model" in p.stdout and "not built: resources estimated" in p.stdout
    assert "batch classes: prefill-n1 N=1 T=65536 H=32" in p.stdout
    # what the marks and the estimate mean: the route, the class the model is at, where its step time comes from
    assert "* marks each row's current route" in p.stdout and "first batch class" in p.stdout
    routed = {d["variant"] for d in plan_spec(spec, "sm_90a", rules, profile=profiles["h200"]).dispatch}
    starred = {ln.split()[0] for ln in p.stdout.splitlines() if ln.startswith("    ") and ln.split()[1:2] == ["*"]}
    assert routed <= starred, (routed, starred)
    assert "step from record" in p.stdout   # the H200 record measured these rows


def test_tuning_a_spec_needs_its_build(tmp_path) -> None:
    p = kda2("tune", KIMI_CHUNK)
    assert p.returncode == 2 and p.stderr.startswith("kda2: error: ") and "--dry-run" in p.stderr
    assert "Traceback" not in p.stderr


# ---- a built library, faked: the real plan's kernels with ptxas-like resources ----------------------

@pytest.fixture()
def built(tmp_path):
    """build/kimi_linear_chunk/sm_90a/manifest.json as a build would write it (no .so: nothing is loaded)."""
    spec = load_spec(KIMI_CHUNK)
    plan = plan_spec(spec, "sm_90a", load_rules(REPO / "rules"), profile=load_profiles()["h200"])
    d = tmp_path / "build" / "kimi_linear_chunk" / "sm_90a"
    d.mkdir(parents=True)
    variants = []
    for i, v in enumerate(plan.variants):
        spills = 8 if v.config["block_v"] == 32 and v.config["state_layout"] == "v_first" else 0
        res = {"state": {"registers": 168, "smem": 0, "spill_stores": spills, "spill_loads": spills, "stack": 0},
               "prep": {"registers": 128, "smem": 0, "spill_stores": 0, "spill_loads": 0, "stack": 0}}
        variants.append({"id": v.id, "index": i, "name": v.name, "config": v.config, "resources": res})
    m = {"spec": spec.name, "arch": "sm_90a", "family": "chunk", "features": spec.canonical()["features"],
         "library": {"path": "libx.so", "sha256": "ab" * 32}, "variants": variants,
         "dispatch": [dict(r) for r in plan.dispatch]}
    (d / "manifest.json").write_text(json.dumps(m))
    return d, plan


def test_dry_run_of_a_build_prunes_spills_with_the_reason(built, tmp_path) -> None:
    d, plan = built
    p = kda2("tune", "--dry-run", d, "--tuning", tmp_path / "tuning")
    assert p.returncode == 0, p.stderr
    assert "PRUNED: spills 16 B (ptxas) and budget.allow_spills is false" in p.stdout
    assert "[" + str(d / "manifest.json") + "]" in p.stdout


def fake_executor(results: dict[str, dict], seen: list[str]):
    def factory(n, workers, log):
        def run(tasks, quick, l2):
            for t in tasks:
                seen.append(f"{t.route}/{t.variant}")
                yield t, dict(results[t.variant])
        return run, (lambda: None), "fake"
    return factory


def test_run_resumes_records_failures_and_routes_the_build(built, tmp_path, monkeypatch) -> None:
    d, plan = built
    tuning = tmp_path / "tuning"
    monkeypatch.setattr(tune, "_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(tune, "_torch_version", lambda: "test")
    ids = {(v.config["state_layout"], v.config["block_v"]): v.id for v in plan.variants}
    results = {ids[("k_first", 64)]: {"us": 500.0, "error": 1e-3, "classes": {}},
               ids[("k_first", 32)]: {"us": 400.0, "error": 1e-3, "classes": {}},
               ids[("v_first", 64)]: {"failure": "wrong_result", "error": 0.3,
                                      "detail": "relative L2 3.000e-01 > 0.005 vs the float64 reference"}}
    seen: list[str] = []
    monkeypatch.setattr(tune, "_executor", fake_executor(results, seen))
    g = tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tuning))
    # stopped by the time limit after the first candidate: the partial record is kept
    assert tune.tune_group(g, tuning_dir=str(tuning), deadline=0.0, log=lambda *_: None) is None
    partial = tuning / "kimi_linear_chunk.h200.partial.json"
    assert partial.is_file() and len(seen) == 1
    first = seen[0]
    # resumed: the measured candidate is not measured again
    seen.clear()
    g = tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tuning))
    lines: list[str] = []
    rec = tune.tune_group(g, tuning_dir=str(tuning), margin=0.1, log=lines.append)
    assert rec is not None and not partial.exists()
    assert first not in seen and len(seen) + 1 == sum(1 for t in g.tasks if not t.pruned)
    assert any(line.startswith("[") and "ETA" in line for line in lines)  # one progress line per candidate
    record = json.loads((tuning / "kimi_linear_chunk.h200.json").read_text())
    assert record["schema"] == 2 and record["profile"] == "h200" and record["arch"] == "sm_90a"
    assert record["gpu"] == "NVIDIA H200"
    for key in ("k_first:2048", "k_first:8192", "k_first:65536"):
        assert record["routes"][key]["variant"] == ids[("k_first", 32)]  # 400 us beats 500 us everywhere
    # no v_first candidate passed (one wrong, one pruned): those rows stay routed by rank, and say why
    assert not any(k.startswith("v_first") for k in record["routes"])
    assert any("v_first:2048: no candidate passed the reference check" in line for line in lines)
    vf = record["unrouted"]["v_first:2048"]["candidates"]
    assert vf[ids[("v_first", 64)]]["rejected"] == "wrong_result"
    assert vf[ids[("v_first", 32)]]["pruned"].startswith("spills")
    # failures: the wrong result, the spill, and block_v 64 slower than the incumbent (the rank-1 block_v 32
    # of the long bucket) by more than 10 %
    fails = feedback.read_failures(tuning / "failures" / "kimi_linear_chunk.h200.jsonl")
    kinds = {f["kind"] for f in fails}
    assert kinds == {"wrong_result", "spill", "slower_than_incumbent"}
    wrong = next(f for f in fails if f["kind"] == "wrong_result")
    # (state_mma, prep_wu, fused: the config leaves their defaults out, the record names them: spec/knobs.py
    # ABSENT_KNOB_DEFAULTS)
    assert wrong["knobs"] == {"state_layout": "v_first", "chunk": 64, "block_v": 64, "stages": 2,
                              "state_mma": "mma_sync", "prep_wu": "levels", "fused": False}
    assert wrong["gpu"] == "NVIDIA H200" and wrong["numbers"]["error"] == 0.3 and wrong["command"]

    # the build routes by the record: the plan cache reads tuning/, the rows say "tune"
    plans, _ = load_plans(str(KIMI_CHUNK.parent), str(REPO / "rules"), str(tmp_path / "b"), ["kimi_linear_chunk"],
                          str(REPO / "profiles"), str(tuning))
    p90 = next(p for p in plans if p.arch == "sm_90a")
    rows = {f"{r['state_layout']}:{r['bucket']}": r for r in p90.dispatch}
    assert rows["k_first:2048"]["variant"] == ids[("k_first", 32)] and rows["k_first:2048"]["routed_by"] == "tune"
    assert rows["k_first:2048"]["tuned"]["us"] == 400.0
    before = {k: r["variant"] for k, r in rows.items()}
    # changing the record re-routes (the plan cache key holds it)
    record["routes"]["k_first:2048"]["variant"] = ids[("k_first", 64)]
    (tuning / "kimi_linear_chunk.h200.json").write_text(json.dumps(record))
    plans, _ = load_plans(str(KIMI_CHUNK.parent), str(REPO / "rules"), str(tmp_path / "b"), ["kimi_linear_chunk"],
                          str(REPO / "profiles"), str(tuning))
    rows2 = {f"{r['state_layout']}:{r['bucket']}": r for r in next(p for p in plans if p.arch == "sm_90a").dispatch}
    assert rows2["k_first:2048"]["variant"] == ids[("k_first", 64)] != before["k_first:2048"]

    # ---- rules from the failures ------------------------------------------------------------------
    rules = tmp_path / "rules"
    rules.mkdir()
    write_lock(rules)
    path = feedback.propose(f"{tuning / 'failures' / 'kimi_linear_chunk.h200.jsonl'}:{wrong['id']}",
                            rules_dir=str(rules), tuning_dir=str(tuning))
    assert path.name.startswith("0001-wrong-result-chunk-sm-90a")
    rule = load_rule(path)
    assert rule.action == "forbid" and rule.match.arch == "sm_90a" and rule.match.config["block_v"] == 64
    assert wrong["id"] in rule.evidence and "NVIDIA H200" in rule.evidence and "0.3" in rule.evidence
    assert check_lock(rules) == []
    assert feedback.check(str(rules), str(SPECS)) == []
    impact = feedback.impact(str(path), rules_dir=str(rules), specs_dir=str(SPECS), build_dir=str(tmp_path / "build"),
                             log=lambda *_: None)
    assert impact["kimi_linear_chunk/sm_90a"]["kernels_removed"] == 1
    assert impact["kimi_linear_chunk/sm_90a"]["built_kernels_invalidated"] == 1
    # every tree asked for counts (the default: the routed and the every-candidate one), each named in the line
    shutil.copytree(tmp_path / "build", tmp_path / "cands")
    lines = []
    both = feedback.impact(str(path), rules_dir=str(rules), specs_dir=str(SPECS),
                           build_dir=[str(tmp_path / "build"), str(tmp_path / "cands")], log=lines.append)
    assert both["kimi_linear_chunk/sm_90a"]["built_kernels_invalidated"] == 2
    assert any(f"{tmp_path / 'build'}: 1, {tmp_path / 'cands'}: 1" in ln for ln in lines), lines
    assert impact["kimi_linear_chunk/sm_80"]["candidates_matched"] == 0
    assert impact["kimi_linear_recurrent/sm_90a"]["candidates_matched"] == 0
    # a rule that empties a row of one spec: that spec's plan fails, the others keep their true figures
    every = rules / "0009-every-chunk-sm-90a.yaml"
    every.write_text("id: 9\nversion: 1\nmatch:\n  family: chunk\n  arch: sm_90a\naction: forbid\n"
                     "reason: test rule\nevidence: test\n")
    lines = []
    impact = feedback.impact(str(every), rules_dir=str(rules), specs_dir=str(SPECS), build_dir=str(tmp_path / "build"),
                             log=lines.append)
    assert "no variant survives" in impact["kimi_linear_chunk/sm_90a"]["plan_fails"]
    assert impact["kimi_linear_recurrent/sm_90a"]["kernels_removed"] == 0   # not "every kernel removed"
    assert any(ln.startswith("kimi_linear_chunk/sm_90a (h200): candidates matched") and "plan fails" in ln
               for ln in lines), lines
    every.unlink()
    # a speed failure is scoped to the profile and the bucket
    slow = next(f for f in fails if f["kind"] == "slower_than_incumbent")
    path2 = feedback.propose(slow["id"], rules_dir=str(rules), tuning_dir=str(tuning))
    rule2 = load_rule(path2)
    assert rule2.id == 2 and rule2.match.profile == "h200" and rule2.match.bucket == slow["bucket"]
    assert check_lock(rules) == []


def test_a_routed_build_is_refused_with_the_build_that_tunes(built, tmp_path) -> None:
    """A library built with CANDIDATES=routed holds what the dispatch routes to, not the candidates: tuning it is
    refused naming the rebuild; the same manifest marked "all" (or without the field: it predates it) is tuned."""
    d, _ = built
    m = json.loads((d / "manifest.json").read_text())
    for mark, ok in (("routed", False), ("all", True), (None, True)):
        m.pop("candidates", None)
        if mark:
            m["candidates"] = mark
        (d / "manifest.json").write_text(json.dumps(m))
        if ok:
            assert tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tmp_path / "tuning"))
            continue
        with pytest.raises(tune.TuneError, match=r"CANDIDATES=routed .*kda2 build --candidates all kimi_linear_chunk.* and tune build/_candidates/kimi_linear_chunk/sm_"):
            tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tmp_path / "tuning"))


def test_propose_and_check_errors(tmp_path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    write_lock(rules)
    fails = tmp_path / "f.jsonl"
    fails.write_text('{"id": "a", "kind": "wrong_result"}\n{"id": "b", "kind": "spill"}\n')
    with pytest.raises(Exception, match="holds 2 failures; name one as"):
        feedback.propose(str(fails), rules_dir=str(rules))
    many = tmp_path / "many.jsonl"  # a missing id in a long record: the count and the newest ids, not all of them
    many.write_text("".join(f'{{"id": "f{i:04d}", "kind": "spill"}}\n' for i in range(500)))
    with pytest.raises(Exception, match=r"no failure zz; it holds 500 \(the last 12: f0488, .*, f0499\)$") as e:
        feedback.propose(f"{many}:zz", rules_dir=str(rules))
    assert len(str(e.value)) < 300
    fails.write_text('{"id": "a", "kind": "melted"}\n')
    with pytest.raises(Exception, match="allowed kinds: wrong_result"):
        feedback.propose(str(fails), rules_dir=str(rules))
    with pytest.raises(Exception, match="neither a failure file nor a failure id"):
        feedback.propose("0123abcd", rules_dir=str(rules), tuning_dir=str(tmp_path))
    # check: a rule matching no planned variant is a problem; so is an unlocked one
    (rules / "0001-nothing.yaml").write_text("id: 1\nversion: 1\nmatch: {arch: sm_89}\naction: forbid\n"
                                             "reason: r\nevidence: e\n")
    problems = feedback.check(str(rules), str(SPECS))
    assert any("not in" in p and "kda2 rules lock" in p for p in problems)
    assert any("matches no current variant" in p for p in problems)
    p = kda2("rules", "check", "--rules", rules)
    assert p.returncode == 1 and "matches no current variant" in p.stderr and "Traceback" not in p.stderr
    p = kda2("rules", "propose", "--rules", rules)
    assert p.returncode == 2 and "needs a failure record" in p.stderr


def test_calibrate_without_a_gpu_is_one_line(tmp_path) -> None:
    p = kda2("calibrate", "--out", tmp_path / "x.yaml")
    if p.returncode == 0:
        pytest.skip("a GPU is visible here: calibrate ran")
    assert p.returncode == 2 and p.stderr.startswith("kda2: error: ") and len(p.stderr.strip().splitlines()) == 1
    assert "GPU" in p.stderr and "Traceback" not in p.stderr
    p = kda2("calibrate", "--out", tmp_path / "x.json")
    assert p.returncode == 2 and "allowed: a .yaml path" in p.stderr


def test_tuning_on_another_gpu_than_the_profile_is_refused(built, tmp_path, monkeypatch) -> None:
    d, _ = built
    monkeypatch.setattr(tune, "_gpu_name", lambda: "NVIDIA A100-SXM4-80GB")
    g = tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tmp_path / "tuning"))
    with pytest.raises(tune.TuneError, match="this GPU is 'NVIDIA A100-SXM4-80GB' but kimi_linear_chunk/sm_90a "
                                             "targets profile h200"):
        tune.tune_group(g, tuning_dir=str(tmp_path / "tuning"), log=lambda *_: None)
    assert not (tmp_path / "tuning").exists()


def test_failed_build_records_its_kernels_and_a_rule_follows(tmp_path) -> None:
    """kda2 build on failure: the kernels SCons names become failure records (knobs from the plan cache)."""
    plans, _ = load_plans(str(SPECS), str(REPO / "rules"), str(tmp_path / "build"), ["kimi_linear_recurrent"],
                          str(REPO / "profiles"), str(REPO / "tuning"))
    p = next(x for x in plans if x.arch == "sm_80")
    v = p.variants[0]
    lines = ["kda2 nvlink    build/...",
             f"kda2: error: {v.name}: kda2_x spills (8 B stores, 8 B loads, 16 B stack frame) and budget.allow_spills "
             "is false. Lower budget.max_registers",
             f"scons: *** [build/kimi_linear_recurrent/sm_80/{v.name}.resources.json] Error 1",
             f"scons: *** [build/kimi_linear_recurrent/sm_80/{v.name[:-12]}000000000000.o] Error 1"]  # unknown id
    recs = feedback.record_build_failures(lines, top=tmp_path, command="kda2 build")
    assert [(r["kind"], r["variant"], r["profile"]) for r in recs] == [("spill", v.id, "a100")]
    assert "spills (8 B stores" in recs[0]["detail"] and recs[0]["knobs"]["warps"] == v.config["warps"]
    path = tmp_path / "tuning" / "failures" / "kimi_linear_recurrent.a100.jsonl"
    assert feedback.read_failures(path)[0]["id"] == recs[0]["id"]
    feedback.record_build_failures(lines, top=tmp_path, command="kda2 build")  # the same failure once
    assert len(feedback.read_failures(path)) == 1
    rules = tmp_path / "rules"
    rules.mkdir()
    write_lock(rules)
    rule = load_rule(feedback.propose(str(path), rules_dir=str(rules), tuning_dir=str(tmp_path / "tuning")))
    assert rule.match.arch == "sm_80" and rule.match.family == "recurrent" and "spills" in rule.reason
    # a kernel over the register budget without spilling is recorded as that, not as a spill
    over = [f"kda2: error: {v.name}: kda2_x needs 79 registers per thread, more than budget.max_registers 72. Raise "
            "budget.max_registers to at least 79", lines[2]]
    (rec,) = feedback.record_build_failures(over, top=tmp_path, command="kda2 build")
    assert rec["kind"] == "register_budget" and "79 registers" in rec["detail"], rec
    # ... and it makes no rule: a rule would forbid the config for every spec of the arch, the spec's budget changes
    before = sorted(p.name for p in rules.iterdir())
    with pytest.raises(RuleError, match=r"raise budget.max_registers in its spec to at least 79.*no rule"):
        feedback.propose(rec["id"], rules_dir=str(rules), tuning_dir=str(tmp_path / "tuning"))
    assert sorted(p.name for p in rules.iterdir()) == before


def _sm80_variants(tmp_path) -> list:
    """kimi_linear_recurrent's sm_80 variants, with the plan cache record_build_failures reads under tmp_path/build."""
    plans, _ = load_plans(str(SPECS), str(REPO / "rules"), str(tmp_path / "build"), ["kimi_linear_recurrent"],
                          str(REPO / "profiles"), str(REPO / "tuning"))
    variants = next(x for x in plans if x.arch == "sm_80").variants
    assert len(variants) >= 3
    return variants


def _nvcc_failure(v, tag: str) -> list[str]:
    """What a failed `nvcc -dc` of variant v prints (compile/actions.py nvcc_action), its temporaries named by tag
    (compile/nvcc.py: <pid>.<thread id>)."""
    obj = f"build/kimi_linear_recurrent/sm_80/{v.name}.o"
    return [f"kda2: error: nvcc -dc {obj}: `/usr/local/bin/nvcc -std=c++17 -O3 -dc -Iinc0 -keep -keep-dir keep.{tag} "
            f"-o {v.name}.o.{tag} kernel.cu` exited 2:",
            "inc0/kda2/recurrent.cuh(1505): error: expected a declaration", "  this is not c++;", "  ^", "",
            f'1 error detected in the compilation of "/tmp/tmpxft_{tag.split(".")[0]:0>8}_00000000-6_kernel.cpp1.ii".',
            "", f"scons: *** [{obj}] Error 1"]


def test_a_rerun_of_a_failed_build_records_its_failure_once(tmp_path) -> None:
    """The same failure in two builds (other pids and threads name nvcc's temporaries) is one record, with one id;
    what it stores names no temporary of either build."""
    v = _sm80_variants(tmp_path)[0]
    (first,) = feedback.record_build_failures(_nvcc_failure(v, "5771.140455410755264"), top=tmp_path)
    (again,) = feedback.record_build_failures(_nvcc_failure(v, "5829.140130116433600"), top=tmp_path)
    assert first["kind"] == "compile_error" and first["id"] == again["id"]
    recs = feedback.read_failures(tmp_path / "tuning" / "failures" / "kimi_linear_recurrent.a100.jsonl")
    assert [r["id"] for r in recs] == [first["id"]]
    assert "keep.PID.TID" in recs[0]["detail"] and "error: expected a declaration" in recs[0]["detail"]
    assert not re.search(r"5771|5829|1404|1401", recs[0]["detail"]), recs[0]["detail"]


def test_each_build_failure_record_holds_its_own_kernel_s_errors(tmp_path) -> None:
    """kda2 build -j2 -- -k: messages of several kernels and SCons' lines for them come in any order; each
    record's detail (and so its kind) is its own kernel's, not the neighbouring one's."""
    a, b, c = _sm80_variants(tmp_path)[:3]
    res = "build/kimi_linear_recurrent/sm_80/{}.resources.json"
    advice = " Lower budget.max_registers / the agents' knobs in the spec, or add a rule that forbids this config."
    lines = [f"kda2 resources build/kimi_linear_recurrent/sm_80/{a.name}.resources.json",
             f"kda2: error: {a.name}: kda2_recurrent_{a.id} spills (8 B stores, 8 B loads, 16 B stack frame) and "
             "budget.allow_spills is false." + advice,
             f"kda2: error: {b.name}: kda2_recurrent_{b.id} needs 79 registers per thread, more than "
             "budget.max_registers 72. Raise budget.max_registers to at least 79",
             f"kda2 nvcc -dc    build/kimi_linear_recurrent/sm_80/{c.name}.o",
             f"scons: *** [{res.format(a.name)}] Error 1",
             *_nvcc_failure(c, "5771.140455410755264")[:-1],
             f"scons: *** [{res.format(b.name)}] Error 1",
             _nvcc_failure(c, "5771.140455410755264")[-1],
             "scons: done building targets (errors occurred during build)."]
    recs = {r["variant"]: r for r in feedback.record_build_failures(lines, top=tmp_path)}
    assert {k: r["kind"] for k, r in recs.items()} == {a.id: "spill", b.id: "register_budget", c.id: "compile_error"}
    for v in (a, b, c):
        detail = recs[v.id]["detail"]
        assert detail.startswith("kda2: error: ") and v.name in detail, detail
        assert not any(w.id in detail for w in (a, b, c) if w is not v), detail


def test_failures_of_the_environment_are_not_recorded(tmp_path) -> None:
    """What is not the kernel's code gets no failure record (nor rule advice): an exception that escaped an action
    (SCons' `[target] <path>: <error>`, e.g. an unwritable staging directory) and a tool killed by a signal."""
    v = _sm80_variants(tmp_path)[0]
    obj = f"build/kimi_linear_recurrent/sm_80/{v.name}.o"
    escaped = [f"scons: *** [{obj}] {tmp_path}/not-a-dir/kda2-src/0123/inc0/kda2: Not a directory"]
    assert feedback.record_build_failures(escaped, top=tmp_path) == []
    cubin = f"build/kimi_linear_recurrent/sm_80/{v.name}.cubin"
    killed = [f"kda2: error: nvlink {cubin}: nvlink -dlto of {obj} exited -9 (killed by signal 9):",
              f"scons: *** [{cubin}] Error 1"]
    assert feedback.record_build_failures(killed, top=tmp_path) == []
    assert not (tmp_path / "tuning").exists()


def test_a_kernel_fault_stops_the_run_and_the_rerun_skips_it(built, tmp_path, monkeypatch) -> None:
    d, plan = built
    tuning = tmp_path / "tuning"
    monkeypatch.setattr(tune, "_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(tune, "_torch_version", lambda: "test")
    results = {v.id: {"us": 100.0 + i, "error": 1e-3, "classes": {}} for i, v in enumerate(plan.variants)}
    bad = plan.variants[0].id
    results[bad] = {"failure": "launch_error", "fatal": True, "detail": "CUDA error: an illegal memory access"}
    seen: list[str] = []
    monkeypatch.setattr(tune, "_executor", fake_executor(results, seen))
    g = tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tuning))
    assert tune.tune_group(g, tuning_dir=str(tuning), log=lambda *_: None) is None
    assert seen[-1].endswith(bad)
    n_first = len(seen)
    seen.clear()
    g = tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tuning))
    rec = tune.tune_group(g, tuning_dir=str(tuning), log=lambda *_: None)
    assert rec is not None and not any(s.endswith(bad) for s in seen)
    bad_rows = sum(1 for t in g.tasks if t.variant == bad)
    assert bad_rows > 1  # one fault settles every row of that kernel
    assert n_first + len(seen) + bad_rows - 1 == sum(1 for t in g.tasks if not t.pruned)
    assert all(r["variant"] != bad for r in rec["routes"].values())
    fails = feedback.read_failures(tuning / "failures" / "kimi_linear_chunk.h200.jsonl")
    assert any(f["kind"] == "launch_error" and f["variant"] == bad for f in fails)


def test_calibrate_writes_a_profile_the_loader_accepts(tmp_path) -> None:
    """What `kda2 calibrate` writes (hand-made YAML: the GPU host may lack PyYAML) loads as a measured profile."""
    from kda2.plan.profile import load_profile
    from kda2.tools.calibrate import _yaml

    facts = {"name": "h200-measured", "gpu": "NVIDIA H200", "arch": "sm_90a", "default_for_arch": False,
             "sm_count": 132, "smem_per_sm_bytes": 233472, "smem_per_block_bytes": 232448,
             "registers_per_sm": 65536, "registers_per_thread_max": 255, "threads_per_sm_max": 2048,
             "blocks_per_sm_max": 32, "smem_reserved_per_block_bytes": 1024, "register_alloc_unit": 256,
             "warp_schedulers_per_sm": 4, "l2_bytes": 52428800, "copy_bandwidth_bytes_per_s": 4.27e12,
             "tensor_flops_per_s": {"bf16": 6.87e14, "tf32": 3.4e14}, "launch_latency_us": 2.25,
             "source": "measured", "date": "2026-11-30", "command": 'kda2 calibrate --out "profiles/x y.yaml"'}
    path = tmp_path / "h200-measured.yaml"
    path.write_text(_yaml(facts))
    prof = load_profile(path)
    assert prof.model_dump(mode="json") == {**facts, "citation": None}


BLOCK_BUILD_PACKAGES = (
    "import sys\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('pydantic', 'yaml'):\n"
    "            raise ModuleNotFoundError('No module named ' + repr(name), name=name)  # as a missing one\n"
    "sys.meta_path.insert(0, _Block())\n"
    "from kda2.tools.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n")


def test_tune_dry_run_of_a_build_needs_no_pydantic(built, tmp_path) -> None:
    """On a GPU host without the build packages, tune reads the profile and budget from the plan cache."""
    d, _ = built
    load_plans(str(SPECS), str(REPO / "rules"), str(tmp_path / "build"), ["kimi_linear_chunk"],
               str(REPO / "profiles"), str(REPO / "tuning"))  # what the build leaves: build/.kda2/plan-cache.json
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    p = subprocess.run([sys.executable, "-c", BLOCK_BUILD_PACKAGES, "tune", "--dry-run", str(d), "--tuning",
                        str(tmp_path / "tuning")], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "kimi_linear_chunk / sm_90a on h200 (published)" in p.stdout and "PRUNED: spills" in p.stdout
    p = subprocess.run([sys.executable, "-c", BLOCK_BUILD_PACKAGES, "calibrate", "--out", str(tmp_path / "x.yaml")],
                       capture_output=True, text=True, cwd=tmp_path, env=env)
    assert "Traceback" not in p.stderr and (p.returncode == 0 or p.stderr.startswith("kda2: error: "))


def test_tune_for_another_profile_needs_no_pydantic(built, tmp_path) -> None:
    """`kda2 tune --profile NAME` on a GPU host without the build packages: the profile is the build's validated copy
    in the plan cache, the budget the plan's; an unknown name or another arch's profile is one line naming the
    allowed."""
    d, _ = built
    load_plans(str(SPECS), str(REPO / "rules"), str(tmp_path / "build"), ["kimi_linear_chunk"],
               str(REPO / "profiles"), str(REPO / "tuning"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", BLOCK_BUILD_PACKAGES, "tune", "--dry-run", str(d), "--tuning",
                               str(tmp_path / "tuning"), *extra], capture_output=True, text=True, cwd=tmp_path, env=env)

    p = run("--profile", "h100")
    assert p.returncode == 0, p.stderr
    assert "kimi_linear_chunk / sm_90a on h100 (published)" in p.stdout
    p = run("--profile", "nosuch")
    assert p.returncode != 0 and "--profile nosuch: unknown; allowed: a100, h100" in p.stderr, p.stderr
    p = run("--profile", "a100")
    assert p.returncode != 0 and "--profile a100 is sm_80, the library is sm_90a" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_tune_reads_the_plan_from_the_manifest_without_the_plan_cache(built, tmp_path) -> None:
    """A build tree copied alone to a GPU host without kda2[build]: no build/.kda2/plan-cache.json beside it, yet
    the manifest's "planned" (the plan cache's own record, as the build writes it) gives tune the profile and
    budget; without it the error names the way out."""
    from kda2.plan.cache import _from_json, _to_json

    d, plan = built
    m = json.loads((d / "manifest.json").read_text())
    plans, _ = _from_json(_to_json([plan], []))
    m["planned"] = plans[0].planned
    (d / "manifest.json").write_text(json.dumps(m))
    assert not (tmp_path / "build" / ".kda2").exists()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    run = lambda: subprocess.run([sys.executable, "-c", BLOCK_BUILD_PACKAGES, "tune", "--dry-run", str(d),
                                  "--tuning", str(tmp_path / "tuning")], capture_output=True, text=True,
                                 cwd=tmp_path, env=env)
    p = run()
    assert p.returncode == 0, p.stderr
    assert "kimi_linear_chunk / sm_90a on h200 (published)" in p.stdout and "PRUNED: spills" in p.stdout
    del m["planned"]
    (d / "manifest.json").write_text(json.dumps(m))
    p = run()
    assert p.returncode != 0 and "the manifest names no plan" in p.stderr and "Traceback" not in p.stderr


def test_missing_plan_without_build_packages_names_the_fix(built, tmp_path, monkeypatch) -> None:
    """On a GPU host with only the runtime, tune reads the profile from the plan cache. When the cache holds
    another spec's plans (a later build of other specs replaced it), re-planning would import pydantic: the
    error names the cache, the spec and the two ways out instead of a traceback."""
    d, _ = built
    (tmp_path / "build" / ".kda2").mkdir()
    (tmp_path / "build" / ".kda2" / "plan-cache.json").write_text(json.dumps({"plans": []}))

    def no_pydantic(*a, **k):
        raise ModuleNotFoundError("No module named 'pydantic'", name="pydantic")

    monkeypatch.setattr(tune, "_profile_for", no_pydantic)
    with pytest.raises(tune.TuneError) as e:
        tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tmp_path / "tuning"))
    msg = str(e.value)
    assert "plan-cache.json holds no plan of kimi_linear_chunk / sm_90a" in msg and "pydantic" in msg
    assert "one `kda2 build --candidates all`" in msg and "kda2[build]" in msg


def test_a_build_of_some_specs_keeps_the_others_plans_for_tune(tmp_path) -> None:
    """`kda2 build A` then `kda2 build B` in one tree: the plan cache plans B only, yet keeps A's last plan, so
    kda2 tune on a runtime-only host still finds the profile and budget A's library was built with."""
    rules, build = str(REPO / "rules"), str(tmp_path / "build")
    load_plans(str(SPECS), rules, build, only=["kimi_linear_chunk"])
    plans, _ = load_plans(str(SPECS), rules, build, only=["small_head_recurrent"])
    assert {p.spec.name for p in plans} == {"small_head_recurrent"}  # the build still plans only what it builds
    data = json.loads((tmp_path / "build" / ".kda2" / "plan-cache.json").read_text())
    assert {p["spec"]["name"] for p in data["other_plans"]} == {"kimi_linear_chunk"}
    found = tune._from_plan_cache(tmp_path / "build" / "kimi_linear_chunk" / "sm_90a" / "manifest.json",
                                  "kimi_linear_chunk", "sm_90a")
    assert found is not None and found[0].name == "h200"
    load_plans(str(SPECS), rules, build, only=["kimi_linear_chunk"])  # planned again: not kept twice
    data = json.loads((tmp_path / "build" / ".kda2" / "plan-cache.json").read_text())
    assert [p["spec"]["name"] for p in data["other_plans"]] == ["small_head_recurrent"] * len(data["other_plans"])


def test_measure_checks_a_persistent_candidate_where_its_tiles_outnumber_the_ctas(monkeypatch) -> None:
    """measure(): the small check is one tile per CTA, so a persistent candidate is also checked at
    PERSISTENT_CHECK_N sequences (its tile loop); a wrong result there is a `wrong_result` failure naming the shape,
    and a grid candidate is not checked there. torch, the library and the reference are stand-ins."""
    import types

    from kda2.bench import timing
    from kda2.runtime import loader

    cuda = types.SimpleNamespace(current_device=lambda: 0, synchronize=lambda: None,
                                 current_stream=lambda: types.SimpleNamespace(cuda_stream=0))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    launched: list[tuple[int, int]] = []
    lib = types.SimpleNamespace(preload=lambda dev: None,
                                launch_variant=lambda idx, args, stream: launched.append((idx, args["N"])))
    monkeypatch.setattr(loader, "load", lambda manifest: lib)
    pools: list[bool] = []  # how each timed case holds its states (checks: always h0 -> ht)
    monkeypatch.setattr(tune, "_case", lambda torch, abi, cfg, feats, N, T, H, HV, seed, pool=False, lengths=None: (
        pools.append(pool) or {"args": {"N": N}, "N": N, "T": T, "bytes": 1 << 20}))
    bad_n: list[int] = []
    monkeypatch.setattr(tune, "_reference_error", lambda c: 1.0 if c["N"] in bad_n else 1e-4)

    timed: list[tuple[str, int, int]] = []  # (method, N of the case, input sets)

    class FakeTimer:
        def __init__(self, torch):
            pass

        def kernel(self, fn, n_sets, reps):
            fn(0)
            timed.append(("kernel", launched[-1][1], n_sets))
            return types.SimpleNamespace(median_ms=0.07)

        def graph(self, fn, n_sets, replays):
            fn(0)
            timed.append(("graph", launched[-1][1], n_sets))
            return types.SimpleNamespace(median_ms=0.004)

    monkeypatch.setattr(timing, "Timer", FakeTimer)
    cfg = {"family": "recurrent", "k": 128, "v": 128, "state_layout": "k_first", "persistent": True}
    task = {"manifest": "m.json", "config": cfg, "index": 5, "features": {}, "bucket": 1}
    got = tune.measure(task, quick=True)
    assert "failure" not in got and set(got["classes"]) == {"decode-n256", "decode-n64", "decode-n1"}, got
    # the one-sequence class is timed under graph replay over more input sets (model.Workload.graph), the others not
    assert [(m, n) for m, n, _ in timed] == [("kernel", 256), ("kernel", 64), ("graph", 1)], timed
    assert got["classes"]["decode-n1"] == 4.0 and timed[-1][2] > 8, (got, timed)
    checks = [n for _, n in launched if n not in (256, 64, 1)]
    assert checks == [2, tune.PERSISTENT_CHECK_N]
    # the checks run h0 -> ht; a decode bucket is timed in place through a pool, as a serving step runs it
    assert pools[:2] == [False, False] and pools[2:] and all(pools[2:]), pools
    bad_n.append(tune.PERSISTENT_CHECK_N)
    launched.clear()
    got = tune.measure(task, quick=True)
    assert got["failure"] == "wrong_result" and got["shape"]["N"] == tune.PERSISTENT_CHECK_N, got
    assert "tiles > resident CTAs" in got["detail"]
    launched.clear()
    got = tune.measure({**task, "config": {**cfg, "persistent": False}}, quick=True)
    assert "failure" not in got and [n for _, n in launched if n not in (256, 64, 1)] == [2]
    pools.clear()
    got = tune.measure({**task, "bucket": 64, "config": {**cfg, "persistent": False}}, quick=True)
    assert "failure" not in got and pools and not any(pools), pools  # a prefill bucket: h0 -> ht


def test_split_rows_are_timed_and_the_record_sets_their_split(built, tmp_path, monkeypatch) -> None:
    """Each task carries the rows of its bucket the agents would split (the row's fewest chains, the agents'
    segments); the record keeps, per class, the segments its winner was fastest with (unsplit included), and the
    build routes those rows with that split."""
    from kda2.plan.model import workloads

    d, plan = built
    tuning = tmp_path / "tuning"
    monkeypatch.setattr(tune, "_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(tune, "_torch_version", lambda: "test")
    g = tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tuning))
    agents = {(r["state_layout"], r["bucket"], r["class"]): r["split"] for r in plan.dispatch}
    for t in g.tasks:
        layout = t.route.split(":")[0]
        assert {c: s["segments"] for c, s in t.splits.items()} == {
            c: n for (lay, b, c), n in agents.items() if lay == layout and b == t.bucket and n > 1}, t.route
    split_classes = {c for t in g.tasks for c in t.splits}
    assert split_classes == {workloads("chunk", 8192)[0].name, workloads("chunk", 65536)[0].name}
    listed: list[str] = []
    tune.describe(g, listed.append)   # the dry run names each candidate's split timings
    one = next(t for t in g.tasks if t.bucket == 65536 and not t.pruned)
    seg = one.splits[workloads("chunk", 65536)[0].name]["segments"]
    assert any(line.strip().startswith(one.variant) and f"split {'/'.join(map(str, tune.split_choices(seg)))}" in line
               for line in listed), listed
    assert tune.split_choices(16) == [16, 8, 1] and tune.split_choices(4) == [4, 1]
    # fake timings: at 65536 the half split is fastest, at 8192 unsplit beats the split
    fast = {workloads("chunk", 65536)[0].name: {"16": 300.0, "8": 280.0, "1": 900.0},
            workloads("chunk", 8192)[0].name: {"4": 100.0, "1": 90.0}}
    results: dict[str, dict] = {}
    for t in g.tasks:  # (one result per variant for all its rows: the fake executor does not tell routes apart)
        us = 100.0 + t.config["block_v"]
        r = results.setdefault(t.variant, {"us": us, "error": 1e-3, "splits": {},
                                           "classes": {w.name: us for b in (2048, 8192, 65536)
                                                       for w in workloads("chunk", b)}})
        r["splits"].update({c: {"segments": s["segments"], "shape": {"N": 1, "T": t.bucket, "H": 1}, "us": fast[c]}
                            for c, s in t.splits.items()})
    monkeypatch.setattr(tune, "_executor", fake_executor(results, []))
    lines: list[str] = []
    rec = tune.tune_group(g, tuning_dir=str(tuning), log=lines.append)
    assert rec is not None
    classes = rec["routes"]["k_first:65536"]["classes"][workloads("chunk", 65536)[0].name]
    assert classes["split"]["segments"] == 8 and classes["split"]["us"] == fast[workloads("chunk", 65536)[0].name]
    assert rec["routes"]["k_first:8192"]["classes"][workloads("chunk", 8192)[0].name]["split"]["segments"] == 1
    assert "split" not in rec["routes"]["k_first:2048"]["classes"][workloads("chunk", 2048)[0].name]
    assert any("split at N=1 T=65536 H=1" in line and "-> split<=8" in line for line in lines), lines
    plans, _ = load_plans(str(KIMI_CHUNK.parent), str(REPO / "rules"), str(tmp_path / "b"), ["kimi_linear_chunk"],
                          str(REPO / "profiles"), str(tuning))
    rows = {(r["state_layout"], r["bucket"], r["class"]): r for r in next(p for p in plans if p.arch == "sm_90a").dispatch}
    assert (rows[("k_first", 65536, workloads("chunk", 65536)[0].name)]["split"],
            rows[("k_first", 65536, workloads("chunk", 65536)[0].name)]["split_by"]) == (8, "tune")
    assert rows[("k_first", 8192, workloads("chunk", 8192)[0].name)]["split"] == 1
    assert rows[("k_first", 2048, workloads("chunk", 2048)[0].name)]["split_by"] == "agents"


def test_measure_times_a_split_row_at_its_fewest_chains(monkeypatch) -> None:
    """measure(): a chunk candidate's split row is timed as one sequence of the bucket's length on the row's fewest
    chains, with explicit splits (the agents' segments, half, unsplit) whose workspace holds the split region;
    torch, the library and the reference are stand-ins."""
    import types

    from kda2.bench import timing
    from kda2.runtime import loader

    cuda = types.SimpleNamespace(current_device=lambda: 0, synchronize=lambda: None,
                                 current_stream=lambda: types.SimpleNamespace(cuda_stream=0))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    launched: list[dict] = []
    lib = types.SimpleNamespace(preload=lambda dev: None, launch_variant=lambda idx, args, stream: launched.append(args))
    monkeypatch.setattr(loader, "load", lambda manifest: lib)
    monkeypatch.setattr(tune, "_case", lambda torch, abi, cfg, feats, N, T, H, HV, seed, pool=False, split=0,
                        lengths=None: {"args": {"N": N, "T": T, "H": H, "split": split, "lengths": lengths},
                                       "bytes": 1 << 20})
    monkeypatch.setattr(tune, "_reference_error", lambda c: 1e-4)
    ms = {16: 0.3, 8: 0.25, 1: 2.0}

    class FakeTimer:
        def __init__(self, torch):
            pass

        def kernel(self, fn, n_sets, reps):
            fn(0)
            a = launched[-1]
            return types.SimpleNamespace(median_ms=ms[a["split"]] if a["split"] else 1.0)

    monkeypatch.setattr(timing, "Timer", FakeTimer)
    cfg = {"family": "chunk", "k": 128, "v": 128, "state_layout": "k_first", "block_v": 64}
    task = {"manifest": "m.json", "config": cfg, "index": 3, "features": {}, "bucket": 65536,
            "splits": {"prefill-n1": {"chains": 1, "segments": 16}}}
    got = tune.measure(task, quick=True)
    assert got["splits"] == {"prefill-n1": {"segments": 16, "shape": {"N": 1, "T": 65536, "H": 1},
                                            "us": {"16": 300.0, "8": 250.0, "1": 2000.0}}}, got
    split_launches = [(a["N"], a["T"], a["H"], a["split"]) for a in launched if a["split"]]
    assert sorted(set(split_launches)) == [(1, 65536, 1, 1), (1, 65536, 1, 8), (1, 65536, 1, 16)]
    # the class timings leave the split to the library (split 0), which a workspace of the slots keeps unsplit
    assert {a["split"] for a in launched if a["T"] != 65536 or a["H"] != 1} == {0}
    # at 8192 the wide class is timed as the varlen batch it stands for (P4's packing), the first one dense
    from kda2.plan.model import workloads

    launched.clear()
    tune.measure({**task, "bucket": 8192, "splits": {}}, quick=True)
    by_class = {(a["N"], a["H"], a["lengths"]) for a in launched}
    first, mixed = workloads("chunk", 8192)
    assert {(first.N, first.H, None), (mixed.N, mixed.H, mixed.lengths)} <= by_class and mixed.lengths
    assert {c for c in by_class if c[2]} == {(mixed.N, mixed.H, mixed.lengths)}


# ---- the run's edges: --time-limit, --record, Ctrl-C, a hand-edited partial record ---------------------

def _stub_gpu(monkeypatch, results: dict[str, dict] | None = None, seen: list[str] | None = None) -> None:
    monkeypatch.setattr(tune, "gpu_available", lambda: None)
    monkeypatch.setattr(tune, "_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(tune, "_torch_version", lambda: "test")
    if results is not None:
        monkeypatch.setattr(tune, "_executor", fake_executor(results, [] if seen is None else seen))


def test_time_limit_must_be_positive(built, tmp_path, monkeypatch, capsys) -> None:
    """--time-limit 0 meant no limit and -5 was taken: both are refused at parse time with the allowed range."""
    from kda2.tools.cli import main as cli_main

    d, plan = built
    for bad in ("0", "-5", "nan", "soon"):
        with pytest.raises(SystemExit) as e:
            cli_main(["tune", str(d), "--time-limit", bad])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"argument --time-limit: '{bad}': allowed: a number of seconds > 0" in err, err
    with pytest.raises(tune.TuneError, match=r"--time-limit 0: allowed: a number of seconds > 0"):
        tune.main([str(d)], specs_dir=str(SPECS), tuning_dir=str(tmp_path / "t"), time_limit=0)
    # a positive limit is a deadline (the first candidate is over it here: the run stops, the partial is kept)
    _stub_gpu(monkeypatch, {v.id: {"us": 10.0, "error": 1e-3, "classes": {}} for v in plan.variants})
    monkeypatch.setattr(tune.time, "monotonic", iter(range(0, 10**6, 1000)).__next__)
    rc = tune.main([str(d)], specs_dir=str(SPECS), tuning_dir=str(tmp_path / "t"), time_limit=0.5,
                   log=lambda *_: None)
    assert rc == 3 and (tmp_path / "t" / "kimi_linear_chunk.h200.partial.json").is_file()


def test_an_unwritable_record_fails_before_any_timing(built, tmp_path, monkeypatch, capsys) -> None:
    from kda2.tools.cli import main as cli_main

    d, plan = built
    seen: list[str] = []
    _stub_gpu(monkeypatch, {v.id: {"us": 10.0, "error": 1e-3, "classes": {}} for v in plan.variants}, seen)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for bad, why in (("/proc/nope/x.json", "cannot be written: creating a file in /proc fails"),
                     (blocker / "x.json", f"cannot be written: {blocker} is not a directory"),
                     (tmp_path, "is a directory")):
        with pytest.raises(tune.TuneError, match=re.escape(f"--record {bad}: {why}")):
            tune.main([str(d)], specs_dir=str(SPECS), tuning_dir=str(tmp_path / "t"), record=str(bad))
        assert seen == []
        rc = cli_main(["tune", str(d), "--specs", str(SPECS), "--tuning", str(tmp_path / "t"), "--record", str(bad)])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("kda2: error: --record") and len(err.splitlines()) == 1, err
    assert seen == [] and not (tmp_path / "t").exists()
    # a record in a directory that does not exist yet is written (the writer creates it), with where the build reads
    rec = tmp_path / "new" / "dir" / "r.json"
    lines: list[str] = []
    assert tune.main([str(d)], specs_dir=str(SPECS), tuning_dir=str(tmp_path / "t"), record=str(rec),
                     log=lines.append) in (0, 1)
    assert rec.is_file() and seen
    assert not (tmp_path / "t" / "kimi_linear_chunk.h200.json").exists()
    hint = lines[-1]
    assert str(tmp_path / "t" / "kimi_linear_chunk.h200.json") in hint and f"not by {rec}" in hint, lines
    assert "TUNING_DIR" in hint and "copy it there" in hint
    # the record the build reads: no such note
    lines.clear()
    tune.main([str(d)], specs_dir=str(SPECS), tuning_dir=str(tmp_path / "t"), force=True,
              record=str(tmp_path / "t" / "kimi_linear_chunk.h200.json"), log=lines.append)
    assert not any("note:" in line for line in lines), lines


def test_ctrl_c_names_the_partial_record_under_tuning(built, tmp_path, monkeypatch, capsys) -> None:
    from kda2.tools.cli import main as cli_main

    d, plan = built

    def interrupted(n, workers, log):
        def run(tasks, quick, l2):
            yield tasks[0], {"us": 10.0, "error": 1e-3, "classes": {}}
            raise KeyboardInterrupt
        return run, (lambda: None), "fake"

    _stub_gpu(monkeypatch)
    monkeypatch.setattr(tune, "_executor", interrupted)
    tuning = tmp_path / "elsewhere"
    rc = cli_main(["tune", str(d), "--specs", str(SPECS), "--tuning", str(tuning)])
    err = capsys.readouterr().err
    part = tuning / "kimi_linear_chunk.h200.partial.json"
    assert rc == 2 and err == f"kda2: error: interrupted; what was measured is kept in {part}, re-run to resume\n"
    assert part.is_file()


def test_a_malformed_partial_record_starts_afresh_and_an_untimed_entry_is_measured_again(built, tmp_path,
                                                                                          monkeypatch) -> None:
    d, plan = built
    tuning = tmp_path / "tuning"
    results = {v.id: {"us": 100.0 + i, "error": 1e-3, "classes": {}} for i, v in enumerate(plan.variants)}
    seen: list[str] = []
    _stub_gpu(monkeypatch, results, seen)
    g = tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tuning))
    live = [t for t in g.tasks if not t.pruned]
    part = tuning / "kimi_linear_chunk.h200.partial.json"

    def run_with(done) -> list[str]:
        tuning.mkdir(exist_ok=True)
        part.write_text(json.dumps({"schema": 2, "library_sha256": g.library_sha256, "done": done}))
        seen.clear()
        lines: list[str] = []
        assert tune.tune_group(g, tuning_dir=str(tuning), log=lines.append) is not None
        return lines

    t0, t1 = live[0], live[1]
    for done, what in (([], "'done' is [], not an object of routes"),
                       ({t0.route: {t0.variant: {"us": "fast"}}}, f'done.{t0.route}.{t0.variant}.us is "fast"'),
                       ({t0.route: {t0.variant: {"us": 5.0, "classes": {"x": "1"}}}},
                        f"done.{t0.route}.{t0.variant}.classes is"),
                       ({t0.route: [1]}, f"done.{t0.route} is [1]")):
        lines = run_with(done)
        assert any(line.startswith(f"kda2 tune: {part} is unreadable ({what}") and line.endswith("; starting afresh")
                   for line in lines), (what, lines)
        assert len(seen) == len(live)   # everything measured afresh
    # an entry without "us" is measured again; a rejected one ("us": null, "rejected") is not
    rejected = {"us": None, "rejected": "wrong_result", "error": 0.3, "model_us": 1.0}
    done: dict[str, dict] = {}
    done.setdefault(t0.route, {})[t0.variant] = {"model_us": 1.0, "error": 1e-3}
    done.setdefault(t1.route, {})[t1.variant] = rejected
    lines = run_with(done)
    assert f"{t0.route}/{t0.variant}" in seen and f"{t1.route}/{t1.variant}" not in seen
    assert any("1 entry without a time ('us') will be measured again" in line and t0.variant in line
               for line in lines), lines


def test_a_dispatch_row_naming_a_missing_variant_is_one_line(built, tmp_path) -> None:
    """A manifest whose dispatch names a variant its `variants` lack (edited or damaged after the build) was a
    KeyError traceback in groups_from_manifest; it is one line naming the manifest, the row, the id and the fix."""
    d, plan = built
    m = json.loads((d / "manifest.json").read_text())
    row = next(i for i, r in enumerate(m["dispatch"]) if len(r["candidates"]) > 1)
    r = m["dispatch"][row]
    for gone in (next(c for c in r["candidates"] if c != r["variant"]), r["variant"]):   # a candidate, the route
        broken = dict(m, variants=[v for v in m["variants"] if v["id"] != gone])
        (d / "manifest.json").write_text(json.dumps(broken))
        p = kda2("tune", "--dry-run", d, "--tuning", tmp_path / "tuning")
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        (line,) = p.stderr.splitlines()
        first = next(i for i, x in enumerate(m["dispatch"]) if gone in [x["variant"], *x["candidates"]])
        assert line.startswith(f"kda2: error: {d / 'manifest.json'}: dispatch row {first} "), line
        assert f"names variant '{gone}'" in line and "rebuild it (`kda2 build --candidates all kimi_linear_chunk`)" \
            in line, line
    (d / "manifest.json").write_text(json.dumps(dict(m, dispatch=[{"bucket": 1}])))
    with pytest.raises(tune.TuneError, match=r"dispatch row 0 is not a dispatch row"):
        tune.groups_from_manifest(d, specs_dir=str(SPECS), tuning_dir=str(tmp_path / "tuning"))


def test_margin_and_workers_are_checked(built, tmp_path, capsys) -> None:
    """--margin -1 made every candidate a failure and --workers 0 ran one GPU unsaid: both are refused at parse time
    with what is allowed, as --time-limit is; tune.main refuses them too."""
    from kda2.tools.cli import build_parser, main as cli_main

    d, _ = built
    for opt, bad, want in (("--margin", "-1", "a fraction >= 0"), ("--margin", "nan", "a fraction >= 0"),
                           ("--margin", "x", "a fraction >= 0"), ("--workers", "0", "a whole number of GPUs >= 1"),
                           ("--workers", "-2", "a whole number of GPUs >= 1"),
                           ("--workers", "1.5", "a whole number of GPUs >= 1")):
        with pytest.raises(SystemExit) as e:
            cli_main(["tune", str(d), opt, bad])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {opt}: '{bad}': allowed: {want}" in err, err
    args = build_parser().parse_args(["tune", str(d), "--margin", "0", "--workers", "1"])
    assert args.margin == 0.0 and args.workers == 1
    with pytest.raises(tune.TuneError, match=r"--margin -1: allowed: a fraction >= 0"):
        tune.main([str(d)], specs_dir=str(SPECS), tuning_dir=str(tmp_path / "t"), margin=-1)
    with pytest.raises(tune.TuneError, match=r"--workers 0: allowed: a whole number of GPUs >= 1"):
        tune.main([str(d)], specs_dir=str(SPECS), tuning_dir=str(tmp_path / "t"), workers=0)
