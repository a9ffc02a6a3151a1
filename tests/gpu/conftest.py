"""GPU test environment: skip cleanly where there is no GPU, fail loudly where a GPU run is broken.

- no torch / torch.cuda unavailable  -> skip (a CPU build host, CI)
- a GPU but no usable built library   -> FAIL (the artifacts did not make it to the GPU host)
- --require-gpu                        -> every skip of a gpu test becomes a failure, except a case the
                                         feature matrix (feature_matrix.py: the spec YAML) says the spec
                                         under test does not build (feature_matrix.NotBuilt)
Every test taking `lib` runs once per built recurrent spec ($KDA2_LIBRARY, else each spec under build/);
every test taking `chunk_lib` once per chunk spec (test_chunk_gpu.py, --chunk-library). The options are
registered in tests/conftest.py.
"""
from __future__ import annotations

import functools
import os
import sys
import warnings
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "src") not in sys.path:  # the package may not be pip-installed on the GPU host
    sys.path.insert(0, str(ROOT / "src"))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from feature_matrix import NotBuilt  # noqa: E402


def _torch_cuda():
    try:
        import torch
    except ImportError as exc:
        return None, f"torch is not importable ({exc})"
    if not torch.cuda.is_available():
        return None, "torch.cuda is not available (no GPU)"
    return torch, ""


@pytest.fixture(scope="session")
def torch_cuda(pytestconfig):
    torch, why = _torch_cuda()
    if torch is None:
        if pytestconfig.getoption("require_gpu"):
            pytest.fail(f"--require-gpu but {why}")
        pytest.skip(why)
    return torch


@functools.lru_cache(maxsize=None)
def built_specs(family: str) -> tuple[str, ...]:
    """Every spec directory under the build dir that holds a manifest of `family` (the arch is chosen for the
    GPU when loading), known at collection time without a GPU."""
    from kda2.runtime import loader

    os.environ.setdefault("KDA2_BUILD_DIR", str(ROOT / "build"))
    return tuple(sorted({str(p.parent.parent) for p in loader.find_manifests() if loader._family(p) == family}))


def spec_id(param: str) -> str:
    return Path(param).name if "/" in param else param


def _family_of(path: str) -> str | None:
    from kda2.runtime import loader

    p = Path(path)
    if not p.exists() and len(p.parts) == 1:
        p = loader.build_dir() / p
    for m in ([p] if p.is_file() else [p / "manifest.json", *sorted(p.glob("*/manifest.json"))]):
        if m.is_file():
            return loader._family(m)
    return None


@functools.lru_cache(maxsize=None)
def chunk_specs(option: str | None) -> tuple[str, ...]:
    """--chunk-library (`option`), else $KDA2_LIBRARY if it is a chunk build, else every chunk spec under build/."""
    if option:
        return (option,)
    if os.environ.get("KDA2_CHUNK_LIBRARY"):
        warnings.warn(pytest.PytestConfigWarning(
            f"KDA2_CHUNK_LIBRARY={os.environ['KDA2_CHUNK_LIBRARY']} is read by `kda2 bench chunk` only; the tests "
            f"take --chunk-library={os.environ['KDA2_CHUNK_LIBRARY']}"))
    os.environ.setdefault("KDA2_BUILD_DIR", str(ROOT / "build"))
    if os.environ.get("KDA2_LIBRARY") and _family_of(os.environ["KDA2_LIBRARY"]) == "chunk":
        return (os.environ["KDA2_LIBRARY"],)
    return built_specs("chunk") or ("<no chunk build>",)


def pytest_generate_tests(metafunc):
    """`lib`: $KDA2_LIBRARY (the runtime's variable), else every recurrent spec under build/;
    `chunk_lib` (test_chunk_gpu.py): see chunk_specs."""
    if "lib" in metafunc.fixturenames:
        specs = [os.environ["KDA2_LIBRARY"]] if os.environ.get("KDA2_LIBRARY") else list(built_specs("recurrent"))
        metafunc.parametrize("lib", specs or ["<no build>"], indirect=True, scope="session", ids=spec_id)
    if "chunk_lib" in metafunc.fixturenames:
        metafunc.parametrize("chunk_lib", list(chunk_specs(metafunc.config.getoption("chunk_library"))), indirect=True,
                             scope="session", ids=spec_id)


@pytest.fixture(scope="session")
def lib(request, torch_cuda):
    """One built library per spec (best arch for this GPU): every GPU test runs against each."""
    from kda2.runtime import loader
    from kda2.runtime.errors import ArtifactError

    if request.param == "<no build>":
        pytest.fail(f"a GPU is present but nothing is built under {loader.build_dir()}: run `scons` "
                    "(or carry build/) before the GPU tests")
    try:
        return loader.load(request.param)
    except ArtifactError as exc:
        pytest.fail(f"a GPU is present but the built library is unusable: {exc}")


@pytest.fixture(scope="session")
def ref():
    """kda2.reference (numpy fp64 oracle)."""
    from kda2 import reference

    return reference


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if (item.config.getoption("require_gpu") and rep.skipped and not hasattr(rep, "wasxfail")
            and item.get_closest_marker("gpu") is not None):
        if call.excinfo is not None and call.excinfo.errisinstance(NotBuilt):
            return  # the spec file says this spec does not build the case: not a broken GPU run
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"--require-gpu turns this skip into a failure: {reason}"
