"""trace.py on the benchmark's own inputs (kda2.bench.chunk make_sets, as overlap.py draws them) through
kda2.chunk_kda: the trace buffer goes in through args.intermediate by wrapping the library's kda2_fwd. Prints per
shape the call times, then per value head the median prep item time (ticket to flag), the chain's median step and
its end, and the head's mean decay exp(A_log)·softplus(g + dt_bias) (log units a token). Usage: python trace2.py
LIBRARY OUT.pt"""
import ctypes
import sys

import torch

import kda2
from kda2.artifact.abi import KDA2RecurrentArgs
from kda2.bench import chunk as bc
from kda2.runtime.loader import load

lib = load(sys.argv[1])
orig = lib._fwd
box = {"ptr": None}


def fwd(addr, longest, stream):
    if box["ptr"] is not None:
        KDA2RecurrentArgs.from_address(addr.value if isinstance(addr, ctypes.c_void_p) else addr).intermediate = box["ptr"]
    return orig(addr, longest, stream)


lib._fwd = fwd
l2 = torch.cuda.get_device_properties(0).L2_cache_size
saved = {}
for sid in ("B1T10240H24", "B1T10240H22", "B1T12288H28", "B1T12288H26", "B1T11264H22"):
    (s,) = bc.resolve_shapes([sid])
    R = bc.n_sets(s, l2)
    sets, shared = bc.make_sets(torch, s, R, True, 0)
    x, H, T = sets[0], s.H, s.T
    nch = -(-T // 64)
    items, ctas = nch * H, 2 * H
    tr = torch.zeros(items * 4 + ctas * (nch + 1) + 64, dtype=torch.int64, device="cuda")
    times = []
    for i in range(6):
        box["ptr"] = tr.data_ptr() if i == 5 else None
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        kda2.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=True,
                       A_log=shared["A_log"], dt_bias=shared["dt_bias"], library=lib, **bc.GATE_OPTIONS["softplus"],
                       **bc.OPTIONS)
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    box["ptr"] = None
    t = tr.cpu()
    prep = t[: items * 4].view(nch, H, 4)
    st = t[items * 4: items * 4 + ctas * (nch + 1)].view(H, 2, nch + 1)   # state CTA = blockIdx.x + 2·hv (V halves)
    t0 = int(prep[..., 0].min())
    work = (prep[..., 2] - prep[..., 1]).float() / 1e3      # [chunk, head] µs from the lead wait's end to the flag
    steps = (st[:, :, 2:] - st[:, :, 1:-1]).float() / 1e3
    end = (st[:, :, -1] - t0).float() / 1e3
    g = x["g"].float()[0] + shared["dt_bias"].view(H, -1)   # [T, H, K]
    decay = (shared["A_log"].exp().view(1, H, 1) * torch.nn.functional.softplus(g)).mean(dim=(0, 2))
    print(f"{s.label}: call ms {['%.3f' % v for v in times]} (traced: the last)")
    for h in range(H):
        print(f"  head {h:2d}: item µs median {work[:, h].median():5.1f} max {work[:, h].max():5.1f} | step µs median "
              f"{steps[h].median():4.2f} | chain ends {end[h].max():6.1f} µs | decay {decay[h]:.3f}")
    saved[sid] = {"prep": prep, "state": st, "times": times, "decay": decay.cpu()}
    del sets, shared, x
torch.save(saved, sys.argv[2])
