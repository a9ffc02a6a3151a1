"""The `kda2` command line, run as users run it: `python -m kda2.tools.cli ...` in a subprocess.

`inspect` is tested on a real build: a tiny spec built with SCons (-j2) in a temporary copy of the build
inputs, with its own cache; then on copies of that build whose cubin is swapped for a bad one, and on
corrupt manifests.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kda2.plan.planner import plan_spec
from kda2.plan.lock import class_times, read_spec_baselines, routes, tuned_splits
from kda2.plan.profile import load_profiles, resolve_targets
from kda2.spec.rules import load_rules
from kda2.spec.model import load_spec
from kda2.compile.toolchain import gencode

REPO = Path(__file__).resolve().parents[1]
KIMI = REPO / "kernel_specs" / "kimi_linear_recurrent.yaml"
RULES = REPO / "rules"
# Settings inherited from a developer shell that would change what SCons or nvcc do here.
_SCRUB = ("KDA2_CACHE_DIR", "SCONSFLAGS", "KDA2_LIBRARY")


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    e["PYTHONPATH"] = os.pathsep.join([str(REPO / "src")] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    return e


def kda2(*args: str, cwd: Path = REPO, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kda2.tools.cli", *map(str, args)], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=timeout)


def one_error_line(p: subprocess.CompletedProcess) -> str:
    """The failure contract: exit 2, exactly one line on stderr, `kda2: error: ...`, no traceback."""
    assert p.returncode == 2, f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kda2: error: "), p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    return lines[0]


# ---- --help ------------------------------------------------------------------------------------

HELP = {
    None: ("build", "plan", "inspect", "rules", "tune", "bench", "Kimi Delta Attention"),
    "build": ("scons", "progress line"),
    "plan": ("candidate", "reasons", "--json", "--arch"),
    "inspect": ("SASS", "spills", "local", "Exit 1"),
    "rules": ("version bump", "check", "lock", "propose", "impact"),
    "tune": ("fastest correct", "tuning/<spec>.<profile>.json", "--quick", "--dry-run"),
    "bench": ("FLA", "GPU", "recurrent", "chunk", "readme-table"),  # its subcommands, without `bench -- --help`
}


@pytest.mark.parametrize("command", list(HELP), ids=[c or "top" for c in HELP])
def test_help(command: str | None) -> None:
    p = kda2(*([command] if command else []), "--help")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"usage: kda2{' ' + command if command else ''} ")
    text = " ".join(p.stdout.split())
    for phrase in HELP[command]:
        assert phrase in text, (command, phrase, p.stdout)


def test_no_command_is_a_usage_error() -> None:
    """`kda2` alone: the commands and what each does (argparse had said only "arguments are required")."""
    p = kda2()
    assert p.returncode == 2 and p.stderr.startswith("usage: kda2") and "vendor" in p.stderr and "tune" in p.stderr


def test_version() -> None:
    """`kda2 --version`: the installed package's version, else the source tree's pyproject.toml; and where from."""
    import importlib.metadata

    try:
        want = importlib.metadata.version("kda2")
    except importlib.metadata.PackageNotFoundError:
        want = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(), re.M)[1]
    p = kda2("--version")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout == f"kda2 {want} ({REPO / 'src' / 'kda2'})\n"


def test_bench_help_lists_its_commands_and_recurrent_needs_no_out(tmp_path) -> None:
    """`kda2 bench --help` is kda2.bench's own help (its commands), as `bench -- --help` still is; `kda2 bench
    recurrent` without --out writes to a new ./bench_out/recurrent-<date>-<time> (a bad shape stops it before torch
    or a GPU is needed, with the CLI's one error line, and leaves no folder)."""
    p, q = kda2("bench", "--help"), kda2("bench", "--", "--help")
    assert p.returncode == 0 and p.stdout == q.stdout and re.search(r"^usage: kda2 bench .*COMMAND", p.stdout, re.M)
    assert all(re.search(rf"^ +{c} ", p.stdout, re.M) for c in ("recurrent", "chunk")) and "readme-table" in p.stdout
    assert "./bench_out/recurrent-" in " ".join(kda2("bench", "recurrent", "--help").stdout.split())
    p = kda2("bench", "recurrent", "--shapes", "Z9", cwd=tmp_path)
    assert "--shapes: unknown shape 'Z9'" in one_error_line(p) and p.stdout == ""
    assert not (tmp_path / "bench_out").exists()


# ---- plan --------------------------------------------------------------------------------------

ROW = re.compile(r"^  ([0-9a-f]{12}) +(k_first|v_first) +(True|False) +(\d+(?:x\d)?) +(\d+) +(\d+|-) +(\d+|-) +(smem|direct|bulk) "
                 r"+(strided|blocked|all) "
                 r"+(butterfly|scatter) +(grid|pers) +(final|\+tok) +(.+)$")


def routes_and_rules(cell: str) -> tuple[list[str], list[str]]:
    """The last cell of a plan row: "vf<=64/prefill-n8(tune) vf<=1024/prefill-n8(tune)  rules 0002@v1"."""
    routes, _, rules = cell.partition("  rules ")
    return sorted(routes.split()), rules.split()


def expected_routes(plan, vid: str) -> list[str]:
    """Chunk rows add their split knob: "kf<=8192/prefill-n2(tune,split<=4:agents)"; a twin's row names its fallback
    variant too: "kf<=2048/prefill-n8(fallback)"."""
    split = (lambda d: f",split<={d['split']}:{d['split_by']}") if plan.spec.family == "chunk" else (lambda d: "")
    where = (lambda d: f"{'kf' if d['state_layout'] == 'k_first' else 'vf'}<={d['bucket']}/{d['class']}")
    return sorted([f"{where(d)}({d['routed_by']}{split(d)})" for d in plan.dispatch if d["variant"] == vid]
                  + [f"{where(d)}(fallback)" for d in plan.dispatch if d.get("fallback") == vid]) or ["candidate"]


def tuned(spec) -> dict:
    """What the build routes by: the spec's tuning records (tuning/<spec>.<profile>.json)."""
    return routes(read_spec_baselines(spec.name, resolve_targets(spec, load_profiles()), REPO / "tuning"))


def tuned_times(spec) -> dict:
    """Every candidate's time per batch class in the same records (a twin's row picks its fallback from them)."""
    return class_times(read_spec_baselines(spec.name, resolve_targets(spec, load_profiles()), REPO / "tuning"))


def tuned_split(spec) -> dict:
    """The split knobs the same records confirmed."""
    return tuned_splits(read_spec_baselines(spec.name, resolve_targets(spec, load_profiles()), REPO / "tuning"))


def test_plan_table_has_one_row_per_variant() -> None:
    p = kda2("plan", KIMI, "--rules", RULES)
    assert p.returncode == 0, p.stderr
    spec, rules = load_spec(KIMI), load_rules(RULES)
    sections = re.split(r"^(?=\S.* / sm_\w+: \d+ candidate kernels)", p.stdout, flags=re.M)
    sections = [s for s in sections if s.strip()]
    assert len(sections) == len(spec.archs)
    for arch, text in zip(spec.archs, sections):
        plan = plan_spec(spec, arch, rules, tuned(spec).get(arch))
        assert text.startswith(f"{spec.name} / {arch}: {len(plan.variants)} candidate kernels, "
                               f"{len({d['variant'] for d in plan.dispatch})} routed, for {len(plan.dispatch)} "
                               "dispatch rows")
        rows = [ROW.match(line) for line in text.splitlines() if re.match(r"^  [0-9a-f]{12} ", line)]
        assert all(rows), text
        assert [m[1] for m in rows] == [v.id for v in plan.variants]
        record = json.loads((REPO / "tuning" / f"{spec.name}.h200.json").read_text())
        for d in plan.dispatch:  # the record holds h200 (sm_90a); a route added since (bucket 8) is not tuned yet
            key = f"{d['state_layout']}:{d['bucket']}"
            want = "tune" if arch == "sm_90a" and key in record["routes"] else "rank"
            assert d["routed_by"] == want, d
        for m, v in zip(rows, plan.variants):
            c = v.config
            cols = f"{c['v_per_warp']}" + (f"x{c['lane_cols']}" if c.get("lane_cols", 1) > 1 else "")
            assert (m[2], m[3] == "True", m[4], int(m[5]), m[6], m[7], m[8], m[9], m[10], m[11], m[12]) == (
                c["state_layout"], c["prefetch"], cols, c["warps"], str(c.get("min_ctas", "-")),
                str(c.get("preload", "-")), c["staging"], c["k_map"], c["reduce"], "pers" if c.get("persistent") else "grid",
                "+tok" if c.get("intermediate") else "final")
            assert routes_and_rules(m[13]) == (expected_routes(plan, v.id), list(v.rules))


def test_plan_reasons_and_arch() -> None:
    p = kda2("plan", KIMI, "--rules", RULES, "--arch", "sm_80", "--reasons")
    assert p.returncode == 0, p.stderr
    assert "/ sm_80:" in p.stdout and "/ sm_90a:" not in p.stdout
    for agent in ("layout", "staging", "tile", "reduce", "budget"):
        assert f"[{agent}] " in p.stdout
    assert "profile a100 (published)" in p.stdout  # the hardware facts the agents used


def test_plan_json_parses() -> None:
    p = kda2("plan", KIMI, "--rules", RULES, "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    spec, rules = load_spec(KIMI), load_rules(RULES)
    assert [d["arch"] for d in data] == list(spec.archs)
    for entry in data:
        plan = plan_spec(spec, entry["arch"], rules,
                         tuned(spec).get(entry["arch"]))
        assert [v["id"] for v in entry["variants"]] == [v.id for v in plan.variants]
        assert [v["config"] for v in entry["variants"]] == [v.config for v in plan.variants]
        assert entry["dispatch"] == [dict(d) for d in plan.dispatch]
        assert all(v["reasons"] for v in entry["variants"])


def test_plan_bad_inputs_are_one_line_errors(tmp_path) -> None:
    missing = tmp_path / "nope.yaml"
    line = one_error_line(kda2("plan", missing, "--rules", RULES))
    assert str(missing) in line and "no such file" in line

    bad = tmp_path / "bad.yaml"
    bad.write_text(KIMI.read_text().replace("archs: [sm_90a, sm_80]", "archs: [sm_91]"))
    line = one_error_line(kda2("plan", bad, "--rules", RULES))
    assert str(bad) in line and "archs" in line and "sm_91" in line

    line = one_error_line(kda2("plan", KIMI, "--rules", RULES, "--arch", "sm_86"))
    assert "sm_86" in line

    line = one_error_line(kda2("plan", KIMI, "--rules", tmp_path / "no_rules"))
    assert "no_rules" in line


# ---- rules check -------------------------------------------------------------------------------

def test_rules_check_passes_on_the_repo() -> None:
    p = kda2("rules", "check", "--rules", RULES)
    assert p.returncode == 0, p.stderr
    assert "lock up to date" in p.stdout and p.stderr == ""


def test_rules_check_fails_on_body_edit_without_bump(tmp_path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "0002-sm80-warps.yaml").write_text(
        'id: 2\nversion: 1\nmatch: {arch: sm_80}\naction: flags\nflags: ["-Xptxas=-warn-spills"]\n'
        "reason: report spills on Ampere.\nevidence: test fixture\n")
    assert kda2("rules", "lock", "--rules", rules).returncode == 0
    before = (rules / "rules.lock.json").read_bytes()
    edited = rules / "0002-sm80-warps.yaml"
    edited.write_text(edited.read_text().replace('flags: ["-Xptxas=-warn-spills"]',
                                                 'flags: ["-Xptxas=-warn-spills", "-lineinfo"]'))
    assert "-lineinfo" in edited.read_text()
    p = kda2("rules", "check", "--rules", rules)
    assert p.returncode == 1, p.stdout + p.stderr
    assert str(edited) in p.stderr and "without a version bump" in p.stderr
    assert all(line.startswith("kda2: error: ") for line in p.stderr.splitlines())
    assert "Traceback" not in p.stderr
    assert (rules / "rules.lock.json").read_bytes() == before  # check never rewrites the lock


# ---- inspect -----------------------------------------------------------------------------------

def tiny_spec(name: str, k: int) -> str:
    return f"""\
name: {name}
family: recurrent
archs: [sm_90a]
head_dims: {{k: {k}, v: {k}}}
features:
  gate_modes: [softplus]
  qk_l2norm: true
  beta_sigmoid: true
  gva_ratios: [1]
  varlen: false
  state_dtype: fp32
  state_layouts: [v_first]
seq_len_buckets: [1]
agents:
  tile: {{v_per_warp: [4], warps: [4]}}
  staging: {{v_first: [direct]}}
  reduce: [scatter]
budget:
  max_candidates: 1
  max_registers: 255
  max_smem_bytes: 49152
"""


# the brief's tiny spec (K = V = 64) and the same at K = V = 128, built in one SCons run
TINY = {"tiny": 64, "tiny128": 128}


@pytest.fixture(scope="module")
def tiny_build(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli_checkout")
    shutil.copy2(REPO / "SConstruct", root / "SConstruct")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "site_scons", root / "site_scons", ignore=ignore)
    shutil.copytree(RULES, root / "rules", ignore=ignore)
    (root / "kernel_specs").mkdir()
    for name, k in TINY.items():
        (root / "kernel_specs" / f"{name}.yaml").write_text(tiny_spec(name, k))
    e = env()
    e["KDA2_CACHE_DIR"] = str(tmp_path_factory.mktemp("cli_cache"))
    p = subprocess.run([sys.executable, "-m", "SCons", "-j2"], cwd=root, env=e, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, f"scons failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    for name in TINY:
        assert (root / "build" / name / "sm_90a" / "manifest.json").is_file()
    return root / "build"


@pytest.mark.compile
@pytest.mark.parametrize("name", list(TINY))
def test_inspect_tiny_build_is_clean(tiny_build: Path, name: str) -> None:
    out = tiny_build / name / "sm_90a"
    p = kda2("inspect", out)
    m = json.loads((out / "manifest.json").read_text())
    (v,) = m["variants"]
    assert f"{name} / sm_90a: 1 kernels for 3 dispatch rows" in p.stdout  # bucket 1: three decode batch classes
    assert re.search(rf"^  {v['name']}\n    routes: v_first T<=1 \(decode-n1, decode-n64, decode-n256\)\n    sm_90a  bf16 in, fp32 state  regs +\d+  smem +0 B  stack 0 B  "
                     rf"spills 0/0 B  v_first direct blocked v/warp 4 warps 4$", p.stdout, re.M), p.stdout
    assert v["name"].endswith(v["id"]) and v["name"].startswith(f"kda2_recurrent_sm_90a_k{TINY[name]}v{TINY[name]}_vf")
    assert "local memory: none" in p.stdout
    assert p.returncode == 0, f"kda2 inspect {out} (K = V = {TINY[name]}) failed:\n{p.stdout}\n{p.stderr}"
    assert "all present" in p.stdout and "kda2 inspect: ok" in p.stdout and p.stderr == ""
    # the manifest itself works too, and --variant selects
    p2 = kda2("inspect", out / "manifest.json", "--variant", v["id"])
    assert p2.returncode == 0 and p2.stdout == p.stdout
    # the agents' reasons come from the kernel's sidecar, not from its source
    p3 = kda2("inspect", out, "--reasons")
    assert p3.returncode == 0 and "[layout] states [N,HV,V,K]" in p3.stdout, p3.stdout
    assert "[layout]" not in (out / v["cubin"]).with_suffix(".cu").read_text()


def test_inspect_says_whether_a_chunk_state_cta_fits_beside_a_prep_cta(tmp_path) -> None:
    """The chunk variant's line: from its plan's dynamic bytes and threads and ptxas' registers and static bytes, by
    the arch's default profile (h200: 233472 B, 65536 registers per SM)."""
    from kda2.tools.inspect import _beside, _profile

    hw = _profile("sm_90a")
    (tmp_path / "x.plan.json").write_text(json.dumps({"prep_smem_bytes": 105728, "prep_threads": 256,
                                                      "state_smem_bytes": 125472, "state_threads": 128}))
    res = lambda regs, smem: {"registers": regs, "smem": smem}  # noqa: E731
    v = {"id": "x", "plan": "x.plan.json",
         "resources": {"kda2_chunk_prep_x": res(124, 16), "kda2_chunk_state_x": res(204, 0)}}
    assert _beside(tmp_path, v, hw) == (f"    beside a prep CTA on {hw.name}: fits (208 smem to spare, 6144 registers "
                                        f"to spare, 1664 threads to spare)")
    v["resources"]["kda2_chunk_state_x"] = res(204, 512)   # 304 B more than there is
    assert _beside(tmp_path, v, hw).endswith("does not fit (smem over by 304): never overlapped")


BAD_CU = r"""
extern "C" __global__ void bad(const float* in, float* out, int i) {
  float a[64];  // dynamically indexed below: lives in local memory
#pragma unroll 1
  for (int j = 0; j < 64; ++j) a[j] = in[j * blockDim.x + threadIdx.x];
  out[threadIdx.x] = a[(i + threadIdx.x) & 63] + a[(i * 7 + threadIdx.x) & 63];
}
"""


@pytest.fixture(scope="module")
def bad_cubin(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad_cubin")
    (d / "bad.cu").write_text(BAD_CU)
    nvcc = shutil.which("nvcc")
    assert nvcc, "nvcc must be on PATH"
    p = subprocess.run([nvcc, "-O3", "-cubin", "-gencode", gencode("sm_90a", False), "bad.cu", "-o", "bad.cubin"],
                       cwd=d, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return d / "bad.cubin"


@pytest.mark.compile
def test_inspect_fails_on_local_memory_and_missing_shfl(tiny_build: Path, bad_cubin: Path, tmp_path) -> None:
    from kda2.compile.sass import sass_opcodes

    ops = sass_opcodes(bad_cubin)
    assert any(op.split(".")[0] in ("LDL", "STL") for op in ops), ops  # the fixture really uses local memory
    assert not any(op.startswith("SHFL") for op in ops), ops

    out = tmp_path / "sm_90a"
    shutil.copytree(tiny_build / "tiny128" / "sm_90a", out)
    m = json.loads((out / "manifest.json").read_text())
    (v,) = m["variants"]
    shutil.copy2(bad_cubin, out / v["cubin"])
    m["files"][v["cubin"]] = hashlib.sha256(bad_cubin.read_bytes()).hexdigest()  # signed: inspect checks hashes
    (out / "manifest.json").write_text(json.dumps(m))
    p = kda2("inspect", out)
    assert p.returncode == 1, p.stdout + p.stderr
    fails = [ln for ln in p.stderr.splitlines() if ln.startswith("kda2 inspect: FAIL ")]
    assert fails and len(fails) == len(p.stderr.splitlines()), p.stderr
    assert any(v["id"] in ln and "local-memory" in ln and re.search(r"\b(LDL|STL)\b", ln) for ln in fails), fails
    assert any(v["id"] in ln and "missing" in ln and "SHFL.BFLY" in ln for ln in fails), fails
    assert re.search(r"local memory: .*\b(LDL|STL)", p.stdout) and "MISSING" in p.stdout
    assert "kda2 inspect: ok" not in p.stdout


@pytest.mark.compile
def test_inspect_fails_on_spills_in_resources(tiny_build: Path, tmp_path) -> None:
    out = tmp_path / "sm_90a"
    shutil.copytree(tiny_build / "tiny128" / "sm_90a", out)
    m = json.loads((out / "manifest.json").read_text())
    (v,) = m["variants"]
    for r in v["resources"].values():
        r["spill_stores"], r["stack"] = 8, 8
    (out / "manifest.json").write_text(json.dumps(m))
    p = kda2("inspect", out)
    assert p.returncode == 1
    assert any("spills" in ln and v["id"] in ln for ln in p.stderr.splitlines() if ln.startswith("kda2 inspect: FAIL"))


CORRUPT = {
    "truncated": '{"spec": "tiny", "variants": [',
    "not_json": "\x00\x01 binary",
    "no_variants": "{}",
    "missing_keys": '{"variants": []}',
    "not_an_object": "[]",
    "variant_without_resources": json.dumps({
        "spec": "s", "arch": "sm_90a", "family": "recurrent", "library": {"path": "libs.sm_90a.so"},
        "toolchain": {"nvcc": "n"}, "variants": [{"id": "0123456789ab", "cubin": "x/kernel.cubin",
                                                  "config": {"state_layout": "v_first"}}]}),
}


@pytest.mark.parametrize("kind", list(CORRUPT))
def test_inspect_corrupt_manifest_is_one_line_error(tmp_path, kind: str) -> None:
    (tmp_path / "manifest.json").write_text(CORRUPT[kind])
    line = one_error_line(kda2("inspect", tmp_path))
    assert "manifest.json" in line


@pytest.mark.parametrize("family", ["recurrent", "chunk"])
def test_inspect_says_which_entry_each_line_is(tmp_path, monkeypatch, family: str) -> None:
    """A variant's cubin holds an entry per input dtype (recurrent: and state dtype; chunk: prep, state and fold per
    dtype and one combine) with near-identical resources: each line names its entry, in launch order, and only the
    prep and state lines carry the plan's dynamic shared memory (the fold and combine are not sized by it)."""
    from kda2.codegen.render import kernel_symbols
    from kda2.tools import inspect as insp

    monkeypatch.setattr(insp.sass, "sass_opcodes", lambda cubin: {})  # the SASS check is tested on real cubins above
    monkeypatch.setattr(insp.sass, "check", lambda ops, family, arch, config: ([], [], []))
    vid = "0123456789ab"
    config = ({"family": "chunk", "state_layout": "v_first", "chunk": 64, "block_v": 32, "stages": 2,
               "dtypes": ["bf16", "fp16"]} if family == "chunk" else
              {"family": "recurrent", "state_layout": "k_first", "staging": "direct", "k_map": "all", "v_per_warp": 8,
               "warps": 4, "dtypes": ["bf16", "fp16"], "state_dtypes": ["fp32", "bf16"]})
    res = {"arch": "sm_90a", "registers": 68, "smem": 5120, "stack": 0, "spill_stores": 0, "spill_loads": 0}
    v = {"id": vid, "name": f"kda2_{family}_x_{vid}", "cubin": "x.cubin", "plan": "x.plan.json", "config": config,
         "resources": {k: dict(res) for k in sorted(kernel_symbols(config, vid))}}
    (tmp_path / "x.plan.json").write_text(json.dumps({"prep_smem_bytes": 103680, "prep_threads": 256,
                                                     "state_smem_bytes": 155680, "state_threads": 128}))
    lines, problems = insp.inspect_variant(tmp_path, v, family, "sm_90a")
    assert not problems
    rows = [ln for ln in lines if ln.startswith("    sm_90a  ")]
    labels = [re.match(r"    sm_90a  (.+?) +regs", ln)[1] for ln in rows]
    assert len(set(rows)) == len(rows) == len(v["resources"])
    if family == "recurrent":
        assert labels == ["bf16 in, fp32 state", "fp16 in, fp32 state", "bf16 in, bf16 state", "fp16 in, bf16 state"]
    else:
        assert labels == ["prep bf16", "prep fp16", "state bf16", "state fp16", "fold bf16", "fold fp16",
                          "combine (any dtype)"]
        assert [ln.split("stages 2")[1] for ln in rows] == [
            "  prep: dynamic smem 103680 B, 256 threads"] * 2 + ["  state: dynamic smem 155680 B, 128 threads"] * 2 + [""] * 3
    assert len({ln.index("regs") for ln in rows}) == 1  # the labels are padded to one column


def test_inspect_not_a_build_dir(tmp_path) -> None:
    line = one_error_line(kda2("inspect", tmp_path / "nothing"))
    assert "nothing" in line


# ---- family chunk ------------------------------------------------------------------------------

KIMI_CHUNK = REPO / "kernel_specs" / "kimi_linear_chunk.yaml"
CHUNK_ROW = re.compile(r"^  ([0-9a-f]{12}) +(k_first|v_first) +(\d+) +(\d+) +(\d+) +(\d+) +(mma_sync|wgmma) +(levels|bfs) +"
                       r"(yes|no) +(\d+)/(\d+) +(.+)$")


def test_plan_chunk_spec_shows_block_v_stages_smem() -> None:
    p = kda2("plan", KIMI_CHUNK, "--rules", RULES)
    assert p.returncode == 0, p.stderr
    spec, rules = load_spec(KIMI_CHUNK), load_rules(RULES)
    assert "block_v" in p.stdout and "stages" in p.stdout and "smem prep/state B" in p.stdout
    for arch in spec.archs:
        plan = plan_spec(spec, arch, rules, tuned=tuned(spec).get(arch),  # as the CLI: routed by the tuning record
                         tuned_splits=tuned_split(spec).get(arch), tuned_times=tuned_times(spec).get(arch))
        used = {d["variant"] for d in plan.dispatch} | {d["fallback"] for d in plan.dispatch if d.get("fallback")}
        section = p.stdout.split(f"{spec.name} / {arch}: {len(plan.variants)} candidate kernels, "
                                 f"{len(used)} routed, for {len(plan.dispatch)} "
                                 f"dispatch rows", 1)[1].split("\n\n")[0]
        rows = [CHUNK_ROW.match(line) for line in section.splitlines() if re.match(r"^  [0-9a-f]{12} ", line)]
        assert rows and all(rows), section
        assert [m[1] for m in rows] == [v.id for v in plan.variants]
        for m, v in zip(rows, plan.variants):
            c = v.config
            wg = c.get("state_mma") == "wgmma"
            assert (m[2], int(m[3]), int(m[4]), int(m[5]), int(m[6]), m[7], m[8]) == (
                c["state_layout"], c["chunk"], c["block_v"], c["stages"], c["block_v"] // (16 if wg else 8),
                "wgmma" if wg else "mma_sync", c.get("prep_wu", "levels"))
            assert m[9] == ("yes" if c.get("fused") else "no")
            # upper bounds (every padded tile at the most the TIR pass may pad it), by (block_v, stages, mma):
            # wgmma stages hold the 57856 B of tiles 1024-byte aligned (58368 apart, the last unpadded), then one
            # uᵀ slice [block_v][80], no exchange or o tiles
            state = {(64, 2): 201760, (64, 1): 133648, (32, 2): 158752, (32, 1): 95760, (16, 2): 137248,
                     (16, 1): 76816, (64, 2, "wg"): 58368 + 57856 + 64 * 160 + 32, (64, 1, "wg"): 57856 + 64 * 160 + 16,
                     (128, 2, "wg"): 58368 + 57856 + 128 * 160 + 32, (128, 1, "wg"): 57856 + 128 * 160 + 16}[
                (c["block_v"], c["stages"], *(("wg",) if wg else ()))]
            assert (int(m[10]), int(m[11])) == (112896, state)
            assert routes_and_rules(m[12]) == (expected_routes(plan, v.id), list(v.rules))
            assert not wg or arch == "sm_90a"
    p = kda2("plan", KIMI_CHUNK, "--rules", RULES, "--arch", "sm_80", "--reasons")
    assert p.returncode == 0, p.stderr
    for agent in ("layout", "chunk", "tile", "stages", "budget"):
        assert f"[{agent}] " in p.stdout
    assert "limit 166912 B (profile a100 (published): smem_per_block_bytes=166912)" in p.stdout
    data = json.loads(kda2("plan", KIMI_CHUNK, "--rules", RULES, "--json").stdout)
    assert {v["config"]["block_v"] for entry in data for v in entry["variants"]} == {16, 32, 64, 128}  # 128: wgmma


@pytest.fixture
def chunk_like_build(tiny_build: Path, tmp_path) -> Path:
    """A copy of the tiny build whose manifest says family chunk (two kernels per variant, a plan.json)."""
    out = tmp_path / "sm_90a"
    shutil.copytree(tiny_build / "tiny128" / "sm_90a", out)
    m = json.loads((out / "manifest.json").read_text())
    m["family"] = "chunk"
    (v,) = m["variants"]
    (r,) = v["resources"].values()
    v["resources"] = {f"kda2_chunk_prep_{v['id']}": r, f"kda2_chunk_state_{v['id']}": r}
    v["config"] = {"family": "chunk", "state_layout": "v_first", "chunk": 64, "block_v": 32, "stages": 2}
    (out / v["plan"]).write_text(json.dumps({"prep_smem_bytes": 103680, "prep_threads": 256,
                                                         "state_smem_bytes": 155680, "state_threads": 128}))
    m["files"][v["plan"]] = hashlib.sha256((out / v["plan"]).read_bytes()).hexdigest()  # signed as a build signs it
    (out / "manifest.json").write_text(json.dumps(m))
    return out


@pytest.mark.compile
def test_inspect_chunk_manifest(chunk_like_build: Path) -> None:
    p = kda2("inspect", chunk_like_build)
    (v,) = json.loads((chunk_like_build / "manifest.json").read_text())["variants"]
    assert re.search(r"^    sm_90a  prep bf16   regs +\d+ .* v_first block_v 32 stages 2  prep: dynamic smem "
                     r"103680 B, 256 threads$", p.stdout, re.M), p.stdout
    assert re.search(r"^    sm_90a  state bf16  regs .* block_v 32 stages 2  state: dynamic smem 155680 B, 128 threads$",
                     p.stdout, re.M), p.stdout
    # the cubin is a recurrent one: the tensor-core instructions a chunk kernel must have are missing
    assert p.returncode == 1
    want = "HMMA.16816.F32.BF16 HMMA.1688.F32.TF32 LDSM LDGSTS UBLKCP SYNCS"
    assert any(want in ln and "missing" in ln for ln in p.stderr.splitlines()), p.stderr


def test_tune_refuses_an_unknown_family_and_a_broken_manifest(tmp_path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"family": "attention", "spec": "c", "arch": "sm_90a"}))
    line = one_error_line(kda2("tune", tmp_path))
    assert "attention" in line and "allowed: recurrent, chunk" in line and "manifest.json" in line
    (tmp_path / "manifest.json").write_text(json.dumps({"family": "chunk", "spec": "c", "arch": "sm_90a"}))
    line = one_error_line(kda2("tune", tmp_path))
    assert "not a kda2 manifest" in line and "variants" in line


def test_build_options_after_spec_names_are_parsed(monkeypatch, capsys) -> None:
    """`kda2 build SPEC --candidates all -- -q`: options after the spec names are kda2's (they were once swallowed
    into the scons words, building the routed set), the words after `--` go to scons whole, and a stray option
    without `--` is refused by name."""
    from kda2.tools import cli

    seen: list[list[str]] = []

    class FakeProc:
        def __init__(self, argv, **kw):
            seen.append(list(argv))
            self.stdout = iter(())

        def wait(self):
            return 0

    monkeypatch.setattr(cli.subprocess, "Popen", FakeProc)
    assert cli.main(["build", "-C", str(REPO), "kimi_linear_chunk", "--candidates", "all", "-j", "3", "--", "-q",
                     "BUILD_DIR=build/_x"]) == 0
    argv = seen[-1]
    assert "SPECS=kimi_linear_chunk" in argv and "CANDIDATES=all" in argv and "-j3" in argv
    assert argv[-2:] == ["-q", "BUILD_DIR=build/_x"] and "--candidates" not in argv
    assert cli.main(["build", "-C", str(REPO), "kimi_linear_chunk"]) == 0 and "CANDIDATES=routed" in seen[-1]
    with pytest.raises(SystemExit):
        cli.main(["build", "-C", str(REPO), "kimi_linear_chunk", "-k"])
    assert "unrecognized arguments: -k" in capsys.readouterr().err


# ---- build: spec files ------------------------------------------------------------------------------

class FakeScons:
    """subprocess.Popen standing in for scons: records each argv, prints `lines` and exits with `rc`."""

    def __init__(self, lines: list[str], rc: int = 0):
        self.lines, self.calls, self.rc = lines, [], rc

    def __call__(self, argv, **kw):
        self.calls.append(list(argv))
        rc = self.rc
        return type("Proc", (), {"stdout": iter(f"{ln}\n" for ln in self.lines), "wait": lambda self: rc})()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A directory kda2 build takes for a checkout (it holds a SConstruct), with one spec in kernel_specs/."""
    root = tmp_path / "checkout"
    (root / "kernel_specs").mkdir(parents=True)
    (root / "SConstruct").write_text("")
    (root / "kernel_specs" / "tiny.yaml").write_text(tiny_spec("tiny", 64))
    return root


def test_build_a_spec_file(checkout: Path, tmp_path, monkeypatch, capsys) -> None:
    """`kda2 build PATH.yaml`: SPECS= is its name: field (said when the file is named otherwise); a file from outside
    the checkout's specs directory is copied alone to BUILD_DIR/.kda2/spec-files, which becomes SPECS_DIR (scons
    plans every spec and digests every file of its SPECS_DIR), and scons' messages name the user's file."""
    from kda2.tools import cli

    mine = tmp_path / "elsewhere" / "my.yaml"
    mine.parent.mkdir()
    mine.write_text(tiny_spec("mine", 128))
    (mine.parent / "notes.yaml").write_text("not: a spec\n")  # beside it, never read
    stage = checkout / "build" / ".kda2" / "spec-files"
    fake = FakeScons([f"kda2: error: {stage / 'mine.yaml'}: something"])
    monkeypatch.setattr(cli.subprocess, "Popen", fake)
    assert cli.main(["build", "-C", str(checkout), str(mine), "--", "VERBOSE=0"]) == 0
    out = capsys.readouterr().out
    assert f"{mine} is spec 'mine' (its name: field, not its file name)" in out and "build/mine/<arch>" in out
    assert f"kda2: error: {mine}: something" in out and str(stage) not in out
    argv = fake.calls[-1]
    assert f"SPECS_DIR={stage}" in argv and "SPECS=mine" in argv
    assert [p.name for p in stage.iterdir()] == ["mine.yaml"] and (stage / "mine.yaml").read_text() == mine.read_text()
    # BUILD_DIR= moves the staging with the build
    assert cli.main(["build", "-C", str(checkout), str(mine), "--", f"BUILD_DIR={tmp_path / 'b'}"]) == 0
    assert f"SPECS_DIR={tmp_path / 'b' / '.kda2' / 'spec-files'}" in fake.calls[-1]
    capsys.readouterr()
    # a file of the checkout's specs directory is built by name, from there
    monkeypatch.chdir(checkout)
    assert cli.main(["build", "-C", str(checkout), "kernel_specs/tiny.yaml", "--", "VERBOSE=0"]) == 0
    assert "SPECS=tiny" in fake.calls[-1] and not any(a.startswith("SPECS_DIR=") for a in fake.calls[-1])
    assert "is spec" not in capsys.readouterr().out
    # what cannot be built says so in one line, before scons runs
    calls = len(fake.calls)
    for args, want in (([str(tmp_path / "nope.yaml")], "nope.yaml: no such spec file"),
                       ([str(mine), "tiny"], "build spec files from elsewhere on their own"),
                       ([str(mine.parent / "notes.yaml")], "notes.yaml")):
        assert cli.main(["build", "-C", str(checkout), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("kda2: error: ") and want in err and len(err.splitlines()) == 1, err
    assert len(fake.calls) == calls


@pytest.mark.compile
def test_build_a_spec_file_for_real(tiny_build: Path, tmp_path) -> None:
    """`kda2 build /elsewhere/file.yaml` through the real SConstruct: the spec builds under its name, one progress
    line per node."""
    spec = tmp_path / "elsewhere" / "file.yaml"
    spec.parent.mkdir()
    spec.write_text(tiny_spec("from_a_file", 64))
    build = tmp_path / "b"
    p = kda2("build", "-C", tiny_build.parent, "-j2", spec, "--", f"BUILD_DIR={build}", cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (build / "from_a_file" / "sm_90a" / "manifest.json").is_file()
    steps = re.findall(r"^\[ *(\d+) +[\d.]+s\] +(\S+)", p.stdout, re.M)
    assert [int(n) for n, _ in steps] == list(range(1, len(steps) + 1)) and steps[-1][1] == "manifest", p.stdout


def test_verify_a_missing_path_says_so(tmp_path) -> None:
    line = one_error_line(kda2("verify", tmp_path / "nope"))
    assert f"{tmp_path / 'nope'}: no such directory" in line and "bundle.json" not in line.split("(")[0]
    (tmp_path / "file.txt").write_text("x")
    assert "a file, not a bundle directory" in one_error_line(kda2("verify", tmp_path / "file.txt"))


def test_plan_finds_the_rules_and_tuning_records_of_the_spec_files_checkout(tmp_path) -> None:
    """`kda2 plan SPEC` from another directory: rules/ and tuning/ default to the current directory's, else those of
    the checkout the spec file is in, and the first line names the record the plan routes by (or that there is none:
    a plan from elsewhere routed by the model's rank without saying so was a different plan). A --tuning that does
    not exist, or no rules anywhere, is an error."""
    spec = REPO / "kernel_specs" / "small_head_recurrent.yaml"
    p = kda2("plan", spec, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"tuning record {REPO / 'tuning' / 'small_head_recurrent.h200.json'}" in p.stdout.splitlines()[0]
    assert "(tune)" in p.stdout   # the record's routes, as the build takes them
    alone = tmp_path / "specs" / "small_head_recurrent.yaml"
    alone.parent.mkdir()
    alone.write_text(spec.read_text())
    p = kda2("plan", alone, "--rules", REPO / "rules", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "tuning record none in tuning (no such directory): routes by the model's rank" in p.stdout.splitlines()[0]
    assert "(tune)" not in p.stdout
    p = kda2("plan", alone, cwd=tmp_path)
    assert p.returncode == 2 and "no such rules directory" in p.stderr and "--rules DIR" in p.stderr, p.stderr
    p = kda2("plan", spec, "--tuning", tmp_path / "nope", cwd=tmp_path)
    assert p.returncode == 2 and "--tuning" in p.stderr and "no such directory" in p.stderr, p.stderr


def test_build_question_mode_answers_up_to_date_or_not(checkout: Path, monkeypatch, capsys) -> None:
    """`kda2 build SPEC -- -q`: scons' exit status is the answer (0 up to date, 1 out of date), said in words; an
    out-of-date tree is not a failed build (no FAILED, no failure records, not scons' "terminated" line)."""
    from kda2.tools import cli

    for rc, word in ((0, "up to date"), (1, "out of date")):
        monkeypatch.setattr(cli.subprocess, "Popen", FakeScons(["scons: building terminated because of errors."], rc))
        assert cli.main(["build", "-C", str(checkout), "tiny", "--", "-q"]) == rc
        out = capsys.readouterr().out
        assert re.fullmatch(rf"kda2 build: {word} \(scons -q, [\d.]+s\)\n", out), out


def test_rules_refuses_propose_options_elsewhere() -> None:
    """--action / --flag / --scope shape `kda2 rules propose` only: given to check, lock or impact they would do
    nothing, so they are refused; --flag without --action flags too."""
    for args, want in ((["check", "--action", "flags"], "--action only shape"),
                       (["check", "--flag=-O0"], "--flag only shape"),
                       (["lock", "--scope", "arch"], "--scope only shape"),
                       (["propose", "x", "--flag=-O0"], "--flag needs --action flags")):
        assert want in one_error_line(kda2("rules", *args))


def test_build_side_commands_without_the_build_extra_say_so(monkeypatch, capsys) -> None:
    """A runtime-only install (pip install kda2) has no SCons, PyYAML or pydantic: the build-side commands say which
    extra they need in one line (exit 2) instead of a traceback, and --help marks them."""
    import importlib.util

    from kda2.tools import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "yaml" else real(name, *a))
    assert cli.main(["build", "small_head_recurrent"]) == 2
    err = capsys.readouterr().err
    assert err == "kda2: error: kda2 build needs the build extra (no module 'yaml' here): pip install 'kda2[build]'\n"

    def no_pydantic(args):
        raise ModuleNotFoundError("No module named 'pydantic'", name="pydantic")
    monkeypatch.setattr(cli, "cmd_plan", no_pydantic)
    assert cli.main(["plan", "x.yaml"]) == 2
    assert "kda2 plan needs the build extra (no module 'pydantic' here)" in capsys.readouterr().err

    def other(args):
        raise ModuleNotFoundError("No module named 'numpy'", name="numpy")
    monkeypatch.setattr(cli, "cmd_plan", other)
    with pytest.raises(ModuleNotFoundError):   # not a build extra: not ours to explain
        cli.main(["plan", "x.yaml"])
    help_text = kda2("--help").stdout
    for cmd in ("build", "plan", "rules"):
        assert re.search(rf"\b{cmd}\b.*needs the \[build\] extra", help_text.replace("\n", " ")), help_text


def test_candidates_build_names_the_trees_to_tune(monkeypatch, tmp_path, capsys) -> None:
    """`kda2 build --candidates all SPEC` ends by naming the every-candidate trees it made (build/_candidates/<spec>/
    <arch>, where `kda2 tune` looks), only those of the specs asked for; the routed build says nothing of the kind."""
    from kda2.tools import cli

    (tmp_path / "SConstruct").write_text("")
    for spec in ("a_spec", "b_spec"):
        d = tmp_path / "build" / "_candidates" / spec / "sm_90a"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text("{}")

    class FakeProc:
        def __init__(self, argv, **kw):
            self.stdout = iter(())

        def wait(self):
            return 0

    monkeypatch.setattr(cli.subprocess, "Popen", FakeProc)
    assert cli.main(["build", "-C", str(tmp_path), "a_spec", "--candidates", "all"]) == 0
    out = capsys.readouterr().out
    assert "for `kda2 tune` on a GPU host: build/_candidates/a_spec/sm_90a;" in out and "b_spec" not in out, out
    assert cli.main(["build", "-C", str(tmp_path), "a_spec"]) == 0
    assert "kda2 tune" not in capsys.readouterr().out


# ---- argument checks: each refused in one line naming the option, the value and what is allowed ------------

SMALL = REPO / "kernel_specs" / "small_head_recurrent.yaml"   # archs: [sm_90a]


def test_plan_profile_must_be_for_the_planned_arch() -> None:
    """`--profile a100` planned sm_80 for a spec that lists only sm_90a, and overrode an explicit --arch, unsaid;
    a profile of an arch the spec builds (and --arch names) still plans."""
    line = one_error_line(kda2("plan", SMALL, "--profile", "a100"))
    assert "--profile a100 is for sm_80, which is not in" in line and "archs (sm_90a)" in line, line
    assert "allowed: the profiles for sm_90a: h100, h200" in line, line
    line = one_error_line(kda2("plan", SMALL, "--arch", "sm_90a", "--profile", "a100"))
    assert "--profile a100 is for sm_80, not --arch sm_90a; allowed: the profiles for sm_90a: h100, h200" in line
    line = one_error_line(kda2("plan", KIMI, "--arch", "sm_90a", "--profile", "a100"))   # both archs in the spec
    assert "not --arch sm_90a" in line, line
    p = kda2("plan", SMALL, "--arch", "sm_90a", "--profile", "h100", "--json")
    assert p.returncode == 0, p.stderr
    assert [(e["arch"], e["profile"]) for e in json.loads(p.stdout)] == [("sm_90a", "h100")]


def test_plan_and_rules_name_the_option_of_a_missing_path(tmp_path) -> None:
    """A path given explicitly that does not exist is said so with its option (not "here, nor beside the spec
    file's specs directory", nor a bare "no such directory"); a rule file that does not exist is "no such rule
    file", not a file-name rule."""
    nope = tmp_path / "nope"
    for args, want in ((["plan", SMALL, "--rules", nope], f"--rules {nope}: no such directory"),
                       (["plan", SMALL, "--profiles", nope], f"--profiles {nope}: no such directory"),
                       (["rules", "check", "--specs", nope], f"--specs {nope}: no such directory"),
                       (["rules", "check", "--rules", nope], f"--rules {nope}: no such directory"),
                       (["rules", "check", "--profiles", nope], f"--profiles {nope}: no such directory"),
                       (["rules", "impact", tmp_path / "nope.yaml"], f"{tmp_path / 'nope.yaml'}: no such rule file"),
                       (["tune", "--dry-run", SMALL, "--rules", nope], f"--rules {nope}: no such directory"),
                       (["tune", "--dry-run", SMALL, "--profiles", nope], f"--profiles {nope}: no such directory")):
        line = one_error_line(kda2(*args))
        assert want in line and "beside" not in line, (args, line)


def test_plan_takes_a_spec_name_as_build_does(tmp_path) -> None:
    """`kda2 plan small_head_recurrent` (a name, as `kda2 build NAME` takes it) plans kernel_specs/'s spec of that
    name; where there is none, the line says plan takes a spec file or a name."""
    by_name, by_path = kda2("plan", "small_head_recurrent", "--json"), kda2("plan", SMALL, "--json")
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout == by_path.stdout
    line = one_error_line(kda2("plan", "small_head_recurrent", cwd=tmp_path))
    assert "small_head_recurrent: no such file, nor a spec of that name in kernel_specs/" in line
    assert "plan takes a spec file (PATH.yaml)" in line, line
    # tune's dry run too (it said "no readable manifest ... build every candidate first")
    dry = kda2("tune", "--dry-run", "small_head_recurrent", "--tuning", tmp_path / "tuning")
    assert dry.returncode == 0 and dry.stdout.startswith("small_head_recurrent / sm_90a on h200"), dry.stderr


def test_build_jobs_and_build_dir(checkout: Path, tmp_path, monkeypatch, capsys) -> None:
    """-j 0 and -j -3 went to scons; they are refused before it runs. --build-dir is scons' BUILD_DIR= (the staging
    of spec files moves with it); given with BUILD_DIR= after `--` too, it is refused."""
    from kda2.tools import cli

    fake = FakeScons([])
    monkeypatch.setattr(cli.subprocess, "Popen", fake)
    for bad in ("0", "-3", "two"):
        with pytest.raises(SystemExit) as e:
            cli.main(["build", "-C", str(checkout), "tiny", "-j", bad])
        assert e.value.code == 2
        assert f"argument -j/--jobs: '{bad}': allowed: a whole number of jobs >= 1" in capsys.readouterr().err
    assert fake.calls == []
    assert cli.main(["build", "-C", str(checkout), "tiny", "-j", "1", "--build-dir", "build/_mine"]) == 0
    assert "-j1" in fake.calls[-1] and "BUILD_DIR=build/_mine" in fake.calls[-1]
    mine = tmp_path / "my.yaml"
    mine.write_text(tiny_spec("mine", 64))
    assert cli.main(["build", "-C", str(checkout), str(mine), "--build-dir", str(tmp_path / "b")]) == 0
    assert f"SPECS_DIR={tmp_path / 'b' / '.kda2' / 'spec-files'}" in fake.calls[-1]
    capsys.readouterr()
    calls = len(fake.calls)
    assert cli.main(["build", "-C", str(checkout), "tiny", "--build-dir", "x", "--", "BUILD_DIR=y"]) == 2
    err = capsys.readouterr().err
    assert err == "kda2: error: --build-dir x and BUILD_DIR=y after --: give one of them\n", err
    assert len(fake.calls) == calls


def test_cache_sizes_and_ages_negative_or_bare(tmp_path) -> None:
    """`--max-size -1G` (no `=`) was argparse's "expected one argument": now, with or without `=`, the value is
    named and said negative; the help says what a bare number is and which files prune removes or leaves."""
    for args, want in ((["--max-size", "-1G"], "--max-size '-1G': negative; allowed: a size >= 0"),
                       (["--max-size=-1G"], "--max-size '-1G': negative; allowed: a size >= 0"),
                       (["--older-than", "-1d"], "--older-than '-1d': negative; allowed: an age >= 0"),
                       (["--older-than", "5"], "--older-than '5': an age such as 30d")):
        line = one_error_line(kda2("cache", "prune", "--dir", tmp_path, *args))
        assert want in line, (args, line)
    text = " ".join(kda2("cache", "--help").stdout.split())
    for phrase in ("a bare number is bytes", "stray files (sidecars without their entry, temporaries of dead "
                   "pushes and fetches)", "Files the build did not write are left alone", "info: count entries",
                   "prune: remove entries and stray files", "a unit is required"):
        assert phrase in text, (phrase, text)


def test_help_says_where_profiles_come_from_and_what_the_actions_are() -> None:
    """--profiles honours $KDA2_PROFILES_DIR (kda2.plan.profile), which the help now says; the positional action
    of rules and cache is explained, and rules' --action (propose's) is told apart from it."""
    for command in ("plan", "rules", "tune"):
        text = " ".join(kda2(command, "--help").stdout.split())
        assert "--profiles PROFILES hardware profiles directory (default: $KDA2_PROFILES_DIR, else" in text, text
    text = " ".join(kda2("rules", "--help").stdout.split())
    assert "{check,lock,propose,impact} what to do" in text and "propose only: the `action:` field" in text, text
    assert "Not the positional action" in text
    text = " ".join(kda2("build", "--help").stdout.split())
    assert "--build-dir DIR build tree to write" in text and "parallel jobs, >= 1" in text, text


FAKE_SCONS = '''
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[sys.argv.index("-C") + 1] + "/stopped", "w").write(signal.Signals(signum).name)
    sys.exit(2)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
print("kda2: cubin     build/x/sm_90a/k.cubin", flush=True)
time.sleep(60)
'''


@pytest.mark.parametrize("sig, rc", [("SIGTERM", 143), ("SIGINT", 130)])
def test_build_interrupted_stops_scons_and_says_so(tmp_path, sig, rc) -> None:
    """SIGTERM to `kda2 build` left scons (and nvcc) running unattended; Ctrl-C printed a traceback. Both now reach
    scons, which stops; kda2 says so in one line, records no failure and exits 128 + the signal."""
    import signal as _signal
    import time as _time

    fake = tmp_path / "fake" / "SCons"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_SCONS)
    top = tmp_path / "top"
    top.mkdir()
    (top / "SConstruct").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), str(REPO / "src")])}
    # SIGINT at its default, as in a terminal (a pytest-xdist worker ignores it, and children inherit that)
    p = subprocess.Popen([sys.executable, "-m", "kda2.tools.cli", "build", "-C", str(top)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env,
                         preexec_fn=lambda: _signal.signal(_signal.SIGINT, _signal.SIG_DFL))
    assert "cubin" in p.stdout.readline()   # scons is running
    p.send_signal(getattr(_signal, sig))
    out, err = p.communicate(timeout=30)
    assert p.returncode == rc, (out, err)
    assert "Traceback" not in err and f"kda2 build: interrupted ({sig})" in err, err
    deadline = _time.monotonic() + 10
    while not (top / "stopped").exists() and _time.monotonic() < deadline:
        _time.sleep(0.05)
    assert (top / "stopped").read_text() == sig   # scons itself got it
    assert not (top / "tuning").exists()          # no failure recorded



def test_plan_names_each_candidates_prep(tmp_path) -> None:
    """The Kimi spec asks for both prep_wu choices, so it plans a bfs twin of each levels candidate (sm_90a): the plan
    table's prep column tells the two apart (their other columns are the same)."""
    p = kda2("plan", KIMI_CHUNK, "--rules", RULES, "--arch", "sm_90a")
    assert p.returncode == 0, p.stderr
    rows = [CHUNK_ROW.match(line) for line in p.stdout.splitlines() if re.match(r"^  [0-9a-f]{12} ", line)]
    assert rows and all(rows), p.stdout
    assert {m[8] for m in rows if m[9] == "yes"} == {"levels"}   # the fused twins: of levels candidates
    rows = [m for m in rows if m[9] == "no"]
    preps = [m[8] for m in rows]
    assert preps.count("bfs") == preps.count("levels") > 0
    twins = {tuple(m.group(2, 3, 4, 5, 6, 7, 10, 11)) for m in rows if m[8] == "bfs"}
    assert twins == {tuple(m.group(2, 3, 4, 5, 6, 7, 10, 11)) for m in rows if m[8] == "levels"}
