"""Timeline of an overlapped chunk call from a trace build (trace.patch: the prep records per item its ticket time,
the end of its lead wait, its flag release and its SM; each state CTA records its SM and when it saw each chunk's
flag; both through args.intermediate, %globaltimer in ns). Prints, per shape, the call's time, the state CTAs'
start / end spread and their slowest steps, and where prep items waited. Usage: python trace.py LIBRARY OUT.pt"""
import sys

import torch

from kda2.runtime import abi
from kda2.runtime.loader import load
from kda2.tools.tune import _case

lib = load(sys.argv[1])
cfg = next(v["config"] for v in lib.manifest["variants"] if v["config"]["state_layout"] == "v_first")
stream = torch.cuda.current_stream().cuda_stream
saved = {}
for T, H in ((10240, 24), (10240, 22), (12288, 28), (12288, 26)):
    c = _case(torch, abi, cfg, {"qk_l2norm": True, "beta_sigmoid": True}, 1, T, H, H, seed=0)
    a = c["args"]
    nch = -(-T // 64)
    items, ctas = nch * H, 2 * H
    tr = torch.zeros(items * 4 + ctas * (nch + 1) + 64, dtype=torch.int64, device="cuda")
    times = []
    for i in range(6):
        a.intermediate = tr.data_ptr() if i == 5 else None
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        lib.launch_raw(a, T, stream)
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    t = tr.cpu()
    prep = t[: items * 4].view(items, 4)
    st = t[items * 4: items * 4 + ctas * (nch + 1)].view(ctas, nch + 1)
    t0 = min(int(prep[:, 0].min()), int(st[:, 1].min()))
    steps = (st[:, 2:] - st[:, 1:-1]).float() / 1e3   # µs between consecutive flags seen
    print(f"T{T} H{H}: call ms {['%.3f' % x for x in times]}  (traced: the last)")
    print(f"  state CTAs: first flag seen at {(st[:, 1] - t0).float().min() / 1e3:.1f}..{(st[:, 1] - t0).float().max() / 1e3:.1f} µs,"
          f" last at {(st[:, -1] - t0).float().min() / 1e3:.1f}..{(st[:, -1] - t0).float().max() / 1e3:.1f} µs; "
          f"SMs {sorted(set(st[:, 0].tolist()))[:6]}... distinct {len(set(st[:, 0].tolist()))}")
    print(f"  steps µs: median {steps.median():.2f}, max {steps.max():.1f}; CTAs with a step > 20 µs: "
          f"{[(int(i), int(steps[i].argmax()), round(float(steps[i].max()), 1)) for i in range(ctas) if steps[i].max() > 20][:12]}")
    wait = (prep[:, 1] - prep[:, 0]).float() / 1e3
    work = (prep[:, 2] - prep[:, 1]).float() / 1e3
    start = (prep[:, 0] - t0).float() / 1e3
    print(f"  prep: lead wait median {wait.median():.1f} max {wait.max():.1f} µs (items waiting > 50 µs: "
          f"{int((wait > 50).sum())}); item work median {work.median():.1f} max {work.max():.1f}; tickets taken "
          f"{start.min():.1f}..{start.max():.1f} µs; SMs {len(set(prep[:, 3].tolist()))}")
    big = torch.nonzero(wait > 50).flatten()[:8].tolist()
    print(f"  long waits (item: chunk, head, start µs, wait µs): {[(i // H, i % H, round(float(start[i]), 1), round(float(wait[i]), 1)) for i in big]}")
    saved[f"T{T}H{H}"] = {"prep": prep, "state": st, "times": times}
torch.save(saved, sys.argv[2])
