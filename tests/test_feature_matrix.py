"""The GPU tests' feature matrix (tests/gpu/feature_matrix.py) against the spec files, without a GPU.

The matrix says which GPU cases a spec is expected NOT to build, read from kernel_specs/*.yaml; under
--require-gpu only those may skip, and a case the spec builds but the library lacks fails. Here: the
default specs' matrix, pinned; that editing a spec moves exactly the right cases in or out; that the
YAML reading agrees with the real spec loader and covers every feature field; that require_built skips,
fails or passes as it should for stand-in libraries; and, in a child pytest, that --require-gpu lets only
the matrix's skips through and that the options replaced the old environment variables.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GPU_TESTS = ROOT / "tests" / "gpu"
if str(GPU_TESTS) not in sys.path:
    sys.path.insert(0, str(GPU_TESTS))

import feature_matrix as fm  # noqa: E402

REC = "test_recurrent_gpu.py::test_matches_reference"
POOL = "test_recurrent_gpu.py::test_pool_in_place"

#: What the default specs are expected NOT to build. Written out by hand from the spec files: when a spec
#: or a GPU case changes, this changes with it, on purpose.
EXPECTED = {
    "kimi_linear_recurrent": {},
    "kimi_linear_chunk": {},
    "small_head_chunk": {},
    "large_head_chunk": {},
    "large_head_recurrent": {},
    "small_head_recurrent": {  # every gate mode, both layouts, buckets [1, 8, 256]
        f"{REC}[T500-precomputed-gva2-scale]": ("T=500 > largest bucket 256",),
        f"{REC}[T1000-kimi-softplus-vf]": ("T=1000 > largest bucket 256",),
        f"{REC}[varlen-256-500-1000-lowerbound-gva2-kf]": ("T=500 > largest bucket 256",),
    },
}


def test_default_specs_matrix():
    assert fm.matrix() == EXPECTED


def test_every_matrix_key_is_a_collected_gpu_test():
    """The keys name real GPU tests (less the library parameter), so the matrix cannot drift from them."""
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                          str(GPU_TESTS)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env=_env())
    assert res.returncode == 0, res.stdout + res.stderr
    collected = [line.split("tests/gpu/", 1)[1] for line in res.stdout.splitlines() if line.startswith("tests/gpu/")]
    for name, built in fm.specs().items():
        for key in fm.gpu_cases(built):
            func, _, param = key.partition("[")
            param = param.rstrip("]")
            hits = [c for c in collected if c.startswith(func + "[") and (not param or c.endswith(f"-{param}]"))]
            assert hits, f"{name}: matrix key {key} matches no collected GPU test"


def _spec_docs() -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(fm.SPEC_DIR.glob("*.yaml"))}


def _write_specs(tmp_path: Path, docs: dict[str, dict]) -> Path:
    d = tmp_path / "kernel_specs"
    d.mkdir()
    for name, doc in docs.items():
        (d / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return d


def _drop(seq, item):
    assert item in seq, f"the default spec no longer has {item!r}: update this test"
    return [x for x in seq if x != item]


# (spec file, edit of its YAML, which of that family's cases become not built, and why)
MUTATIONS = {
    "recurrent drops k_first": (
        "kimi_linear_recurrent.yaml",
        lambda d: d["features"].update(state_layouts=_drop(d["features"]["state_layouts"], "k_first")),
        lambda c: not c.v_first, "k_first"),
    "recurrent drops the precomputed gate": (
        "kimi_linear_recurrent.yaml",
        lambda d: d["features"].update(gate_modes=_drop(d["features"]["gate_modes"], "precomputed")),
        lambda c: c.gate == "precomputed", "gate mode precomputed"),
    "recurrent without varlen": (
        "kimi_linear_recurrent.yaml", lambda d: d["features"].update(varlen=False),
        lambda c: c.cu is not None, "varlen"),
    "recurrent drops fp16 inputs": (
        "kimi_linear_recurrent.yaml",
        lambda d: d["features"].update(input_dtypes=_drop(d["features"]["input_dtypes"], "fp16")),
        lambda c: getattr(c, "dtype", "bf16") == "fp16", "input dtype fp16"),
    "recurrent buckets up to 64": (
        "kimi_linear_recurrent.yaml", lambda d: d.update(seq_len_buckets=[1, 64]),
        lambda c: c.longest > 64, "largest bucket 64"),
    "recurrent without in-kernel l2norm": (
        "kimi_linear_recurrent.yaml", lambda d: d["features"].update(qk_l2norm=False),
        lambda c: c.l2, "qk_l2norm"),
    "chunk drops v_first": (
        "kimi_linear_chunk.yaml",
        lambda d: d["features"].update(state_layouts=_drop(d["features"]["state_layouts"], "v_first")),
        lambda c: c.v_first, "v_first"),
    "chunk drops the lower_bound gate": (
        "kimi_linear_chunk.yaml",
        lambda d: d["features"].update(gate_modes=_drop(d["features"]["gate_modes"], "lower_bound")),
        lambda c: c.gate == "lower_bound", "gate mode lower_bound"),
    "chunk without beta sigmoid": (
        "kimi_linear_chunk.yaml", lambda d: d["features"].update(beta_sigmoid=False),
        lambda c: c.bsig, "beta_sigmoid"),
}


@pytest.mark.parametrize("what", list(MUTATIONS))
def test_editing_a_spec_moves_exactly_its_cases(tmp_path, what):
    file, edit, affected, reason = MUTATIONS[what]
    docs = _spec_docs()
    name = docs[file]["name"]
    edit(docs[file])
    after = fm.matrix(_write_specs(tmp_path, docs))
    before = fm.matrix()
    for other in before:  # the other specs are untouched
        if other != name:
            assert after[other] == before[other]
    cases = fm.gpu_cases(fm.specs(tmp_path / "kernel_specs")[name])
    want = {key for key, c in cases.items() if affected(c)}
    assert want, f"{what}: no GPU case exercises this feature, so the edit cannot show"
    assert set(after[name]) - set(before[name]) == want - set(before[name])
    assert set(after[name]) == set(before[name]) | want
    for key in want:
        assert any(reason in m for m in after[name][key]), (key, after[name][key])


def test_widening_small_head_clears_its_matrix(tmp_path):
    """The other direction: give small_head_recurrent what its skipped cases need and none is expected to skip."""
    docs = _spec_docs()
    docs["small_head_recurrent.yaml"]["seq_len_buckets"] = [1, 256, 1024]
    assert fm.matrix(_write_specs(tmp_path, docs))["small_head_recurrent"] == {}


def test_yaml_view_agrees_with_the_spec_loader():
    """feature_matrix reads the YAML with yaml.safe_load; kda2.spec.model.load_spec (pydantic, defaults) must agree."""
    from kda2.spec.model import load_spec

    for path in sorted(fm.SPEC_DIR.glob("*.yaml")):
        s, b = load_spec(path), fm.load_spec(path)
        f = s.features
        assert (b.spec, b.family, b.k, b.v, b.max_bucket) == (s.name, s.family, s.head_dims.k, s.head_dims.v,
                                                              max(s.seq_len_buckets)), path
        for field in fm.FEATURE_FIELDS:
            got, want = getattr(b, field), getattr(f, field)
            assert (tuple(want) if isinstance(want, list) else want) == got, (path, field)
    doc = _spec_docs()["small_head_recurrent.yaml"]
    doc["features"].pop("input_dtypes", None)  # the model's default
    assert fm.Built.from_spec(doc).input_dtypes == ("bf16",)


def test_matrix_knows_every_feature_field():
    """A feature added to the spec (or the manifest) must be taught to feature_matrix.missing, or this fails."""
    from kda2.runtime.library import Features as ManifestFeatures
    from kda2.spec.model import Features as SpecFeatures

    # state_dtype: fp32 only, no case depends on it; gva_ratios: accepted and ignored (any HV / H runs);
    # bf16_decode_state: an opt-in extra entry, no matrix case depends on it (test_recurrent_matrix_gpu.py skips)
    known = set(fm.FEATURE_FIELDS) | {"state_dtype", "gva_ratios", "bf16_decode_state"}
    assert set(SpecFeatures.model_fields) == known
    assert {f.name for f in dataclasses.fields(ManifestFeatures)} == known
    assert set(fm.FEATURE_FIELDS) <= {f.name for f in dataclasses.fields(fm.Built)}


# ---- require_built: what a GPU test does with a case the library lacks ----------------------------

def _lib(built: fm.Built, **change):
    """A stand-in for a loaded Library with `built`'s features, some changed (as a stale build would be)."""
    b = dataclasses.replace(built, **change)
    feats = SimpleNamespace(**{f: getattr(b, f) for f in fm.FEATURE_FIELDS}, state_dtype="fp32")
    return SimpleNamespace(spec=b.spec, family=b.family, k=b.k, v=b.v, features=feats, max_bucket=b.max_bucket,
                           manifest_path=Path(f"build/{b.spec}/sm_90a/manifest.json"))


