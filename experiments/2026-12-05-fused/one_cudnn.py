"""cuDNN-FE's fused Hopper KDA kernel on one shape for ncu (profile the last call with --launch-skip): the
benchmark's inputs and marshalling (`kda2.bench.cudnn_peer.Cudnn`, bounded gate, V-first states).

usage: python one_cudnn.py SHAPE CALLS
"""
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src")]

from kda2.bench import chunk as bc  # noqa: E402
from kda2.bench.cudnn_peer import Cudnn  # noqa: E402

shape, calls = sys.argv[1], int(sys.argv[2])
s = bc.resolve_shapes([shape])[0]
sets, shared = bc.make_sets(torch, s, 1, True, seed=4321)
cudnn = Cudnn()
m = cudnn.marshal(torch, sets, shared, "lower_bound", s)
run = cudnn.call(torch, sets, shared, m)
for _ in range(calls):
    o, ht = run(0)
torch.cuda.synchronize()
print("ok", s.label, "P", m["P"], float(o.float().abs().mean()))
