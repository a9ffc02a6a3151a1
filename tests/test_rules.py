"""kda2.spec.rules: matching, actions, digests that ignore formatting, one-line errors, the lock."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kda2.spec.rules import (LOCK_NAME, MATCHER_VERSION, Applied, RuleError, apply_rules, check_lock,
                        load_rule, load_rules, rules_digest, unmatched, write_lock)

REPO = Path(__file__).resolve().parents[1]
REAL_RULES = REPO / "rules"

CONFIG: dict[str, Any] = {
    "family": "recurrent", "arch": "sm_90a", "k": 128, "v": 128, "bucket": 64,
    "state_layout": "k_first", "v_per_warp": 8, "warps": 4, "staging": "smem", "k_map": "strided",
    "reduce": "butterfly", "gate_modes": ("lower_bound", "precomputed", "softplus"),
    "qk_l2norm": True, "beta_sigmoid": True, "varlen": True,
}


def cfg(**changes: Any) -> dict[str, Any]:
    return {**CONFIG, **changes}


def rule_text(id: int, body: str, version: int = 1) -> str:
    return f"id: {id}\nversion: {version}\n{body}reason: because\nevidence: test log\n"


def write_rule(directory: Path, name: str, body: str, version: int = 1) -> Path:
    path = directory / name
    path.write_text(rule_text(int(name[:4]), body, version))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(RuleError) as info:
        load_rule(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: "), msg
    return msg


# --- the real rules ----------------------------------------------------------------------------

#: Two rules as test data (the repository's own rules come from real failures, via `kda2 rules propose`).
FIXTURE_RULES = {
    "0001-no-smem-staging-v-first.yaml": (
        "id: 1\nversion: 1\nmatch:\n  family: recurrent\n  config: {state_layout: v_first, staging: smem}\n"
        "action: forbid\nreason: >-\n  V-first rows are contiguous along K, so smem staging only adds a round trip.\n"
        "evidence: \"test fixture\"\n"),
    "0002-sm80-warps.yaml": (
        "id: 2\nversion: 1\nmatch:\n  arch: sm_80\naction: flags\nflags: [\"-Xptxas=-warn-spills\"]\n"
        "reason: ptxas must report any spill on the Ampere path.\nevidence: \"test fixture\"\n"),
}


def test_real_rules_load_and_are_locked() -> None:
    rules = load_rules(REAL_RULES)
    assert check_lock(REAL_RULES) == []
    assert all(r.evidence.strip() and r.reason.strip() for r in rules)


def test_fixture_rules_match_and_apply(tmp_path: Path) -> None:
    rules = load_rules(copy_rules(tmp_path))
    assert [r.id for r in rules] == [1, 2]
    forbid_smem_vf = rules[0]
    assert forbid_smem_vf.action == "forbid"
    assert forbid_smem_vf.matches(cfg(state_layout="v_first", staging="smem"))
    assert not forbid_smem_vf.matches(cfg(state_layout="v_first", staging="direct"))
    assert not forbid_smem_vf.matches(cfg(state_layout="k_first", staging="smem"))
    applied = apply_rules(rules, cfg(arch="sm_80", staging="direct"))
    assert "-Xptxas=-warn-spills" in applied.flags


# --- matching ----------------------------------------------------------------------------------

def test_match_scalar_list_and_config(tmp_path: Path) -> None:
    scalar = load_rule(write_rule(tmp_path, "0001-a.yaml", "match: {arch: sm_80}\naction: forbid\n"))
    assert scalar.matches(cfg(arch="sm_80")) and not scalar.matches(cfg(arch="sm_90a"))

    any_of = load_rule(write_rule(tmp_path, "0002-b.yaml", "match: {bucket: [1, 64]}\naction: forbid\n"))
    assert any_of.matches(cfg(bucket=1)) and any_of.matches(cfg(bucket=64))
    assert not any_of.matches(cfg(bucket=1024))

    both = load_rule(write_rule(tmp_path, "0003-c.yaml", (
        "match:\n  arch: [sm_80, sm_86]\n  family: recurrent\n"
        "  config: {staging: smem, v_per_warp: [8, 16]}\naction: forbid\n")))
    assert both.matches(cfg(arch="sm_86", staging="smem", v_per_warp=16))
    assert not both.matches(cfg(arch="sm_86", staging="direct", v_per_warp=16))  # one predicate fails
    assert not both.matches(cfg(arch="sm_86", staging="smem", v_per_warp=4))
    assert not both.matches(cfg(arch="sm_90", staging="smem", v_per_warp=16))
    partial = {k: v for k, v in cfg(arch="sm_80", v_per_warp=8).items() if k != "staging"}
    assert not both.matches(partial)  # a field the config lacks cannot hold

    everything = load_rule(write_rule(tmp_path, "0004-d.yaml", "match: {}\naction: forbid\n"))
    assert everything.matches(CONFIG)


def test_match_list_valued_field(tmp_path: Path) -> None:
    one = load_rule(write_rule(tmp_path, "0001-a.yaml", (
        "match: {config: {gate_modes: [lower_bound, precomputed, softplus]}}\naction: forbid\n")))
    assert one.matches(CONFIG)  # the config holds a tuple, the rule a list: same value
    assert not one.matches(cfg(gate_modes=("softplus",)))
    any_of = load_rule(write_rule(tmp_path, "0002-b.yaml", (
        "match: {config: {gate_modes: [[softplus], [precomputed]]}}\naction: forbid\n")))
    assert any_of.matches(cfg(gate_modes=["softplus"]))
    assert not any_of.matches(CONFIG)


def test_bool_does_not_match_int(tmp_path: Path) -> None:
    msg = load_error(write_rule(tmp_path, "0001-a.yaml", "match: {config: {qk_l2norm: 1}}\naction: forbid\n"))
    assert "match.config.qk_l2norm: not an allowed value; allowed: false, true (got 1)" in msg
    msg = load_error(write_rule(tmp_path, "0001-a.yaml", "match: {config: {warps: true}}\naction: forbid\n"))
    assert "match.config.warps:" in msg and "(got true)" in msg


# --- actions -----------------------------------------------------------------------------------

def test_forbid_set_flags_in_id_order(tmp_path: Path) -> None:
    write_rule(tmp_path, "0001-set.yaml", "match: {arch: sm_80, config: {v_per_warp: 16}}\n"
                                          "action: set\nset: {v_per_warp: 8, staging: direct}\n")
    write_rule(tmp_path, "0002-flags.yaml", "match: {config: {v_per_warp: 8}}\n"
                                            "action: flags\nflags: [-Xptxas=-O3, -lineinfo]\n")
    write_rule(tmp_path, "0003-forbid.yaml", "match: {bucket: 1024}\naction: forbid\n")
    write_rule(tmp_path, "0004-late-flags.yaml", "match: {}\naction: flags\nflags: [-DLATE]\n")
    rules = load_rules(tmp_path)

    # rule 2 sees the config as rule 1 left it
    applied = apply_rules(list(reversed(rules)), cfg(arch="sm_80", v_per_warp=16))
    assert isinstance(applied, Applied)
    assert applied.config == cfg(arch="sm_80", v_per_warp=8, staging="direct")
    assert applied.flags == ("-Xptxas=-O3", "-lineinfo", "-DLATE")
    assert [r.id for r in applied.matched] == [1, 2, 4]

    # forbid stops: the later flags rule is not reached
    applied = apply_rules(rules, cfg(bucket=1024, v_per_warp=4))
    assert applied.config is None
    assert [r.id for r in applied.matched] == [3]

    # the input is not modified
    original = cfg(arch="sm_80", v_per_warp=16)
    apply_rules(rules, original)
    assert original == cfg(arch="sm_80", v_per_warp=16)


CHUNK_CONFIG: dict[str, Any] = {
    "family": "chunk", "arch": "sm_80", "k": 128, "v": 128, "bucket": 8192, "state_layout": "v_first",
    "chunk": 64, "block_v": 64, "stages": 2, "gate_modes": ("lower_bound", "precomputed", "softplus"),
    "qk_l2norm": True, "beta_sigmoid": True, "varlen": True,
}


def test_rules_across_families(tmp_path: Path) -> None:
    write_rule(tmp_path, "0001-set.yaml", "match: {arch: sm_80}\naction: set\nset: {v_per_warp: 8}\n")
    write_rule(tmp_path, "0002-bv.yaml", "match: {arch: sm_80}\naction: set\nset: {block_v: 32}\n")
    write_rule(tmp_path, "0003-k.yaml", "match: {config: {k: 32}}\naction: forbid\n")  # recurrent-only value
    write_rule(tmp_path, "0004-fam.yaml", "match: {family: [recurrent, chunk], arch: sm_80}\n"
                                          "action: flags\nflags: [-DBOTH]\n")
    rules = load_rules(tmp_path)
    # a set rule never grafts another family's knob onto a config
    chunk = apply_rules(rules, CHUNK_CONFIG)
    assert chunk.config == {**CHUNK_CONFIG, "block_v": 32} and [r.id for r in chunk.matched] == [2, 4]
    rec = apply_rules(rules, cfg(arch="sm_80"))
    assert rec.config == cfg(arch="sm_80", v_per_warp=8) and [r.id for r in rec.matched] == [1, 4]
    assert chunk.flags == rec.flags == ("-DBOTH",)


def test_no_match_digest_is_constant(tmp_path: Path) -> None:
    write_rule(tmp_path, "0001-a.yaml", "match: {arch: sm_80}\naction: forbid\n")
    rules = load_rules(tmp_path)
    a = apply_rules(rules, cfg(bucket=1))
    b = apply_rules([], cfg(bucket=4096, warps=8))
    assert a.matched == () and a.config == cfg(bucket=1) and a.flags == ()
    assert a.digest == b.digest == rules_digest([])
    assert apply_rules(rules, cfg(arch="sm_80")).digest != a.digest


def test_digest_covers_only_matched_rules(tmp_path: Path) -> None:
    write_rule(tmp_path, "0001-a.yaml", "match: {arch: sm_80}\naction: flags\nflags: [-DA]\n")
    before = apply_rules(load_rules(tmp_path), cfg(arch="sm_80")).digest
    write_rule(tmp_path, "0002-b.yaml", "match: {arch: sm_90}\naction: forbid\n")
    assert apply_rules(load_rules(tmp_path), cfg(arch="sm_80")).digest == before
    write_rule(tmp_path, "0003-c.yaml", "match: {arch: sm_80}\naction: flags\nflags: [-DC]\n")
    assert apply_rules(load_rules(tmp_path), cfg(arch="sm_80")).digest != before


def test_matcher_version_is_in_the_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MATCHER_VERSION == 2
    before = rules_digest([])
    monkeypatch.setattr("kda2.spec.rules.MATCHER_VERSION", 3)
    assert rules_digest([]) != before


# --- digests and formatting --------------------------------------------------------------------

def test_body_digest_ignores_formatting(tmp_path: Path) -> None:
    plain = tmp_path / "0007-x.yaml"
    plain.write_text("id: 7\nversion: 1\nmatch: {arch: sm_80, config: {staging: smem}}\n"
                     "action: set\nset: {staging: direct}\nreason: why\nevidence: log\n")
    reformatted = tmp_path / "sub" / "0007-x.yaml"
    reformatted.parent.mkdir()
    reformatted.write_text(
        "# a comment\nevidence:   log   # trailing comment\nreason: 'why'\n\n"
        "action: set\nset:\n    staging: direct\nmatch:\n  config:\n    staging: smem\n"
        "  arch: sm_80\nversion: 1\nid: 7\n")
    a, b = load_rule(plain), load_rule(reformatted)
    assert a.body() == b.body()
    assert a.body_digest() == b.body_digest()
    assert "path" not in a.body() and a.path != b.path
    assert apply_rules([a], cfg(arch="sm_80")).digest == apply_rules([b], cfg(arch="sm_80")).digest

    edited = tmp_path / "0007-y.yaml"
    edited.write_text(plain.read_text().replace("reason: why", "reason: why not"))
    assert load_rule(edited).body_digest() != a.body_digest()
    assert apply_rules([load_rule(edited)], cfg(arch="sm_80")).digest != \
        apply_rules([a], cfg(arch="sm_80")).digest


# --- errors ------------------------------------------------------------------------------------

def test_unknown_match_config_field(tmp_path: Path) -> None:
    path = write_rule(tmp_path, "0003-x.yaml", "match: {config: {foo: 1}}\naction: forbid\n")
    msg = load_error(path)
    assert msg.startswith(f"{path}: match.config.foo: unknown field 'foo'; allowed: ")
    assert "v_per_warp" in msg and "staging" in msg


def test_unknown_match_key_and_top_level_field(tmp_path: Path) -> None:
    msg = load_error(write_rule(tmp_path, "0003-x.yaml", "match: {gpu: h200}\naction: forbid\n"))
    assert "match.gpu: unknown field 'gpu'; allowed: arch, family, bucket, profile, config" in msg
    msg = load_error(write_rule(tmp_path, "0003-x.yaml", "match: {}\naction: forbid\nseverity: high\n"))
    assert "severity: unknown field 'severity'; allowed: id, version, match, action" in msg


@pytest.mark.parametrize("body, parts", [
    ("match: {arch: sm_75}\naction: forbid\n", ("match.arch: not an allowed value", "sm_80, sm_86", "(got 'sm_75')")),
    ("match: {arch: [sm_80, sm_70]}\naction: forbid\n", ("match.arch:", "(got 'sm_70')")),
    ("match: {arch: []}\naction: forbid\n", ("match.arch: must not be empty",)),
    ("match: {family: parallel}\naction: forbid\n", ("match.family:", "allowed: recurrent, chunk",
                                                     "(got 'parallel')")),
    ("match: {family: chunk, config: {block_v: 48}}\naction: forbid\n",
     ("match.config.block_v:", "allowed: 16, 32, 64, 128", "(got 48)")),
    ("match: {family: chunk, config: {v_per_warp: 8}}\naction: forbid\n",
     ("match.config.v_per_warp: unknown field 'v_per_warp'", "block_v")),
    ("match: {bucket: big}\naction: forbid\n", ("match.bucket:", "allowed: int", "(got 'big')")),
    # a bucket no spec can have: refused here, not only reported by `rules check` as matching no variant
    ("match: {bucket: -1}\naction: forbid\n", ("match.bucket: not an allowed value", "allowed: int in [1, 1048576]",
                                              "(got -1)")),
    ("match: {bucket: [1, 0]}\naction: forbid\n", ("match.bucket:", "(got 0)")),
    ("match: {bucket: 1048577}\naction: forbid\n", ("match.bucket:", "(got 1048577)")),
    ("match: {config: {staging: tma}}\naction: forbid\n", ("match.config.staging:", "allowed: smem, direct")),
    ("match: {config: {gate_modes: softplus}}\naction: forbid\n", ("match.config.gate_modes:", "allowed: list")),
    ("match: {}\naction: delete\n", ("action: not an allowed value", "allowed: forbid, set, flags")),
    ("match: {}\naction: set\n", ("set: required when action is 'set'",)),
    ("match: {}\naction: set\nset: {}\n", ("set: must not be empty",)),
    ("match: {}\naction: set\nset: {v_per_warp: 12}\n", ("set.v_per_warp:", "allowed: 2, 4, 8, 16", "(got 12)")),
    ("match: {}\naction: set\nset: {v_per_warp: [8, 16]}\n", ("set.v_per_warp:",)),
    ("match: {}\naction: set\nset: {tiles: 2}\n", ("set.tiles: unknown field 'tiles'",)),
    ("match: {}\naction: set\nset: {arch: sm_90}\n", ("set.arch: field 'arch' cannot be set", "allowed: k, v")),
    ("match: {}\naction: flags\n", ("flags: required when action is 'flags'",)),
    ("match: {}\naction: flags\nflags: []\n", ("flags: must not be empty",)),
    ("match: {}\naction: flags\nflags: [-Xptxas -v]\n", ("flags[0]:", "(got '-Xptxas -v')")),
    ("match: {}\naction: flags\nflags: [O3]\n", ("flags[0]: must start with '-'", "(did you mean '-O3'?)",
                                                 "allowed: one nvcc option", "(got 'O3')")),
    ("match: {}\naction: flags\nflags: [-Xptxas=-maxrregcount=32]\n",
     ("flags[0]: is overridden by the kernels' __launch_bounds__", "allowed: `set: {min_ctas: N}`")),
    ("match: {}\naction: flags\nflags: [--maxrregcount=64]\n", ("flags[0]: is overridden",)),
    ("match: {}\naction: forbid\nflags: [-O3]\n", ("flags: only allowed when action is 'flags'",)),
    ("match: {}\naction: forbid\nset: {warps: 2}\n", ("set: only allowed when action is 'set'",)),
    ("action: forbid\n", ("match: required field is missing",)),
])
def test_rule_field_errors(tmp_path: Path, body: str, parts: tuple[str, ...]) -> None:
    msg = load_error(write_rule(tmp_path, "0003-x.yaml", body))
    for part in parts:
        assert part in msg, (part, msg)


@pytest.mark.parametrize("text, part", [
    ("id: 3\nversion: 0\nmatch: {}\naction: forbid\nreason: r\nevidence: e\n", "version: out of range"),
    ("id: 3\nversion: 1\nmatch: {}\naction: forbid\nreason: '  '\nevidence: e\n", "reason: must not be blank"),
    ("id: 3\nversion: 1\nmatch: {}\naction: forbid\nreason: r\n", "evidence: required field is missing"),
    ("id: 4\nversion: 1\nmatch: {}\naction: forbid\nreason: r\nevidence: e\n",
     "id: must equal the number in the file name; allowed: 3 (got 4)"),
    ("id: 3\nversion: 1\nmatch: {arch: [sm_80}\n", "malformed YAML"),
])
def test_rule_file_errors(tmp_path: Path, text: str, part: str) -> None:
    path = tmp_path / "0003-x.yaml"
    path.write_text(text)
    with pytest.raises(RuleError) as info:
        load_rule(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path)) and part in msg, msg


@pytest.mark.parametrize("name", ["3-x.yaml", "0003_x.yaml", "0003-X.yaml", "0003-x.yml", "notes.txt"])
def test_bad_file_name(tmp_path: Path, name: str) -> None:
    write_rule(tmp_path, "0001-ok.yaml", "match: {}\naction: forbid\n")
    (tmp_path / name).write_text(rule_text(3, "match: {}\naction: forbid\n"))
    with pytest.raises(RuleError) as info:
        load_rules(tmp_path)
    msg = str(info.value)
    assert "\n" not in msg and name in msg and r"^\d{4}-[a-z0-9-]+\.yaml$" in msg, msg


def test_ignored_files_and_sorting(tmp_path: Path) -> None:
    write_rule(tmp_path, "0010-b.yaml", "match: {}\naction: forbid\n")
    write_rule(tmp_path, "0002-a.yaml", "match: {}\naction: forbid\n")
    (tmp_path / "README.md").write_text("# rules\n")
    (tmp_path / LOCK_NAME).write_text("{}\n")
    (tmp_path / ".0002-a.yaml.swp").write_text("editor junk")
    assert [r.id for r in load_rules(tmp_path)] == [2, 10]


def test_duplicate_ids(tmp_path: Path) -> None:
    write_rule(tmp_path, "0003-a.yaml", "match: {}\naction: forbid\n")
    write_rule(tmp_path, "0003-b.yaml", "match: {}\naction: forbid\n")
    with pytest.raises(RuleError, match=r"0003-b\.yaml: id: duplicate rule id 3 \(also .*0003-a\.yaml\)"):
        load_rules(tmp_path)


# --- unmatched ---------------------------------------------------------------------------------

def test_unmatched(tmp_path: Path) -> None:
    write_rule(tmp_path, "0001-a.yaml", "match: {arch: sm_80}\naction: set\nset: {warps: 2}\n")
    write_rule(tmp_path, "0002-b.yaml", "match: {config: {warps: 2}}\naction: flags\nflags: [-DB]\n")
    write_rule(tmp_path, "0003-c.yaml", "match: {arch: sm_86}\naction: forbid\n")
    rules = load_rules(tmp_path)
    # rule 2 only matches what rule 1 produced: still in use
    assert [r.id for r in unmatched(rules, [cfg(arch="sm_80")])] == [3]
    assert [r.id for r in unmatched(rules, [cfg(arch="sm_90a")])] == [1, 2, 3]
    assert unmatched(rules, [cfg(arch="sm_80"), cfg(arch="sm_86")]) == []
    assert [r.id for r in unmatched(rules, [])] == [1, 2, 3]


# --- lock --------------------------------------------------------------------------------------

def copy_rules(tmp_path: Path) -> Path:
    """A locked rules directory holding FIXTURE_RULES."""
    target = tmp_path / "rules"
    target.mkdir()
    for name, text in FIXTURE_RULES.items():
        (target / name).write_text(text)
    write_lock(target)
    return target


def test_lock_detects_body_change_without_bump(tmp_path: Path) -> None:
    rules_dir = copy_rules(tmp_path)
    assert check_lock(rules_dir) == []
    path = rules_dir / "0001-no-smem-staging-v-first.yaml"
    path.write_text(path.read_text().replace("smem staging only adds", "smem staging merely adds"))
    problems = check_lock(rules_dir)
    assert problems == [f"{path}: body changed without a version bump (locked version 1); "
                        "bump `version` and run `kda2 rules lock`"]
    with pytest.raises(RuleError, match="body changed without a version bump"):
        write_lock(rules_dir)

    path.write_text(path.read_text().replace("version: 1", "version: 2"))
    assert any("not locked" in p for p in check_lock(rules_dir))  # bumped, lock not yet rewritten
    assert write_lock(rules_dir) == rules_dir / LOCK_NAME
    assert check_lock(rules_dir) == []
    assert json.loads((rules_dir / LOCK_NAME).read_text())["0001"]["version"] == 2


def test_lock_ignores_formatting_edits(tmp_path: Path) -> None:
    rules_dir = copy_rules(tmp_path)
    path = rules_dir / "0002-sm80-warps.yaml"
    path.write_text("# reformatted\n\n" + path.read_text().replace("flags: [", "flags:   ["))
    assert check_lock(rules_dir) == []


def test_lock_version_lower_missing_entry_and_orphan(tmp_path: Path) -> None:
    rules_dir = copy_rules(tmp_path)
    lock_path = rules_dir / LOCK_NAME
    lock = json.loads(lock_path.read_text())
    lock["0001"]["version"] = 3
    lock["0042"] = {"version": 1, "digest": "0" * 64}
    lock_path.write_text(json.dumps(lock))
    write_rule(rules_dir, "0005-new.yaml", "match: {}\naction: forbid\n")
    problems = check_lock(rules_dir)
    assert len(problems) == 3, problems
    assert any("0001-no-smem-staging-v-first.yaml: version 1 is lower than the locked version 3" in p
               for p in problems)
    assert any("0005-new.yaml: not in" in p for p in problems)
    assert any("entry 0042 has no rule file" in p for p in problems)
    assert all("\n" not in p for p in problems)
    with pytest.raises(RuleError, match="lower than the locked version"):
        write_lock(rules_dir)


def test_write_lock_adds_new_rules_and_drops_orphans(tmp_path: Path) -> None:
    rules_dir = copy_rules(tmp_path)
    write_rule(rules_dir, "0005-new.yaml", "match: {}\naction: forbid\n")
    (rules_dir / "0002-sm80-warps.yaml").unlink()
    assert len(check_lock(rules_dir)) == 2
    write_lock(rules_dir)
    assert check_lock(rules_dir) == []
    assert sorted(json.loads((rules_dir / LOCK_NAME).read_text())) == ["0001", "0005"]


def test_missing_or_broken_lock(tmp_path: Path) -> None:
    rules_dir = copy_rules(tmp_path)
    (rules_dir / LOCK_NAME).unlink()
    assert check_lock(rules_dir) == [f"{rules_dir / LOCK_NAME}: missing; run `kda2 rules lock`"]
    (rules_dir / LOCK_NAME).write_text("{not json")
    assert "unreadable" in check_lock(rules_dir)[0]
    write_lock(rules_dir)
    assert check_lock(rules_dir) == []


def test_profile_scope_and_digests_of_rules_without_it(tmp_path: Path) -> None:
    """`match.profile` scopes a rule to one GPU model; a rule without it keeps the body (and so the locked
    digest) it had before the field existed."""
    plain = load_rule(write_rule(tmp_path, "0001-a.yaml", "match: {arch: sm_90a}\naction: forbid\n"))
    assert "profile" not in plain.body()["match"]
    scoped = load_rule(write_rule(tmp_path, "0002-b.yaml", "match: {profile: h200}\naction: forbid\n"))
    assert scoped.body()["match"]["profile"] == "h200"
    assert scoped.matches(cfg(profile="h200")) and not scoped.matches(cfg(profile="h100"))
    assert not scoped.matches(cfg())  # a config planned for no profile is not in its scope
    names = ", ".join(sorted(p.stem for p in (REPO / "profiles").glob("*.yaml")))
    msg = load_error(write_rule(tmp_path, "0003-c.yaml", "match: {profile: H200!}\naction: forbid\n"))
    assert f"match.profile: unknown profile (the profiles of {REPO / 'profiles'}); allowed: {names}" in msg, msg


def test_match_profile_names_a_known_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile the profiles directory lacks can never match: refused at load, listing the known ones (the
    planner's directory: KDA2_PROFILES_DIR, the checkout's profiles/, or the one passed in)."""
    rules = tmp_path / "rules"
    rules.mkdir()
    rule = write_rule(rules, "0001-a.yaml", "match: {family: chunk, profile: [a100, h300]}\naction: forbid\n")
    msg = load_error(rule)
    assert "match.profile: unknown profile" in msg and "allowed: a100, h100, h200" in msg and "(got 'h300')" in msg
    mine = tmp_path / "profiles"
    mine.mkdir()
    for name in ("a100", "h300"):  # only the file name counts here (load_profile checks the rest)
        (mine / f"{name}.yaml").write_text(f"name: {name}\n")
    assert load_rule(rule, profiles_dir=mine) is not None and load_rules(rules, profiles_dir=mine)
    (mine / "h300.yaml").rename(mine / "h200.yaml")
    with pytest.raises(RuleError, match=re.escape(f"match.profile: unknown profile (the profiles of {mine}); "
                                                  "allowed: a100, h200 (got 'h300')")):
        load_rules(rules, profiles_dir=mine)
    monkeypatch.setenv("KDA2_PROFILES_DIR", str(mine))
    assert "allowed: a100, h200 (got 'h300')" in load_error(rule)
    # no profiles directory at all: only the name's shape can be checked
    monkeypatch.setenv("KDA2_PROFILES_DIR", str(tmp_path / "none"))
    assert load_rule(rule).match.profile == ["a100", "h300"]
    msg = load_error(write_rule(tmp_path, "0002-b.yaml", "match: {profile: H200!}\naction: forbid\n"))
    assert "match.profile: not an allowed value; allowed: a profile name (got 'H200!')" in msg


def test_a_knob_left_out_matches_its_default(tmp_path: Path) -> None:
    """A chunk config leaves state_mma out where it is mma_sync (the ids before the knob stand): a rule naming
    mma_sync matches it, one naming wgmma does not; a recurrent config has no such knob and matches neither."""
    chunk = {"family": "chunk", "arch": "sm_90a", "k": 128, "v": 128, "state_layout": "k_first", "chunk": 64,
             "block_v": 64, "stages": 2, "gate_modes": ("softplus",), "dtypes": ("bf16",)}
    mma = load_rule(write_rule(tmp_path, "0001-a.yaml", "match: {family: chunk, config: {state_mma: mma_sync}}\n"
                                                         "action: forbid\n"))
    wg = load_rule(write_rule(tmp_path, "0002-b.yaml", "match: {family: chunk, config: {state_mma: wgmma}}\n"
                                                        "action: forbid\n"))
    assert mma.matches(chunk) and not wg.matches(chunk)
    assert wg.matches({**chunk, "state_mma": "wgmma"}) and not mma.matches({**chunk, "state_mma": "wgmma"})
    assert not mma.matches(CONFIG) and not wg.matches(CONFIG)