def _case(built: fm.Built, key: str):
    return fm.gpu_cases(built)[key]


def _outcome(lib, case) -> tuple[str, str]:
    """What require_built did: runs | not-built (the matrix's skip) | skip (a plain one) | fail. Caught here, so
    that a wrong skip fails this test instead of skipping it."""
    try:
        fm.require_built(lib, case)
    except fm.NotBuilt as exc:
        return "not-built", str(exc)
    except pytest.skip.Exception as exc:
        return "skip", str(exc)
    except pytest.fail.Exception as exc:
        return "fail", str(exc)
    return "runs", ""


def test_require_built_skips_what_the_spec_does_not_build():
    small = fm.specs()["small_head_recurrent"]
    how, msg = _outcome(_lib(small), _case(small, f"{REC}[T500-precomputed-gva2-scale]"))
    assert how == "not-built", msg
    assert msg.startswith(f"{fm.NOT_BUILT} small_head_recurrent: T=500 > largest bucket 256"), msg
    assert issubclass(fm.NotBuilt, pytest.skip.Exception)  # a skip to pytest
    assert _outcome(_lib(small), _case(small, f"{REC}[T2-softplus-vf-gva2-gbf16]")) == ("runs", "")


@pytest.mark.parametrize("change,key,lacks", [
    (dict(state_layouts=("v_first",)), f"{REC}[T1-decode-precomputed-kf]", "k_first"),
    (dict(gate_modes=("precomputed", "softplus")), f"{REC}[T63-lowerbound-gva4-negeig]", "gate mode lower_bound"),
    (dict(max_bucket=64), f"{REC}[T1000-kimi-softplus-vf]", "T=1000 > largest bucket 64"),
    (dict(varlen=False), f"{POOL}[varlen-vf]", "varlen"),
    (dict(input_dtypes=("bf16",)), f"{REC}[T64-fp16-lowerbound-kf-g16-b16]", "input dtype fp16"),
    (dict(input_dtypes=("bf16",)), f"{POOL}[decode-kf]", None),  # bf16 cases run on a bf16-only library
])
def test_require_built_fails_a_case_the_spec_builds_but_the_library_lacks(change, key, lacks):
    kimi = fm.specs()["kimi_linear_recurrent"]
    lib = _lib(kimi, **change)
    how, msg = _outcome(lib, fm.gpu_cases(fm.Built.from_library(lib))[key])  # the case as the test builds it
    if lacks is None:
        assert how == "runs", msg
    else:
        assert how == "fail", msg
        assert f"lacks {lacks}, but its spec " in msg and "kimi_linear_recurrent.yaml builds" in msg, msg


