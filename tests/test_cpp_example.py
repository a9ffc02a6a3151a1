"""The C ABI example for C++ inference servers (examples/cpp): it builds with its Makefile against the real
header and the CUDA runtime of the toolkit kda2.compile.toolchain finds, and it runs against every library
built under build/ — to a passing accuracy check where a GPU can run the library, else to a clean, named
failure (exit 3, "no usable CUDA device"), never a crash. Also: a library of another ABI version, a missing
library and a shared object that is not a KDA² library are refused by name (exit 2), and `make run` without
KDA2_LIB says what to set. The GPU counterpart is tests/gpu/test_cpp_example_gpu.py.

Marked `compile` (it runs g++ and make; CI has nvcc, hence the CUDA runtime headers). Skipped where nvcc,
g++ or make is missing.
"""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kda2.artifact.abi import ABI_VERSION

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "cpp"
HEADER_DIR = REPO / "src" / "kda2" / "codegen" / "include"
TOLERANCE = 5e-3
ABI_LINE = f"abi_version: {ABI_VERSION} (header KDA2_ABI_VERSION {ABI_VERSION}): ok"
# Exit codes of kda2_example (its header comment and README)
EXIT_OK, EXIT_WRONG, EXIT_SETUP, EXIT_NO_DEVICE, EXIT_CALL = 0, 1, 2, 3, 4

pytestmark = pytest.mark.compile

_missing = [t for t in ("nvcc", "make") if shutil.which(t) is None]
if _missing:
    pytest.skip(f"{' and '.join(_missing)} not on PATH; the C++ example needs the CUDA runtime headers and make "
                "(CI has them, so these tests run there)", allow_module_level=True)


def built_libraries() -> list[Path]:
    """Every lib<spec>.<arch>.so under build/ (known at collection time, no GPU needed)."""
    return sorted(p for p in (REPO / "build").glob("*/*/lib*.so") if (p.parent / "manifest.json").is_file())


def gpu_capability() -> tuple[int, int] | None:
    """(major, minor) of device 0 through libcuda alone (no torch, no cuda-python), or None without a GPU."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return None
    dev = ctypes.c_int(0)
    if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        return None
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # ..._MINOR
    return major.value, minor.value


def runs_here(so: Path, capability: tuple[int, int]) -> bool:
    """Whether `so` is the build of its spec the runtime would pick for this GPU (the current-arch one)."""
    from kda2.runtime.device import arch_preference

    prefs = arch_preference(capability)
    built = [p.name for p in so.parent.parent.iterdir() if (p / "manifest.json").is_file()]
    best = next((a for a in prefs if a in built), None)
    return best == so.parent.name


def make_vars(out: Path) -> list[str]:
    """The toolkit's include and lib dirs, found as the build itself finds them (kda2.compile.toolchain)."""
    from kda2.compile.toolchain import find_toolchain

    tc = find_toolchain()
    return [f"BUILD={out}", f"CXX={tc.cxx}", f"CUDA_HOME={tc.root}", f"CUDA_INC={tc.include_dir()}",
            f"CUDA_LIB={tc.lib_dir()}"]


