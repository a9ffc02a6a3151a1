"""The C ABI example (examples/cpp/kda2_example) on a GPU: built with its Makefile, run on each built spec's
library for this GPU (the current-arch manifest, as the runtime picks it: kda2.runtime.loader.load of the
spec directory, which also verifies every file's sha256), once per state layout the spec builds. Each run
must exit 0 and print a max relative error (relative L2 of o and of the final state vs its float64 CPU
reference) ≤ 5e-3. Recurrent libraries run a decode step (T = 1), chunk libraries a 100-token prefill.

Without torch or a GPU every test here skips (conftest.py's `torch_cuda`); with --require-gpu that skip,
and any other, fails. The CPU side (build, refusal paths, clean failure without a GPU) is
tests/test_cpp_example.py.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cpp"
TOLERANCE = 5e-3

pytestmark = pytest.mark.gpu


def spec_dirs() -> list[str]:
    """Every build/<spec> directory holding at least one manifest (any family), at collection time."""
    from kda2.runtime import loader

    os.environ.setdefault("KDA2_BUILD_DIR", str(ROOT / "build"))
    return sorted({str(p.parent.parent) for p in loader.find_manifests()})


@pytest.fixture(scope="module")
def example(torch_cuda, tmp_path_factory) -> Path:
    """The example built with the Makefile, against the toolkit kda2.compile.toolchain finds."""
    from kda2.compile.toolchain import ToolchainError, find_toolchain

    if shutil.which("make") is None:
        pytest.skip("make is not on PATH: cannot build examples/cpp")
    try:
        tc = find_toolchain()
        inc, lib = tc.include_dir(), tc.lib_dir()
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolkit to build examples/cpp with: {exc}")
    out = tmp_path_factory.mktemp("cpp-example-gpu")
    p = subprocess.run(["make", "-C", str(EXAMPLE), f"BUILD={out}", f"CXX={tc.cxx}", f"CUDA_HOME={tc.root}",
                        f"CUDA_INC={inc}", f"CUDA_LIB={lib}"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"make failed:\n{p.stdout}\n{p.stderr}"
    return out / "kda2_example"


@pytest.mark.parametrize("spec_dir", spec_dirs() or ["<no build>"], ids=lambda s: Path(s).name)
def test_cpp_example(spec_dir: str, example: Path, seed: int):
    from kda2.runtime import loader
    from kda2.runtime.errors import ArtifactError

    if spec_dir == "<no build>":
        pytest.fail(f"a GPU is present but nothing is built under {loader.build_dir()}: run `scons` "
                    "(or carry build/) before the GPU tests")
    try:
        lib = loader.load(spec_dir)  # the current-arch manifest of this spec, files verified
    except ArtifactError as exc:
        pytest.fail(f"a GPU is present but the built library is unusable: {exc}")
    layouts = list(lib.features.state_layouts)
    assert layouts, f"{lib.manifest_path}: no state layout"
    for layout in layouts:
        argv = [str(example), str(lib.so_path), "--seed", str(seed), "--layout", layout]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        ctx = f"{' '.join(argv)}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
        assert p.returncode == 0, f"exit {p.returncode}: {ctx}"
        assert f"layout {layout} " in p.stdout, ctx
        m = re.search(r"^max relative error: (\S+) \(tolerance [^)]*\): PASS$", p.stdout, re.M)
        assert m is not None, f"no passing error line: {ctx}"
        assert float(m.group(1)) <= TOLERANCE, ctx
        print(f"{lib.spec} {lib.arch} {layout}: {m.group(0)}")
