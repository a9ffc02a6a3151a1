"""Where the CUDA tools are, what version they are, and how to call them (no SCons here).

Found once per build: `nvcc` on PATH (or $KDA2_NVCC, or $CUDA_HOME/bin/nvcc). The toolkit root is
read from `nvcc -dryrun` (nvcc may be a wrapper script, so its own path proves nothing). The pip-wheel
toolkit layout keeps libnvvm in lib/ where nvlink's LTO step does not look (docs/DESIGN.md §2.5): we give
nvlink an `-nvvmpath` directory whose lib64/libnvvm.so points at the real library.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path



#: linux/personality.h: the personality flag that turns address-space randomisation off
ADDR_NO_RANDOMIZE = 0x0040000


class ToolchainError(RuntimeError):
    """A CUDA tool is missing or unusable; the message says which and how to fix it."""


@dataclass(frozen=True)
class Toolchain:
    nvcc: str            # absolute path of the nvcc that was found
    nvlink: str          # absolute path of nvlink
    root: Path           # toolkit root (TOP of nvcc.profile)
    nvcc_version: str    # "Build cuda_13.0.r13.0/compiler.36424714_0"
    libnvvm: Path
    cxx: str             # host compiler for the library TU
    cxx_version: str
    #: The prefix every device tool runs under: address-space randomisation off (`setarch <machine> -R`), since
    #: libnvvm's output follows the address layout now and then (docs/DESIGN.md §4, "Reproducible kernels");
    #: () where the host refuses it (`no_aslr_launcher`).
    launcher: tuple[str, ...] = ()

    def ident(self) -> dict[str, str]:
        """The toolchain id in the signature of every node that runs a compiler or linker (the TIR
        stage's TVM version is in its code digest, kda2's own code in each action's)."""
        return {"schema": "2", "nvcc": self.nvcc_version, "cxx": self.cxx_version}

    @property
    def ptxas(self) -> str:
        """The toolkit's ptxas (the variants that skip the LTO link assemble their PTX with it)."""
        for cand in (self.root / "bin" / "ptxas", shutil.which("ptxas")):
            if cand and os.access(cand, os.X_OK):
                return str(cand)
        raise ToolchainError(f"ptxas not found in {self.root}/bin nor on PATH; the sm_90a wgmma variants need it")

    def include_dir(self) -> Path:
        for cand in (self.root / "include", *sorted(self.root.glob("targets/*/include"))):
            if (cand / "cuda.h").is_file():
                return cand
        raise ToolchainError(f"cuda.h not found under {self.root}/include or {self.root}/targets/*/include")

    def lib_dir(self) -> Path:
        for cand in (self.root / "lib64", self.root / "lib", *sorted(self.root.glob("targets/*/lib"))):
            if (cand / "libcudadevrt.a").is_file():
                return cand
        raise ToolchainError(f"libcudadevrt.a not found under {self.root}/lib64, lib or targets/*/lib")

    def nvvm_dir(self, scratch: Path) -> Path:
        """A directory D with D/lib64/libnvvm.so, as nvlink -dlto -nvvmpath=D wants."""
        official = self.root / "nvvm"
        if (official / "lib64" / "libnvvm.so").exists():
            return official
        tag = hashlib.sha256(str(self.libnvvm).encode()).hexdigest()[:12]
        d = scratch / f"nvvm-{tag}"
        link = d / "lib64" / "libnvvm.so"
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            tmp = link.with_name(f"libnvvm.so.{os.getpid()}")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.libnvvm)
            os.replace(tmp, link)
        return d


def tvm_version() -> str:
    try:
        return metadata.version("apache-tvm")
    except metadata.PackageNotFoundError:
        return "absent"


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"`{' '.join(argv)}` failed: {e}") from None


def no_aslr_launcher() -> tuple[str, ...]:
    """`setarch <machine> -R` if it works here (util-linux present, the personality call allowed), else ()."""
    setarch = shutil.which("setarch")
    if not setarch:
        return ()
    argv = (setarch, os.uname().machine, "-R")
    try:
        proc = subprocess.run([*argv, "cat", "/proc/self/personality"], capture_output=True, text=True, timeout=30)
        flags = int(proc.stdout.strip() or "0", 16) if proc.returncode == 0 else 0
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return ()
    return argv if flags & ADDR_NO_RANDOMIZE else ()


def _which_nvcc() -> str:
    explicit = os.environ.get("KDA2_NVCC")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise ToolchainError(f"KDA2_NVCC={explicit} is not an executable file")
        return explicit
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
        return os.path.join(home, "bin", "nvcc")
    raise ToolchainError("nvcc not found on PATH (nor $KDA2_NVCC, $CUDA_HOME/bin/nvcc); install the CUDA "
                         "13.0 toolkit (e.g. pip install 'nvidia-cuda-nvcc==13.0.*') and put nvcc on PATH")


@functools.lru_cache(maxsize=None)
def find_toolchain() -> Toolchain:
    nvcc = _which_nvcc()
    version = [ln for ln in _run([nvcc, "--version"]).splitlines() if ln.strip()][-1].strip()
    dry = subprocess.run([nvcc, "-dryrun", "-c", "kda2_probe.cu"], capture_output=True, text=True).stderr
    top = re.search(r"^#\$ TOP=(.+)$", dry, re.M)
    if not top:
        raise ToolchainError(f"could not read the toolkit root from `{nvcc} -dryrun` (no 'TOP=' line)")
    root = Path(top.group(1).strip()).resolve()
    nvlink = shutil.which("nvlink") or str(root / "bin" / "nvlink")
    if not os.access(nvlink, os.X_OK):
        raise ToolchainError(f"nvlink not found on PATH nor in {root}/bin; it is needed for the LTO device link")
    libnvvm = next((p for p in (root / "nvvm/lib64/libnvvm.so", root / "lib64/libnvvm.so", root / "lib/libnvvm.so")
                    if p.exists()), None)
    if libnvvm is None:
        raise ToolchainError(f"libnvvm.so not found under {root} (nvvm/lib64, lib64, lib); -dlto needs it")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise ToolchainError("no host C++ compiler (g++ or $CXX) found; it builds the library's host code")
    cxx_version = _run([cxx, "--version"]).splitlines()[0].strip()
    return Toolchain(nvcc=nvcc, nvlink=nvlink, root=root, nvcc_version=version, libnvvm=libnvvm.resolve(),
                     cxx=cxx, cxx_version=cxx_version, launcher=no_aslr_launcher())


def gencode_ptx(arch: str) -> str:
    """`-gencode` for PTX of an arch name like sm_90a (its own features kept: `.target sm_90a`)."""
    num = arch.removeprefix("sm_")
    return f"arch=compute_{num},code=compute_{num}"


def gencode(arch: str, lto: bool) -> str:
    """`-gencode` for an arch name like sm_90a (explicit form: the -arch shorthand adds extra code)."""
    num = arch.removeprefix("sm_")
    return f"arch=compute_{num},code={'lto' if lto else 'sm'}_{num}"
