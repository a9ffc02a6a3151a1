"""`kda2 inspect` checks the build's files before it reports on them (kda2.tools.inspect).

Every file the manifest lists is checked against its sha256 first: a truncated or deleted library, or a cubin
swapped for another variant's, is one FAIL line naming the file (and the SASS of a cubin that is not the build's
gets no verdict); a missing or unreadable sidecar (.plan.json, .why.json) names that file, not the manifest. On a
synthetic chunk build (the SASS check stubbed: it is tested on real cubins in tests/test_cli.py) and, marked
`compile`, on a copy of the real build in ./build (read only; the test fails, not skips, when it is missing).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kda2.tools import inspect as insp

REPO = Path(__file__).resolve().parents[1]
SPEC = "toy_chunk"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rehash(d: Path, m: dict) -> None:
    """Write `m` back with every listed file's current sha256 (a consistent build again)."""
    m["files"] = {rel: _sha(d / rel) for rel in m["files"] if (d / rel).is_file()}
    (d / "manifest.json").write_text(json.dumps(m, indent=1))


@pytest.fixture
def build(tmp_path: Path) -> Path:
    """build/toy_chunk/sm_90a: two chunk variants (prep and state kernels, plan and why sidecars), a library."""
    d = tmp_path / SPEC / "sm_90a"
    d.mkdir(parents=True)
    variants, files = [], []
    for i in range(2):
        vid = f"{i:012x}"
        name = f"kda2_chunk_sm_90a_k64v64_vf_c64bv32s2_{vid}"
        res = {"arch": "sm_90a", "registers": 128, "smem": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0}
        sidecars = {f"{name}.cubin": b"\x7fELF cubin " + name.encode(),
                    f"{name}.plan.json": json.dumps({"prep_smem_bytes": 64768, "prep_threads": 256,
                                                     "state_smem_bytes": 76064 + i, "state_threads": 128}).encode(),
                    f"{name}.why.json": json.dumps({"reasons": [["layout", f"reason {i}"]]}).encode()}
        for rel, data in sidecars.items():
            (d / rel).write_bytes(data)
        files += sidecars
        variants.append({"id": vid, "index": i, "name": name,
                         "config": {"family": "chunk", "state_layout": "v_first", "chunk": 64, "block_v": 32,
                                    "stages": 2},
                         "resources": {f"kda2_chunk_{k}_{vid}": dict(res) for k in ("prep", "state")},
                         "cubin": f"{name}.cubin", "plan": f"{name}.plan.json", "why": f"{name}.why.json"})
    lib = f"lib{SPEC}.sm_90a.so"
    (d / lib).write_bytes(b"\x7fELF library" + b"\0" * 4096)
    files.append(lib)
    m = {"spec": SPEC, "arch": "sm_90a", "family": "chunk", "library": {"path": lib},
         "toolchain": {"nvcc": "cuda_13.0"}, "variants": variants,
         "dispatch": [{"bucket": 64, "state_layout": "v_first", "variant": v["id"]} for v in variants],
         "files": dict.fromkeys(files)}
    _rehash(d, m)
    return d


@pytest.fixture
def checked(monkeypatch) -> list[str]:
    """The cubins whose SASS inspect checks (the check itself stubbed to pass)."""
    seen: list[str] = []
    monkeypatch.setattr(insp.sass, "sass_opcodes", lambda cubin: seen.append(Path(cubin).name) or {"HGMMA": 1})
    monkeypatch.setattr(insp.sass, "check", lambda ops, family, arch, config: (["HGMMA"], [], []))
    return seen


def run(d: Path, capsys, reasons: bool = False) -> tuple[int, str, list[str]]:
    """(exit status, stdout, the stderr lines) of `kda2 inspect d [--reasons]`."""
    rc = insp.inspect_manifest(str(d), reasons=reasons)
    out, err = capsys.readouterr()
    return rc, out, err.splitlines()


def manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def test_a_consistent_build_is_ok(build: Path, checked: list[str], capsys) -> None:
    rc, out, err = run(build, capsys, reasons=True)
    assert (rc, err) == (0, []) and "kda2 inspect: ok" in out, out + "\n".join(err)
    assert checked == [v["cubin"] for v in manifest(build)["variants"]]
    assert "[layout] reason 0" in out and "beside a prep CTA on" in out and "not shown" not in out


def test_a_specs_build_directory_names_its_arch_directories(build: Path, checked: list[str], capsys) -> None:
    """`kda2 inspect build/<spec>` (what kda2.load takes) was "not a manifest.json": it names the arch directory
    to inspect instead."""
    rc, out, err = run(build.parent, capsys)
    assert rc == 2 and err == [f"kda2: error: {build.parent}: a spec's build; inspect one arch: kda2 inspect {build}"]
    assert checked == []


def _truncate_so(d: Path, m: dict) -> str:
    so = d / m["library"]["path"]
    so.write_bytes(so.read_bytes()[:100])
    return m["library"]["path"]


def _delete_so(d: Path, m: dict) -> str:
    (d / m["library"]["path"]).unlink()
    return m["library"]["path"]


