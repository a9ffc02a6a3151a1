"""What one kernel node costs in a replayed CUDA graph on this GPU, without our kernel: the floor under the decode
benchmark's N = 1 graph figure (issue 13: <= 4 us per step). Same harness as kda2.bench (Timer.graph: R calls
captured in one graph, replayed, per-call median), on a 1-element add (a kernel doing nothing measurable) and on a
32-block copy of 4 MB (what a one-sequence decode step at H = 32, K = V = 128 fp32 moves: 2 MB in, 2 MB out)."""
import json
import sys

import torch

from kda2.bench.timing import Timer

timer = Timer(torch)
R = 31
xs = [torch.zeros(1, device="cuda") for _ in range(R)]
src = [torch.randn(512 * 1024, device="cuda") for _ in range(R)]
dst = [torch.empty_like(s) for s in src]
out = {
    "graph_us_add1": timer.graph(lambda i: xs[i].add_(1), R, replays=20).median_ms * 1e3,
    "graph_us_copy_2MB": timer.graph(lambda i: dst[i].copy_(src[i]), R, replays=20).median_ms * 1e3,
    "kernel_us_add1": timer.kernel(lambda i: xs[i].add_(1), R, 100).median_ms * 1e3,
    "kernel_us_copy_2MB": timer.kernel(lambda i: dst[i].copy_(src[i]), R, 100).median_ms * 1e3,
}
json.dump(out, sys.stdout, indent=1)
print()