def test_require_built_skips_by_need_not_by_wording():
    """small_head's spec stops at 256; a build stopping at 64 also lacks T=1000, which the spec does not build
    either: a skip. T=100 is built by the spec but not by that library: a failure."""
    small = fm.specs()["small_head_recurrent"]
    lib = _lib(small, max_bucket=64)
    how, msg = _outcome(lib, _case(small, f"{REC}[T1000-kimi-softplus-vf]"))
    assert how == "not-built" and "T=1000 > largest bucket 64" in msg, msg
    c = dataclasses.replace(_case(small, f"{REC}[T1000-kimi-softplus-vf]"), T=100)
    how, msg = _outcome(lib, c)
    assert how == "fail" and "lacks T=100 > largest bucket 64" in msg, msg


def test_require_built_fails_a_stale_chunk_build():
    chunk = fm.specs()["kimi_linear_chunk"]
    key = "test_chunk_gpu.py::test_matches_reference[T65-lowerbound-noAlog-H3-kf]"
    how, msg = _outcome(_lib(chunk, gate_modes=("precomputed", "softplus")), _case(chunk, key))
    assert how == "fail" and "lacks gate mode lower_bound" in msg, msg
    long = _case(chunk, "test_chunk_gpu.py::test_matches_reference[T8192-softplus-bf16g-gva2-H1-vf]")
    assert _outcome(_lib(chunk, max_bucket=64), long) == ("runs", "")  # chunk kernels take any length


def test_require_built_cannot_confirm_an_unknown_spec():
    small = fm.specs()["small_head_recurrent"]
    case = _case(small, f"{REC}[T1000-kimi-softplus-vf]")
    how, msg = _outcome(_lib(dataclasses.replace(small, spec="my_shard")), case)
    assert how == "skip", msg  # a plain skip: --require-gpu fails it, the matrix cannot confirm it
    assert "cannot confirm" in msg