def _swap_cubin(d: Path, m: dict) -> str:   # another variant's cubin under this one's name
    a, b = (v["cubin"] for v in m["variants"][:2])
    shutil.copy(d / b, d / a)
    return a


def _delete_plan(d: Path, m: dict) -> str:
    (d / m["variants"][1]["plan"]).unlink()
    return m["variants"][1]["plan"]


def _empty_why(d: Path, m: dict) -> str:
    (d / m["variants"][0]["why"]).write_text("{}")
    return m["variants"][0]["why"]


def _delete_why(d: Path, m: dict) -> str:
    (d / m["variants"][0]["why"]).unlink()
    return m["variants"][0]["why"]


#: case -> (tamper: returns the file it broke, whether that file is gone)
TAMPER = {"truncated-so": (_truncate_so, False), "deleted-so": (_delete_so, True),
          "swapped-cubin": (_swap_cubin, False), "deleted-plan": (_delete_plan, True),
          "empty-why": (_empty_why, False), "deleted-why": (_delete_why, True)}


@pytest.mark.parametrize("case", list(TAMPER))
def test_a_file_that_is_not_the_build_s_is_one_fail_line_naming_it(build: Path, checked: list[str], capsys,
                                                                   case: str) -> None:
    tamper, gone = TAMPER[case]
    m = manifest(build)
    rel = tamper(build, m)
    rc, out, err = run(build, capsys, reasons=True)
    assert rc == 1, out + "\n".join(err)
    assert all(ln.startswith("kda2 inspect: FAIL ") for ln in err), err
    (line,) = [ln for ln in err if rel in ln]   # one line per bad file, naming it
    want = (f"FAIL missing file {build / rel} (listed in {build / 'manifest.json'})" if gone else
            f"FAIL corrupt file {build / rel}: sha256 {_sha(build / rel)}, {build / 'manifest.json'} expects "
            f"{m['files'][rel]}") + f"; rebuild it (`kda2 build {SPEC}`)"
    assert line.endswith(want), line
    assert len(err) == 1, err   # nothing else is blamed for it
    assert "kda2 inspect: ok" not in out
    if case == "swapped-cubin":   # its SASS is the other variant's: no verdict on this one
        assert rel not in checked and f"SASS: not checked: {rel} is missing or not the build's" in out, out
    if case in ("deleted-plan", "empty-why", "deleted-why"):
        assert f"not shown ({rel}: see its FAIL line)" in out, out


@pytest.mark.parametrize("key, content, says", [
    ("why", "{}", "has no 'reasons'"),
    ("why", None, "missing file"),
    ("plan", '{"prep_threads": 256}', "has no 'prep_smem_bytes', 'state_smem_bytes', 'state_threads'"),
    ("plan", "not json", "unreadable plan file"),
])
def test_an_unusable_sidecar_the_manifest_does_not_hash_names_itself(build: Path, checked: list[str], capsys,
                                                                     key: str, content: str | None, says: str) -> None:
    """A sidecar the manifest names but does not list under 'files' (so no sha256 check covers it): missing or
    without what inspect reads, it is named, with the rebuild, instead of 'unreadable manifest' or a bare errno."""
    m = manifest(build)
    v = m["variants"][0]
    path = build / v[key]
    del m["files"][v[key]]
    _rehash(build, m)
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    rc, out, err = run(build, capsys, reasons=True)
    assert rc == 1, out + "\n".join(err)
    assert err == [f"kda2 inspect: FAIL {err[0].split('FAIL ', 1)[1]}"] and str(path) in err[0], err
    assert says in err[0] and f"variant {v['id']}" in err[0] and err[0].endswith(f"; rebuild it (`kda2 build {SPEC}`)")
    assert "manifest.json" not in err[0] and "Errno" not in err[0], err


# ---- the real build (read only: a copy is tampered with) ---------------------------------------------

def _cli(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "kda2.tools.cli", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.compile
def test_real_build_swapped_cubin_and_truncated_library(tmp_path: Path) -> None:
    built = sorted(p.parent for p in (REPO / "build").glob("*/sm_90a/manifest.json")
                   if json.loads(p.read_text()).get("family") == "chunk"
                   and len(json.loads(p.read_text())["variants"]) >= 2)
    if not built:
        pytest.fail(f"no chunk spec with two kernels is built for sm_90a under {REPO / 'build'}: run `scons` first")
    d = tmp_path / built[0].parent.name / "sm_90a"
    shutil.copytree(built[0], d, ignore=shutil.ignore_patterns(".*"))
    p = _cli("inspect", d)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    m = manifest(d)
    swapped = _swap_cubin(d, m)
    so = _truncate_so(d, m)
    p = _cli("inspect", d)
    assert p.returncode == 1, p.stdout + p.stderr
    err = p.stderr.splitlines()
    assert len(err) == 2 and all(ln.startswith("kda2 inspect: FAIL corrupt file ") for ln in err), err
    assert str(d / so) in err[0] or str(d / so) in err[1]
    assert any(str(d / swapped) in ln for ln in err), err
    assert "SASS instructions missing" not in p.stderr and f"SASS: not checked: {swapped}" in p.stdout
