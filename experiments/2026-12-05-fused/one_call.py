"""Fused-kernel calls on one shape for ncu (profile the last with --launch-skip): the kernel compiled with -lineinfo.

usage: python one_call.py SHAPE GATE CALLS   (SHAPE: a kda2.bench.chunk shape id)
"""
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "gpu")]

from _check_kernels import Fused16  # noqa: E402

from kda2.bench import chunk as bc  # noqa: E402

shape, gate, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = bc.resolve_shapes([shape])[0]
fused = Fused16(torch, Path(tempfile.mkdtemp()), ("-lineinfo",))
sets, shared = bc.make_sets(torch, s, 1, True, seed=4321)
x = sets[0]
o, ht = torch.empty_like(x["v"]), torch.empty_like(x["h0"])
for _ in range(calls):
    fused(x["q"], x["k"], x["v"], x["g"], x["beta"], o=o, h0=x["h0"], ht=ht, A_log=shared["A_log"],
          dt_bias=shared["dt_bias"], cu_seqlens=shared["cu_seqlens"], gate=gate, v_first=True,
          lower_bound=-5.0)
torch.cuda.synchronize()
print("ok", s.label, gate, float(o.float().abs().mean()))
