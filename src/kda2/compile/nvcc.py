"""The four tool steps of a build, as plain Python (no SCons): nvcc -dc to LTO-IR, nvlink -dlto to a
cubin (ptxas -v log kept), the host C++ compile and the shared-library link.

Each step writes its outputs under temporary names and renames them into place only on success, so a
killed or failed build never leaves a file that looks finished (docs/DESIGN.md §4). A failure raises
`ToolError` carrying the tool's own output.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

from kda2.compile.toolchain import Toolchain, gencode, gencode_ptx

#: nvcc folds the paths it is given and the working directory into the object (module id, line markers),
#: so a kernel is compiled from copies at a content-named path (see compile_device).
STABLE_SRC_DIR = Path("/tmp/kda2-src")
#: ptxas prints its wall time into the -v log; the log is an artifact and must be reproducible.
_VOLATILE_LOG_LINES = ("Compile time",)


class ToolError(RuntimeError):
    """A compiler or linker step failed; str() holds the command and its output."""


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _run(argv: Sequence[str], *, cwd: Path | None = None, verbose: bool = False) -> str:
    if verbose:
        print(" ".join(shlex.quote(str(a)) for a in argv), flush=True)
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise ToolError(f"`{' '.join(shlex.quote(str(a)) for a in argv)}` exited {proc.returncode}:\n{out}")
    return out


def _tree_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def uses_arch_features(config: Mapping[str, Any]) -> bool:
    """Whether a variant's code uses its arch's own features (sm_90a: warpgroup MMAs in the state pass, the prep or
    the fused twin's kernel), which the LTO path cannot
    carry: nvlink 13.0's -dlto link of `code=lto_90a` IR emits PTX for `.target sm_90`, and ptxas refuses wgmma
    there (seen: "Instruction 'wgmma.fence' not supported on .target 'sm_90'"). Such variants compile to PTX for
    their arch (`code=compute_90a`) and link by running ptxas on it (compile_device / device_link, lto=False)."""
    return config.get("state_mma") == "wgmma" or config.get("prep_wu") == "bfs" or bool(config.get("fused"))


def compile_device(tc: Toolchain, src: Path, obj: Path, *, arch: str, flags: Sequence[str],
                   include_dirs: Sequence[Path], verbose: bool = False, lto: bool = True) -> None:
    """nvcc -dc of one kernel translation unit to LTO-IR (`code=lto_XX`); lto=False: nvcc -ptx to PTX for the
    arch (`code=compute_XX`, uses_arch_features), in the same file.

    The source and copies of the include trees go to a directory named by the sha256 of all of them,
    and nvcc runs there with relative paths: the object is then the same bytes in every checkout (nvcc
    records the paths it is given), and two builds can share the directory without a race, since
    the same name always holds the same bytes.
    """
    h = hashlib.sha256(src.read_bytes())
    trees = [(root, _tree_files(root)) for root in include_dirs]
    for i, (root, files) in enumerate(trees):
        for f in files:
            h.update(f"\0{i}/{f.relative_to(root).as_posix()}\0".encode() + f.read_bytes())
    d = STABLE_SRC_DIR / h.hexdigest()[:32]
    tag = f"{os.getpid()}.{threading.get_ident()}"
    for i, (root, files) in enumerate(trees):
        for f in files:
            dst = d / f"inc{i}" / f.relative_to(root)
            if not dst.is_file():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dst.with_name(f"{dst.name}.{tag}"))
                os.replace(dst.with_name(f"{dst.name}.{tag}"), dst)
    staged = d / f"kernel.cu.{tag}"
    staged.write_bytes(src.read_bytes())
    os.replace(staged, d / "kernel.cu")
    keep = d / f"keep.{tag}"
    keep.mkdir(exist_ok=True)
    out = d / f"{obj.name}.{tag}"
    try:
        mode = ["-dc", "-gencode", gencode(arch, True)] if lto else ["-ptx", "-gencode", gencode_ptx(arch)]
        _run([*tc.launcher, tc.nvcc, "-std=c++17", "-O3", "-Xcompiler", "-fPIC", *mode,
              *(f"-Iinc{i}" for i in range(len(trees))), *flags, "-keep", "-keep-dir", keep.name, "-o", out.name,
              "kernel.cu"], cwd=d, verbose=verbose)
        obj.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(out), str(_tmp(obj)))
        os.replace(_tmp(obj), obj)
    finally:
        shutil.rmtree(keep, ignore_errors=True)
        out.unlink(missing_ok=True)


def ptxas_options(flags: Sequence[str]) -> list[str]:
    """The ptxas options in a variant's `-Xptxas=...` flags."""
    return [f.split("=", 1)[1] for f in flags if f.startswith("-Xptxas=")]


def ptxas_flags(flags: Sequence[str]) -> list[str]:
    """The `-Xptxas=...` flags of a variant, as nvlink passes them to ptxas under -dlto."""
    return [x for opt in ptxas_options(flags) for x in ("-Xptxas", opt)]


def device_link(tc: Toolchain, obj: Path, cubin: Path, log: Path, *, arch: str, flags: Sequence[str],
                nvvm_dir: Path, verbose: bool = False, lto: bool = True) -> None:
    """nvlink -dlto: LTO-IR to one cubin; lto=False: ptxas on the PTX compile_device wrote. The ptxas -v report
    goes to `log` (even on failure)."""
    tmp = _tmp(cubin)
    if lto:
        argv = [*tc.launcher, tc.nvlink, "-m64", f"--arch={arch}", "-dlto", f"-nvvmpath={nvvm_dir}", f"-L{tc.lib_dir()}",
                "-Xptxas", "-v", *ptxas_flags(flags), "-lcudadevrt", str(obj), "-o", str(tmp)]
    else:
        argv = [*tc.launcher, tc.ptxas, f"-arch={arch}", "-v", *ptxas_options(flags), str(obj), "-o", str(tmp)]
    if verbose:
        print(" ".join(shlex.quote(str(a)) for a in argv), flush=True)
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
    text = "".join(line for line in (proc.stdout + proc.stderr).splitlines(keepends=True)
                   if not any(v in line for v in _VOLATILE_LOG_LINES))
    log.parent.mkdir(parents=True, exist_ok=True)
    _write_text(log, text)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ToolError(f"{'nvlink -dlto' if lto else 'ptxas'} of {obj} exited {proc.returncode}:\n{text}")
    os.replace(tmp, cubin)


def compile_host(tc: Toolchain, src: Path, obj: Path, *, include_dirs: Sequence[Path],
                 verbose: bool = False) -> None:
    """The library's host translation unit (it embeds the cubins with .incbin, paths relative to cwd)."""
    tmp = _tmp(obj)
    try:
        _run([tc.cxx, "-std=c++17", "-O2", "-fPIC", *(f"-I{p}" for p in include_dirs), "-c", str(src),
              "-o", str(tmp)], verbose=verbose)
        os.replace(tmp, obj)
    finally:
        tmp.unlink(missing_ok=True)


def link_shared(tc: Toolchain, obj: Path, so: Path, *, verbose: bool = False) -> None:
    tmp = _tmp(so)
    try:
        _run([tc.cxx, "-shared", "-Wl,--build-id=none", "-o", str(tmp), str(obj), "-ldl"], verbose=verbose)
        os.replace(tmp, so)
    finally:
        tmp.unlink(missing_ok=True)


def _write_text(path: Path, text: str) -> None:
    tmp = _tmp(path)
    tmp.write_text(text)
    os.replace(tmp, path)


def fail(step: str, target: str, err: Exception) -> int:
    """Report a failed step the way SCons users read it (one header line, then the tool's output)."""
    sys.stderr.write(f"kda2: error: {step} {target}: {err}\n")
    return 1