# ---- the options and the --require-gpu hook, in a child pytest ------------------------------------

def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("KDA2_TEST_SEED", "KDA2_REQUIRE_GPU", "KDA2_RESULTS_DIR",
                                                           "KDA2_FLA_CASES", "KDA2_CHUNK_LIBRARY", "KDA2_LIBRARY")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(extra)
    return env


CHILD_TESTS = '''
import pytest
from types import SimpleNamespace
from pathlib import Path
import feature_matrix as fm

pytestmark = pytest.mark.gpu


def lib(name, **change):
    import dataclasses
    b = dataclasses.replace(fm.specs()[name], **change)
    feats = SimpleNamespace(**{{f: getattr(b, f) for f in fm.FEATURE_FIELDS}})
    return SimpleNamespace(spec=b.spec, family=b.family, k=b.k, v=b.v, features=feats, max_bucket=b.max_bucket,
                           manifest_path=Path("manifest.json"))


def case(name, key):
    return fm.gpu_cases(fm.specs()[name])[key]


def test_matrix_skip():
    fm.require_built(lib("small_head_recurrent"), case("small_head_recurrent", {small_key!r}))


def test_plain_skip_with_the_magic_words():
    pytest.skip(fm.NOT_BUILT + " x: but said by hand, not by the matrix")


def test_stale_build():
    fm.require_built(lib("kimi_linear_recurrent", state_layouts=("v_first",)),
                     case("kimi_linear_recurrent", {k_first_key!r}))


def test_seed(seed):
    print("SEED", seed)
'''


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    """A copy of the test tree's conftests, feature_matrix.py and kernel_specs/ with four stand-in gpu tests."""
    root = tmp_path_factory.mktemp("child")
    (root / "tests" / "gpu").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "conftest.py", root / "tests" / "conftest.py")
    for f in ("conftest.py", "feature_matrix.py", "test_recurrent_gpu.py"):
        shutil.copy(GPU_TESTS / f, root / "tests" / "gpu" / f)
    shutil.copytree(fm.SPEC_DIR, root / "kernel_specs")
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: gpu\n    unit: unit\n    compile: compile\n")
    (root / "tests" / "gpu" / "test_child.py").write_text(
        CHILD_TESTS.format(k_first_key=f"{REC}[T1-decode-precomputed-kf]", small_key=f"{REC}[T1000-kimi-softplus-vf]"))
    return root


def _run(child: Path, *args, **env):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-s",
                           "tests/gpu/test_child.py", *args], cwd=child, capture_output=True, text=True, timeout=300,
                          env=_env(**env))


def test_require_gpu_lets_only_the_matrix_skips_through(child):
    loose = _run(child)
    assert loose.returncode == 1, loose.stdout + loose.stderr  # the stale build fails even without --require-gpu
    assert "kda2: --seed=20261130 (the fixed default)" in loose.stdout
    assert "SEED 20261130" in loose.stdout
    assert "lacks k_first, but its spec" in loose.stdout
    assert loose.stdout.count("SKIPPED") == 2, loose.stdout

    strict = _run(child, "--require-gpu", "--seed", "7")
    out = strict.stdout
    assert strict.returncode == 1, out + strict.stderr
    assert "SEED 7" in out and "--require-gpu=on" in out
    assert "SKIPPED [1] " in out and out.count("SKIPPED") == 1, out  # the matrix's skip only
    assert "--require-gpu turns this skip into a failure: " in out and "said by hand" in out
    assert "FAILED tests/gpu/test_child.py::test_plain_skip_with_the_magic_words" in out
    assert "FAILED tests/gpu/test_child.py::test_stale_build" in out
    assert "test_matrix_skip" not in "".join(l for l in out.splitlines() if l.startswith("FAILED"))


@pytest.mark.parametrize("var,option", [("KDA2_TEST_SEED", "--seed"), ("KDA2_REQUIRE_GPU", "--require-gpu"),
                                        ("KDA2_RESULTS_DIR", "--results-dir"), ("KDA2_FLA_CASES", "--fla-cases")])
def test_retired_variables_are_refused(child, var, option):
    res = _run(child, **{var: "1"})
    assert res.returncode == 4, res.stdout + res.stderr
    assert f"{var} (use {option})" in res.stdout + res.stderr
