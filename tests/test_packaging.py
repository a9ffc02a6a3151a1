"""`pip install kda2` (no extras) is the runtime alone: it imports no build-time package and loads a built
library's manifest (docs/DESIGN.md §2.6). Installs the checkout into a fresh venv, so it needs pip access
to numpy and cuda-python (CI has it); marked `compile` with the other slow, tool-running tests."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD_ONLY = ("SCons", "jinja2", "tvm", "pydantic", "yaml")

pytestmark = pytest.mark.compile


def _manifests() -> list[Path]:
    return sorted((REPO / "build").glob("*/*/manifest.json"))


def test_runtime_install_has_no_build_packages(runtime_venv: Path):
    code = textwrap.dedent(f"""
        import importlib.util, json, sys
        import kda2, kda2.runtime, kda2.artifact.abi, kda2.artifact.manifest
        present = [m for m in {BUILD_ONLY!r} if importlib.util.find_spec(m) is not None]
        loaded = [m for m in {BUILD_ONLY!r} if m in sys.modules]
        print(json.dumps({{"present": present, "loaded": loaded, "file": kda2.__file__}}))
    """)
    p = subprocess.run([str(runtime_venv), "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["present"] == [] and out["loaded"] == [], out
    assert "site-packages" in out["file"], "the venv must import the installed package, not the checkout"


def test_runtime_install_loads_a_built_manifest(runtime_venv: Path):
    manifests = _manifests()
    if not manifests:
        pytest.fail(f"nothing built under {REPO / 'build'}: run `scons` first (the README's first command)")
    code = textwrap.dedent("""
        import sys
        import kda2
        for path in sys.argv[1:]:
            lib = kda2.load(path)
            print(lib.spec, lib.arch, lib.family, len(lib.variants))
    """)
    p = subprocess.run([str(runtime_venv), "-c", code, *map(str, manifests)], capture_output=True, text=True,
                       cwd="/", timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == len(manifests)
    for line, path in zip(lines, manifests):
        m = json.loads(path.read_text())
        assert line == f"{m['spec']} {m['arch']} {m['family']} {len(m['variants'])}"


def test_tampered_manifest_is_refused_in_the_runtime_venv(runtime_venv: Path, tmp_path: Path):
    manifests = _manifests()
    if not manifests:
        pytest.fail(f"nothing built under {REPO / 'build'}: run `scons` first")
    src = manifests[0].parent
    dst = tmp_path / src.parent.name / src.name
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and not f.name.startswith("."):
            (dst / f.name).write_bytes(f.read_bytes())
    m = json.loads((dst / "manifest.json").read_text())
    cubin = dst / m["variants"][0]["cubin"]
    data = bytearray(cubin.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cubin.write_bytes(bytes(data))
    code = "import sys, kda2\ntry:\n kda2.load(sys.argv[1])\nexcept kda2.runtime.ArtifactError as e:\n print(e)\n"
    p = subprocess.run([str(runtime_venv), "-c", "import kda2.runtime\n" + code, str(dst / "manifest.json")],
                       capture_output=True, text=True, cwd="/", timeout=120)
    assert p.returncode == 0, p.stderr
    assert cubin.name in p.stdout and "sha256" in p.stdout, p.stdout
