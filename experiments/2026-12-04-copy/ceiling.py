"""Copies of a decode call's bytes against the benchmark's 1 GiB copy, timed as kda2.bench.timing times both (GPU spin
before each call, CUDA events around it, median), input sets rotated so that no call finds its source in L2.

python ceiling.py LIBCOPY.so OUT.json [SIZES: how many of D2, D3, 1 GiB] [hints | same: the cache-hint variants, or the benchmark's equal-size copy against rotated pairs]
"""
import ctypes
import json
import sys

import torch

from kda2.bench.timing import Timer

lib = ctypes.CDLL(sys.argv[1])
lib.copy_launch.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
timer = Timer(torch)
VARIANTS = [("cudaMemcpyAsync", 0, 0), ("grid-stride 1 CTA/SM", 1, 1), ("grid-stride 4 CTAs/SM", 1, 4),
            ("grid-stride 8 CTAs/SM", 1, 8), ("tile 64 KB", 2, 0), ("tile 64 KB streaming", 3, 0), ("tile 32 KB", 4, 0),
            ("bulk 32 KB", 5, 0), ("bulk 64 KB", 6, 0),
            ("tile 16 KB", 7, 0), ("tile 8 KB", 8, 0), ("tile 32 KB L2::256B", 9, 0), ("tile 64 KB L2::256B", 10, 0),
            ("tile 32 KB 128 thr", 11, 0), ("tile 32 KB 512 thr", 12, 0), ("tile 16 KB L2::256B", 13, 0),
            ("bulk 16 KB", 14, 0)]
LDS, STS = ["ld", "ld.cs", "ld.nc.noalloc", "ld.lu"], ["st", "st.cs"]
HINTS = [(f"16 KB/128 thr {LDS[v // 10 % 10]} {STS[v % 10]}", v, 0) for v in (100, 101, 110, 111, 120, 121, 130, 131)] + \
        [(f"8 KB/256 thr {LDS[v // 10 % 10]} {STS[v % 10]}", v, 0) for v in (200, 201, 210, 211, 220, 230)]
if len(sys.argv) > 4 and sys.argv[4] == "hints":
    VARIANTS = [VARIANTS[0]] + HINTS
# "same": the benchmark's equal-size copy (kda2.bench.recurrent: torch copy_ of one source into one destination, the
# same pair every call) against torch copy_ and cudaMemcpyAsync with the pairs rotated, and cudaMemcpyAsync on one pair
SAME = len(sys.argv) > 4 and sys.argv[4] == "same"
if SAME:
    VARIANTS = [("torch copy_, rotated", -1, 0), ("torch copy_, one pair", -1, 1), ("cudaMemcpyAsync, rotated", 0, 0),
                ("cudaMemcpyAsync, one pair", 0, 1), ("torch copy_, rotated", -1, 0), ("torch copy_, one pair", -1, 1)]
STATE = 64 * 32 * 128 * 128 * 4   # D2 / M1: N 64, H 32, K = V = 128 fp32 (one way)
rows = []
ref = timer.copy_bandwidth()      # the benchmark's reference: torch copy_, 1 GiB, same src / dst
print("torch 1 GiB copy", ref, flush=True)
SIZES = (("D2 state bytes", STATE), ("D3 state bytes", 4 * STATE), ("1 GiB", 1 << 30))
for label, nbytes in SIZES[: int(sys.argv[3]) if len(sys.argv) > 3 else None]:
    R = max(2, -(-(200 << 20) // nbytes))   # source sets so that ≥ 200 MB lie between two reads of one set
    srcs = [torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_() for _ in range(R)]
    dsts = [torch.empty_like(s) for s in srcs]
    stream = torch.cuda.current_stream().cuda_stream
    for name, v, p in VARIANTS:
        def call(i, v=v, p=p, name=name):
            if SAME and p == 1:   # one pair: every call copies set 0
                i = 0
            if v < 0:
                dsts[i].copy_(srcs[i])
                return
            rc = lib.copy_launch(v, dsts[i].data_ptr(), srcs[i].data_ptr(), nbytes, 0 if SAME else p, stream)
            if rc != 0:
                raise RuntimeError(f"{name}: cuda error {rc}")
        call(0)
        torch.cuda.synchronize()
        if not torch.equal(dsts[0], srcs[0]):
            raise RuntimeError(f"{name}: copy wrong")
        st = timer.kernel(call, R, 30)
        tbps = 2 * nbytes / (st.median_ms * 1e-3) / 1e12
        r = dict(size=label, bytes=2 * nbytes, variant=name, us=st.median_ms * 1e3, TBps=tbps,
                 pct_of_1GiB_torch=100 * tbps / ref["TBps"])
        rows.append(r)
        print(f"{label:15s} {name:24s} {r['us']:9.2f} us {tbps:6.3f} TB/s {r['pct_of_1GiB_torch']:6.1f} %", flush=True)
    del srcs, dsts
    torch.cuda.empty_cache()
json.dump(dict(reference=ref, rows=rows, device=torch.cuda.get_device_name(0)), open(sys.argv[2], "w"), indent=1)
