"""Why the decode benchmark's equal-size copy (kda2.bench.recurrent bench_shape: Timer.copy_bandwidth of the call's
bytes, one source / destination pair) ran 3-4 % slower than the same copy in ceiling.py. In one process: that copy
alone; then bench_shape itself for D2 (the decode timed, then its copy_same, as the benchmark does); then the copy
again with the shape's tensors freed (torch's cache emptied) and again with decode-sized tensors held but unused.

python alloc.py LIBRARY OUT.json
"""
import json
import sys

import torch

import kda2
from kda2.bench import recurrent as rb
from kda2.bench.timing import Timer

lib = kda2.load(sys.argv[1])
timer = Timer(torch)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
s = next(x for x in rb.SHAPES if x.id == "D2")
nbytes = sum(rb.call_bytes(s, 128, 128).values()) // 2
out = {"nbytes_each_way": nbytes}


def copy(tag):
    c = timer.copy_bandwidth(nbytes=nbytes, reps=50)
    out[tag] = c
    print(f"{tag:45s} {c['ms_median'] * 1e3:7.2f} us {c['TBps']:.3f} TB/s", flush=True)


ref = timer.copy_bandwidth()
out["copy_1GiB"] = ref
copy("alone, first")
copy("alone, again")
for layout in ("v_first", "k_first"):
    copies = {}
    row = rb.bench_shape(torch, timer, rb.Ours(lib), s, 128, 128, layout, l2, ref["TBps"], False, copies)
    same = copies[nbytes]
    out[f"bench_shape {layout}"] = dict(decode_us=row["ms_median"] * 1e3, copy_same=same)
    print(f"bench_shape {layout}: decode {row['ms_median'] * 1e3:.2f} us, its copy_same "
          f"{same['ms_median'] * 1e3:.2f} us ({row['pct_copy_same']:.1f} %)", flush=True)
    copy(f"after bench_shape {layout}")
torch.cuda.empty_cache()
copy("after empty_cache")
held = [torch.randn(nbytes // 4, device="cuda") for _ in range(8)]
copy("with 8 decode-sized tensors held")
del held
json.dump(out, open(sys.argv[2], "w"), indent=1)
