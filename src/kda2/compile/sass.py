"""SASS checks of built cubins: which instructions a family's kernels must contain, and none that use
local memory (docs/DESIGN.md §4). cuobjdump / nvdisasm come from the CUDA toolkit or the pip packages
nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping

from kda2.compile.nvcc import uses_arch_features

EXPECTED_SASS = {
    # recurrent: warp-shuffle reductions and streaming (evict-first) state loads/stores; the vector width
    # follows the layout (16 B at K=128 lanes-over-K, 8 B at K=64, 4 B with one column per lane), so the
    # check is on the cache policy; smem staging adds LDS/STS.128.
    "recurrent": ("SHFL.BFLY", "LDG.E.EF", "STG.E.EF"),
    # chunk: bf16 tensor-core MMAs (off-diagonal blocks, w/u, the state pass), tf32 ones (the prep's diagonal
    # blocks), ldmatrix (LDSM) and cp.async (LDGSTS) tile loads.
    "chunk": ("HMMA.16816.F32.BF16", "HMMA.1688.F32.TF32", "LDSM", "LDGSTS"),
}
#: Added per (family, arch prefix): on sm_90 the chunk state pass takes its tiles by bulk copy (UBLKCP)
#: completing on an mbarrier (SYNCS); the recurrent kernels wait for and signal programmatic dependent launches
#: (griddepcontrol.wait / .launch_dependents: ACQBULK, PREEXIT; recurrent.cuh Kernel::run).
EXPECTED_SASS_ARCH = {("chunk", "sm_9"): ("UBLKCP", "SYNCS"), ("recurrent", "sm_9"): ("ACQBULK", "PREEXIT")}
FORBIDDEN_SASS = ("LDL", "STL")  # local memory = spills or dynamically indexed register arrays


def find_tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    try:  # pip packages nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm
        import nvidia  # type: ignore[import-not-found]
        for base in nvidia.__path__:
            for cand in Path(base).glob(f"cu*/bin/{name}"):
                return str(cand)
    except ImportError:
        pass
    return None


def sass_opcodes(cubin: Path) -> dict[str, int]:
    cuobjdump, nvdisasm = find_tool("cuobjdump"), find_tool("nvdisasm")
    if not cuobjdump or not nvdisasm:
        raise FileNotFoundError("cuobjdump/nvdisasm not found: pip install 'nvidia-cuda-cuobjdump==13.2.*' "
                                "'nvidia-cuda-nvdisasm==13.2.*' (or put the CUDA toolkit's on PATH)")
    env = dict(os.environ, PATH=f"{os.path.dirname(nvdisasm)}:{os.environ.get('PATH', '')}")
    out = subprocess.run([cuobjdump, "--dump-sass", str(cubin)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"cuobjdump failed on {cubin}: {out.stderr.strip()}")
    ops: dict[str, int] = {}
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", out.stdout):
        ops[m[1]] = ops.get(m[1], 0) + 1
    return ops


def expected_for(family: str, arch: str, config: Mapping[str, Any]) -> list[str]:
    """The instructions a variant's SASS must contain."""
    expected = list(EXPECTED_SASS.get(family, ()))
    for (fam, prefix), extra in EXPECTED_SASS_ARCH.items():
        if fam == family and arch.startswith(prefix):
            expected += extra
    if config.get("staging") == "smem":
        expected += ["LDS.128", "STS.128"]
    if config.get("preload"):  # every token's inputs arrive by cp.async, beside the state loads
        expected += ["LDGSTS"]
    if family == "chunk" and uses_arch_features(config):
        expected += ["HGMMA"]   # the state pass's or the prep's products on warpgroup MMAs (sm_90a)
    if family == "recurrent" and config.get("persistent"):
        # the state comes in by cp.async into the next-tile copy buffer (no L2 cache hint: recurrent.cuh,
        # cp_async), and is read back from shared memory
        expected = [e for e in expected if e != "LDG.E.EF"] + ["LDGSTS", "LDS"]
    if family == "recurrent" and config.get("staging") == "bulk":
        # the state tile in and out by bulk copies on an mbarrier, not by streaming loads and stores: a v_first tile
        # by linear copies, a k_first one by tensor-map boxes (recurrent.cuh StateMaps)
        copies = ["UBLKCP"] if config.get("state_layout") == "v_first" else ["UTMALDG", "UTMASTG"]
        expected = [e for e in expected if e not in ("LDG.E.EF", "STG.E.EF")] + copies + ["SYNCS"]
        if arch.startswith("sm_9") and config.get("min_ctas", 1) == 1:
            # at the compiler's occupancy, L2 is asked for the tile a CTA of the next wave reads (recurrent.cuh
            # bulk_prefetch_ahead): a bulk prefetch, a tensor-map one for k_first
            expected += ["UBLKPF"] if config.get("state_layout") == "v_first" else ["UTMAPF"]
    return expected


def check(ops: Mapping[str, int], family: str, arch: str, config: Mapping[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(expected, missing, local-memory opcodes) of one cubin's opcode counts."""
    expected = expected_for(family, arch, config)
    missing = [e for e in expected if not any(op == e or op.startswith(e + ".") for op in ops)]
    local = sorted(op for op in ops if op.split(".")[0] in FORBIDDEN_SASS)
    return expected, missing, local