def run(argv: list, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cpp-example")


@pytest.fixture(scope="module")
def example(build_dir: Path) -> Path:
    """The example, built with its Makefile (warnings are errors here)."""
    p = run(["make", "-C", EXAMPLE, *make_vars(build_dir), "EXTRA_CXXFLAGS=-Werror"])
    assert p.returncode == 0, f"make failed:\n{p.stdout}\n{p.stderr}"
    binary = build_dir / "kda2_example"
    assert binary.is_file()
    return binary


def test_builds_against_the_public_header(example: Path):
    p = run([example, "--help"])
    assert p.returncode == EXIT_SETUP and "usage: kda2_example" in p.stderr


def test_makefile_finds_the_toolkit_like_the_build(tmp_path: Path):
    """Without overrides, the Makefile's own discovery (`nvcc -dryrun`) agrees with kda2.compile.toolchain."""
    from kda2.compile.toolchain import find_toolchain

    tc = find_toolchain()
    p = run(["make", "-s", "-C", EXAMPLE, f"BUILD={tmp_path}", "print-config"])
    assert p.returncode == 0, p.stderr
    found = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    assert Path(found["CUDA_HOME"]).resolve() == tc.root
    assert Path(found["CUDA_INC"]).resolve() == tc.include_dir().resolve()
    assert Path(found["CUDART"]).is_file(), found


@pytest.mark.parametrize("so", built_libraries() or [None],
                         ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}" if p else "nothing-built")
def test_runs_on_built_library(example: Path, so: Path | None):
    if so is None:
        pytest.skip(f"no library built under {REPO / 'build'} (run `scons`)")
    p = run([example, so])
    out, err = p.stdout, p.stderr
    assert p.returncode >= 0, f"killed by signal {-p.returncode}:\n{out}\n{err}"
    # What needs no GPU: the library loads, its ABI matches the header, its JSON is printed, a call is planned.
    assert ABI_LINE in out, out + err
    json_line = next((ln for ln in out.splitlines() if ln.startswith("library json: {")), None)
    assert json_line is not None and f'"spec":"{so.parent.parent.name}"' in json_line, out
    assert re.search(r"^call: N=\d+ T=\d+ .* -> variant \d+, workspace \d+ bytes$", out, re.M), out
    cap = gpu_capability()
    if cap is None:
        assert p.returncode == EXIT_NO_DEVICE, f"exit {p.returncode} without a GPU:\n{out}\n{err}"
        assert "no usable CUDA device" in err and "kda2_fwd needs a GPU" in err, err
        return
    if runs_here(so, cap):
        assert p.returncode == EXIT_OK, f"exit {p.returncode}:\n{out}\n{err}"
        m = re.search(r"^max relative error: (\S+) .*: PASS$", out, re.M)
        assert m and float(m.group(1)) <= TOLERANCE, out
    else:  # another arch's build: it may run (PTX, same major) or fail by name, never crash
        assert p.returncode in (EXIT_OK, EXIT_CALL), f"exit {p.returncode}:\n{out}\n{err}"
        if p.returncode == EXIT_CALL:
            assert re.search(r"kda2_(preload|fwd) returned (KDA2_ERR_\w+|CUresult \d+)", err), err


def _shared_object(tmp_path: Path, name: str, source: str) -> Path:
    from kda2.compile.toolchain import find_toolchain

    src = tmp_path / f"{name}.cpp"
    src.write_text(source)
    so = tmp_path / f"lib{name}.so"
    p = run([find_toolchain().cxx, "-shared", "-fPIC", f"-I{HEADER_DIR}", "-o", so, src])
    assert p.returncode == 0, p.stderr
    return so


def test_refuses_another_abi_version(example: Path, tmp_path: Path):
    so = _shared_object(tmp_path, "other_abi", '#include "kda2/abi.h"\n'
                        'extern "C" int kda2_abi_version(void) { return KDA2_ABI_VERSION + 1; }\n')
    p = run([example, so])
    assert p.returncode == EXIT_SETUP, p.stdout + p.stderr
    assert "ABI mismatch" in p.stderr and f"KDA2_ABI_VERSION {ABI_VERSION}" in p.stderr, p.stderr


def test_refuses_what_is_not_a_kda2_library(example: Path, tmp_path: Path):
    so = _shared_object(tmp_path, "not_kda2", 'extern "C" int something_else(void) { return 0; }\n')
    p = run([example, so])
    assert p.returncode == EXIT_SETUP and "does not export kda2_abi_version" in p.stderr, p.stderr
    p = run([example, tmp_path / "missing.so"])
    assert p.returncode == EXIT_SETUP and "cannot load the library" in p.stderr, p.stderr


def test_make_run(example: Path, build_dir: Path):
    """`make run` needs KDA2_LIB (and says so); a path relative to the repository root works from -C."""
    p = run(["make", "-C", EXAMPLE, *make_vars(build_dir), "EXTRA_CXXFLAGS=-Werror", "run"])
    assert p.returncode != 0 and "set KDA2_LIB=" in p.stderr, p.stdout + p.stderr
    libs = built_libraries()
    if not libs:
        pytest.skip(f"no library built under {REPO / 'build'}")
    rel = libs[0].relative_to(REPO)
    p = run(["make", "-C", EXAMPLE, *make_vars(build_dir), "EXTRA_CXXFLAGS=-Werror", "run", f"KDA2_LIB={rel}"])
    assert ABI_LINE in p.stdout, p.stdout + p.stderr


# --- argument checks and kda2 status messages (no GPU, no built library: a stand-in .so) ---------------------

# A recurrent library in miniature: K = V = 8, k_first buckets 1 and 64 only; kda2_fwd returns $FAKE_KDA2_FWD_RC
# (0 when unset), so the N = 0 probe can be made to refuse. It never gets past the probe on a CPU host.
_STAND_IN = r'''
#include <stdlib.h>
#include "kda2/abi.h"
#define STR2(x) #x
#define STR(x) STR2(x)
extern "C" {
int kda2_abi_version(void) { return KDA2_ABI_VERSION; }
const char* kda2_library_json(void) {
  return "{\"abi_version\":" STR(KDA2_ABI_VERSION) ",\"arch\":\"sm_90a\",\"dispatch\":["
         "{\"bucket\":1,\"class\":\"all\",\"index\":0,\"min_chains\":0,\"state_layout\":\"k_first\",\"variant\":\"a\"},"
         "{\"bucket\":64,\"class\":\"all\",\"index\":1,\"min_chains\":0,\"state_layout\":\"k_first\",\"variant\":\"b\"}],"
         "\"family\":\"recurrent\",\"k\":8,\"spec\":\"stand_in\",\"v\":8,\"variants\":[\"a\",\"b\"]}";
}
int kda2_num_variants(void) { return 2; }
int kda2_route(int32_t v_first, int64_t max_seqlen, int64_t chains) {
  (void)chains;
  if (v_first) return KDA2_ERR_LAYOUT;
  return max_seqlen <= 1 ? 0 : max_seqlen <= 64 ? 1 : KDA2_ERR_BUCKET_OVERFLOW;
}
int kda2_select(int32_t v_first, int64_t max_seqlen, int64_t chains) { return kda2_route(v_first, max_seqlen, chains); }
int64_t kda2_workspace_bytes(const KDA2RecurrentArgs* a) { (void)a; return 0; }
int kda2_preload(void) { return KDA2_OK; }
int kda2_launch(int i, const KDA2RecurrentArgs* a, void* s) { (void)i; (void)a; (void)s; return KDA2_OK; }
int kda2_fwd(const KDA2RecurrentArgs* a, int64_t m, void* s) {
  (void)a; (void)m; (void)s;
  const char* rc = getenv("FAKE_KDA2_FWD_RC");
  return rc ? atoi(rc) : KDA2_OK;
}
}
'''


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    return _shared_object(tmp_path_factory.mktemp("stand-in"), "stand_in", _STAND_IN)


def _run_env(argv: list, **env) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


@pytest.mark.parametrize("args, rule", [
    (["--bogus"], "unknown option --bogus"),
    (["--bogus", "1"], "unknown option --bogus"),
    (["--t=5"], "unknown option --t=5 (write the value after a space: --t 5)"),
    (["-x"], "unknown option -x"),
    (["--t"], "--t needs a value"),
    (["--h", "3", "--hv", "4"], "--h 3 with --hv 4: HV must be a multiple of H (HV % H == 0"),
    (["--hv", "3"], "--h 2 with --hv 3: HV must be a multiple of H"),
    (["--h", "0"], "--h: got '0'; allowed: an integer from 1 to"),
    (["--n", "70000"], "--n: got '70000'; allowed: an integer from 1 to 65535"),
    (["--t", "abc"], "--t: got 'abc'; allowed: an integer"),
    (["--layout", "x"], "--layout: got 'x'; allowed: auto, k_first or v_first"),
])
def test_argument_problems_are_usage_errors(example: Path, args: list, rule: str):
    """Caught before the library is loaded (the path does not even exist): exit 2, the rule, the usage."""
    p = run([example, "/nonexistent/lib.so", *args])
    assert p.returncode == EXIT_SETUP, p.stdout + p.stderr
    assert rule in p.stderr and "usage: kda2_example" in p.stderr, p.stderr
    assert "cannot load the library" not in p.stderr and "needs a value" not in p.stderr.replace("--t needs", "")


def test_library_dependent_argument_problems(example: Path, stand_in: Path):
    p = run([example, stand_in, "--k", "16"])
    assert p.returncode == EXIT_SETUP and "--k 16: the library is built for K=8 (library json)" in p.stderr, p.stderr
    p = run([example, stand_in, "--n", "4096", "--t", "4096"])
    assert p.returncode == EXIT_SETUP and "N x T = 4096 x 4096 tokens" in p.stderr, p.stderr


def test_kda2_status_is_explained(example: Path, stand_in: Path):
    """A status from the library comes with its meaning, and with what the dispatch table says about it."""
    p = run([example, stand_in, "--t", "100"])
    assert p.returncode == EXIT_SETUP, p.stdout + p.stderr
    assert "returned KDA2_ERR_BUCKET_OVERFLOW: max_seqlen is above the largest sequence-length bucket" in p.stderr
    assert "T=100 is over the largest k_first bucket, 64 (buckets 1, 64): pass --t 64 or less" in p.stderr, p.stderr
    p = run([example, stand_in, "--layout", "v_first"])
    assert p.returncode == EXIT_SETUP, p.stdout + p.stderr
    assert "KDA2_ERR_LAYOUT: the state layout is not built into this library; the library routes k_first" in p.stderr
    p = _run_env([example, stand_in, "--gate", "precomputed"], FAKE_KDA2_FWD_RC="-3")
    assert p.returncode == EXIT_SETUP, p.stdout + p.stderr
    assert "kda2_fwd (feature probe, N = 0) returned KDA2_ERR_FEATURE: a gate mode or flag" in p.stderr, p.stderr
    assert "try --gate auto" in p.stderr
    p = _run_env([example, stand_in], FAKE_KDA2_FWD_RC="-5")
    assert p.returncode == EXIT_SETUP and "KDA2_ERR_SHAPE: H/HV/N/T/max_seqlen are inconsistent" in p.stderr, p.stderr
    # and the happy path of the stand-in reaches the device check, as a real library does on a CPU host
    p = run([example, stand_in, "--t", "64", "--h", "2", "--hv", "4"])
    assert "call: N=4 T=64 H=2 HV=4 layout k_first" in p.stdout, p.stdout + p.stderr
    if gpu_capability() is None:
        assert p.returncode == EXIT_NO_DEVICE, p.stdout + p.stderr


def _usage_options(text: str) -> set[str]:
    return set(re.findall(r"\[(--[a-z]+)", text))


def test_readme_usage_matches_the_program(example: Path):
    """The README's usage line, the source's header comment and --help list the same options, all accepted."""
    help_text = run([example, "--help"]).stderr
    opts = _usage_options(help_text)
    assert {"--k", "--v", "--seed", "--layout", "--gate", "--device"} <= opts, help_text
    readme = (EXAMPLE / "README.md").read_text()
    m = re.search(r"kda2_example <lib\.so>(.*?)\n\n", readme, re.S)
    assert m and _usage_options(m.group(1)) == opts, (m and m.group(1), opts)
    header = (EXAMPLE / "kda2_example.cpp").read_text().split("#include")[0]
    m = re.search(r"kda2_example <lib\.so>(.*?)\n//\n", header, re.S)
    assert m and _usage_options(m.group(1)) == opts
    for opt in sorted(opts):  # each one parses (then the missing library stops the run)
        val = {"--layout": "auto", "--gate": "auto", "--hv": "2"}.get(opt, "1")
        p = run([example, "/nonexistent/lib.so", opt, val])
        assert p.returncode == EXIT_SETUP and "cannot load the library" in p.stderr, (opt, p.stderr)
