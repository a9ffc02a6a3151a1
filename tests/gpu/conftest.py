"""GPU test environment: skip cleanly where there is no GPU, fail loudly where a GPU run is broken.

- no torch / torch.cuda unavailable  -> skip (a CPU build host, CI)
- a GPU but no usable built library   -> FAIL (the artifacts did not make it to the GPU host)
- KDA2_REQUIRE_GPU=1                   -> every skip of a gpu test becomes a failure
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


@pytest.fixture(scope="session")
def lib(torch_cuda):
    """The library under test: $KDA2_LIBRARY, else the single recurrent build under <repo>/build."""
    from kda2.runtime import loader
    from kda2.runtime.errors import ArtifactError

    os.environ.setdefault("KDA2_BUILD_DIR", str(ROOT / "build"))
    try:
        return loader.default_library()
    except ArtifactError as exc:
        pytest.fail(f"a GPU is present but no usable built library: {exc}")


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
        rep.outcome = "failed"
        rep.longrepr = f"KDA2_REQUIRE_GPU=1 turns this skip into a failure: {reason}"
