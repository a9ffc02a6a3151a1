"""Shared fixtures, markers and options for the test suite (GPU fixtures live in tests/gpu/conftest.py).

Markers (pyproject.toml): `compile` (real nvcc / scons / pip), `gpu` (a GPU and built artifacts);
every other test is marked `unit` here, so `pytest -m unit` is the fast suite.

Options (registered here, the root conftest, so `pytest --help` lists them from anywhere in tests/):

  --seed N | random   seed of every random input in the GPU tests (default 20261130, fixed, so a GPU
                      run is reproducible; `random` draws one per process, printed in the header)
  --require-gpu       a GPU run: every skip of a gpu test fails, except a case the feature matrix
                      (tests/gpu/feature_matrix.py) says its spec does not build
  --results-dir DIR   where the chunk accuracy table goes (chunk-accuracy.json / .md); default: nowhere
  --fla-cases WHICH   chunk accuracy cases also run on FLA: all (default), none, or a comma list of ids
  --chunk-library P   the chunk-family library to test (manifest or build dir); default: $KDA2_LIBRARY
                      when it names a chunk build, else every chunk-family spec under build/

They replace the environment variables KDA2_TEST_SEED, KDA2_REQUIRE_GPU, KDA2_RESULTS_DIR and
KDA2_FLA_CASES, which the tests refuse when set (a silently ignored KDA2_REQUIRE_GPU=1 would let a
GPU run pass by skipping), and KDA2_CHUNK_LIBRARY, which only `kda2 bench chunk` still reads.
KDA2_LIBRARY and KDA2_BUILD_DIR are the runtime's own variables (kda2.runtime.loader) and stay.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

#: The default --seed: fixed, so that a GPU test run is reproducible unless asked otherwise.
DEFAULT_SEED = 20261130

#: Environment variables the tests used to read -> the option that replaced each.
RETIRED_ENV = {"KDA2_TEST_SEED": "--seed", "KDA2_REQUIRE_GPU": "--require-gpu",
               "KDA2_RESULTS_DIR": "--results-dir", "KDA2_FLA_CASES": "--fla-cases"}


def _seed(text: str) -> int | str:
    if text == "random":
        return text  # drawn once in pytest_configure (argparse may parse the command line more than once)
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer or 'random', not {text!r}") from None


def pytest_addoption(parser):
    g = parser.getgroup("kda2", "KDA² test options")
    g.addoption("--seed", type=_seed, default=DEFAULT_SEED, metavar="N|random",
                help=f"seed of the GPU tests' random inputs (default {DEFAULT_SEED}, fixed; 'random' draws one)")
    g.addoption("--require-gpu", action="store_true", default=False,
                help="GPU run: any skip of a gpu test fails, except cases the feature matrix "
                     "(tests/gpu/feature_matrix.py) says the spec does not build")
    g.addoption("--results-dir", default=None, metavar="DIR",
                help="write the chunk accuracy table (chunk-accuracy.json, .md) to DIR")
    g.addoption("--fla-cases", default="all", metavar="all|none|ID,ID",
                help="chunk accuracy cases compared against FLA (default all)")
    g.addoption("--fla-recurrent", default="kimi", choices=("kimi", "all", "none"),
                help="recurrent matrix cases compared against FLA's fused_recurrent_kda (each new dtype / layout "
                     "combination is a Triton compile): kimi (default: K=V=128, bf16 inputs, fp32 A_log/dt_bias), "
                     "all, none")
    g.addoption("--chunk-library", default=None, metavar="PATH",
                help="chunk-family library to test: manifest.json or build directory (default: $KDA2_LIBRARY "
                     "if it is a chunk build, else every chunk-family spec under build/)")


def pytest_configure(config):
    stale = [f"{name} (use {opt})" for name, opt in RETIRED_ENV.items() if name in os.environ]
    if stale:
        pytest.exit("the tests take options, not these environment variables: " + ", ".join(stale)
                    + "; unset them", returncode=pytest.ExitCode.USAGE_ERROR)
    if config.getoption("seed") == "random":
        config.option.seed = int.from_bytes(os.urandom(4), "little")


def pytest_report_header(config):
    seed = config.getoption("seed")
    require = "on" if config.getoption("require_gpu") else "off"
    return [f"kda2: --seed={seed}{' (the fixed default)' if seed == DEFAULT_SEED else ''}, --require-gpu={require}, "
            f"--results-dir={config.getoption('results_dir') or '-'}, --fla-cases={config.getoption('fla_cases')}, "
            f"--chunk-library={config.getoption('chunk_library') or '-'}"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("compile") is None and item.get_closest_marker("gpu") is None:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout under test (SConstruct, site_scons/, rules/, src/)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def seed(pytestconfig) -> int:
    """--seed: the base seed of every random input in the GPU tests (each test adds its own offset)."""
    return pytestconfig.getoption("seed")


def source_copy(where: Path) -> Path:
    """What `pip install kda2` builds from (pyproject, README, src/), copied: setuptools writes its build/lib
    scratch beside the sources, and the checkout's build/ holds the kernels."""
    import shutil

    dst = where.parent / f"{where.name}-src"
    if not dst.exists():
        dst.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(REPO_ROOT / name, dst / name)
        shutil.copytree(REPO_ROOT / "src", dst / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return dst


@pytest.fixture(scope="session")
def runtime_venv(tmp_path_factory) -> Path:
    """`pip install <checkout>` (no extras) into a fresh venv: the runtime alone, shared by the tests that need it."""
    import subprocess
    import sys

    venv = tmp_path_factory.mktemp("runtime-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    p = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source_copy(venv))],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return py
