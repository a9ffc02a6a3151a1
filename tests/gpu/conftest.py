"""GPU test environment: skip cleanly where there is no GPU, fail loudly where a GPU run is broken.

- no torch / torch.cuda unavailable  -> skip (a CPU build host, CI)
- a GPU but no usable built library   -> FAIL (the artifacts did not make it to the GPU host)
- KDA2_REQUIRE_GPU=1                   -> every skip of a gpu test becomes a failure, except a case
                                         the spec under test does not build (NOT_BUILT)
Every test taking `lib` runs once per built spec ($KDA2_LIBRARY, else each spec under build/).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:  # the package may not be pip-installed on the GPU host
    sys.path.insert(0, str(ROOT / "src"))

REQUIRE_GPU = os.environ.get("KDA2_REQUIRE_GPU") == "1"
#: Skip reasons containing this are allowed under KDA2_REQUIRE_GPU (see test_recurrent_gpu._skip_unless_built).
NOT_BUILT = "not built into spec"


def _torch_cuda():
    try:
        import torch
    except ImportError as exc:
        return None, f"torch is not importable ({exc})"
    if not torch.cuda.is_available():
        return None, "torch.cuda is not available (no GPU)"
    return torch, ""


@pytest.fixture(scope="session")
def torch_cuda():
    torch, why = _torch_cuda()
    if torch is None:
        if REQUIRE_GPU:
            pytest.fail(f"KDA2_REQUIRE_GPU=1 but {why}")
        pytest.skip(why)
    return torch


def _built_specs() -> list[str]:
    """What to test, known at collection time without a GPU: $KDA2_LIBRARY, else every spec directory
    under the build dir that holds a recurrent manifest (the arch is chosen for the GPU when loading)."""
    if os.environ.get("KDA2_LIBRARY"):
        return [os.environ["KDA2_LIBRARY"]]
    from kda2.runtime import loader

    os.environ.setdefault("KDA2_BUILD_DIR", str(ROOT / "build"))
    specs = {str(p.parent.parent) for p in loader.find_manifests() if loader._family(p) == "recurrent"}
    return sorted(specs) or ["<no build>"]


@pytest.fixture(scope="session", params=_built_specs(), ids=lambda p: Path(p).name if "/" in p else p)
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
    if REQUIRE_GPU and rep.skipped and not hasattr(rep, "wasxfail") and item.get_closest_marker("gpu") is not None:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if NOT_BUILT in reason:  # a case this spec does not build is not a broken GPU run
            return
        rep.outcome = "failed"
        rep.longrepr = f"KDA2_REQUIRE_GPU=1 turns this skip into a failure: {reason}"
