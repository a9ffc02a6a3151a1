"""The overlapped chunk launch on a GPU (docs/DESIGN.md §1 overlap): the state pass launched first, the prep as its
programmatic dependent, each slot handed over by a ready flag.

Every variant of the library, launched by index with the overlap asked for (KDA2_CHUNK_OVERLAP) and refused
(KDA2_CHUNK_NO_OVERLAP) on the same inputs: the two give the same bits (the same kernels' arithmetic; only the
launch differs), nothing non-finite, both within the accuracy bar of the float64 reference. Where a variant's
state CTA does not fit beside a prep CTA the library launches it plainly both times and the test still holds.
Cases: dense (several sequences), varlen with an empty and a length-1 sequence. Outputs are
poisoned with NaN before every launch. Without a GPU every test here skips (conftest.py).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from feature_matrix import require_built  # noqa: E402
from kda2.bench.cases import Case  # noqa: E402
from test_chunk_gpu import chunk_lib  # noqa: E402,F401 - fixture

pytestmark = pytest.mark.gpu

DEVICE = "cuda"
BAR = 5e-3   # relative L2 vs the float64 reference (kda2/bench/cases.py)
# (id, N, T per sequence or None, cu_seqlens or None, H, HV): a few chunks, a handful of state CTAs
CASES = [("dense-N2-T2300-H4", 2, 2300, None, 4, 4),
         ("varlen-empty-len1-H4", 4, None, (0, 1300, 1300, 1301, 3064), 4, 4)]


def _inputs(torch, lib, N, T, cu, H, HV, v_first, seed):
    from kda2.runtime import abi

    K, V = lib.k, lib.v
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=gen, device=DEVICE)  # noqa: E731
    tot = cu[-1] if cu else N * T
    x = {"q": rn(1, tot, H, K).bfloat16(), "k": rn(1, tot, H, K).bfloat16(), "v": rn(1, tot, HV, V).bfloat16(),
         "g": rn(1, tot, HV, K), "beta": rn(1, tot, HV), "A_log": rn(HV) * 0.5, "dt_bias": rn(HV * K)}
    x["h0"] = rn(N, HV, *((V, K) if v_first else (K, V))) * 0.1
    x["o"], x["ht"] = torch.empty_like(x["v"]), torch.empty_like(x["h0"])
    a = abi.KDA2RecurrentArgs()
    a.q, a.k, a.v, a.g, a.beta = (x[n].data_ptr() for n in ("q", "k", "v", "g", "beta"))
    a.A_log, a.dt_bias, a.o, a.h0, a.ht = (x[n].data_ptr() for n in ("A_log", "dt_bias", "o", "h0", "ht"))
    if cu:
        x["cu"] = torch.tensor(cu, dtype=torch.int64, device=DEVICE)
        a.cu_seqlens, a.T, a.max_seqlen = x["cu"].data_ptr(), tot, max(b - e for e, b in zip(cu, cu[1:]))
    else:
        a.cu_seqlens, a.T, a.max_seqlen = None, T, T
    a.state_indices = None
    a.N, a.H, a.HV, a.scale, a.lower_bound = N, H, HV, K ** -0.5, -5.0
    a.gate_mode, a.state_v_first, a.split = abi.GATE_SOFTPLUS, int(v_first), 1
    x["flags"] = abi.FLAG_HAS_A_LOG | abi.FLAG_HAS_DT_BIAS | abi.FLAG_QK_L2NORM | abi.FLAG_BETA_SIGMOID
    nbytes = abi.chunk_workspace_bytes(N, tot if cu else T, HV, K, V, bool(cu))
    x["ws"] = torch.empty(nbytes, dtype=torch.uint8, device=DEVICE)
    a.workspace, a.workspace_bytes = x["ws"].data_ptr(), nbytes
    x["args"] = a
    return x


def _layouts(torch, lib, case, seed, salt):
    """Per state layout the library builds: its variants, the inputs' seed and the inputs."""
    name, N, T, cu, H, HV = case
    for v_first in (False, True):
        mine = [v for v in lib.manifest["variants"] if (v["config"]["state_layout"] == "v_first") == v_first]
        if mine:
            s = seed + salt + CASES.index(case) + 7 * v_first
            yield v_first, mine, s, _inputs(torch, lib, N, T, cu, H, HV, v_first, s)


def _launch(torch, lib, index, x, flag):
    x["o"].fill_(math.nan)
    x["ht"].fill_(math.nan)
    x["args"].flags = x["flags"] | flag
    lib.launch_variant(index, x["args"])
    torch.cuda.synchronize()
    return x["o"].clone(), x["ht"].clone()


def _rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_overlap_gives_the_plain_launchs_bits(chunk_lib, ref, torch_cuda, seed, case):
    from kda2.runtime import abi

    torch, lib = torch_cuda, chunk_lib
    name, N, T, cu, H, HV = case
    for v_first in (False, True):   # what the library lacks, its spec must not build either (else: a stale build)
        if f"{'v' if v_first else 'k'}_first" in lib.features.state_layouts:
            require_built(lib, Case(name, B=1 if cu else N, T=cu[-1] if cu else T, cu=cu, H=H, ratio=HV // H,
                                    gate="softplus", v_first=v_first))
    for v_first, mine, s, x in _layouts(torch, lib, case, seed, 900):
        cpu = {k: t.detach().double().cpu().numpy() for k, t in x.items() if k in ("q", "k", "v", "g", "beta",
                                                                                   "A_log", "dt_bias", "h0")}
        if not cu:   # dense: N sequences of T tokens, back to back
            for k in ("q", "k", "v", "g", "beta"):
                cpu[k] = cpu[k].reshape(N, T, *cpu[k].shape[2:])
        o_ref, ht_ref = ref.recurrent_kda_ref(
            cpu["q"], cpu["k"], cpu["v"], cpu["g"], cpu["beta"], scale=lib.k ** -0.5, initial_state=cpu["h0"],
            output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
            use_beta_sigmoid_in_kernel=True, A_log=cpu["A_log"], dt_bias=cpu["dt_bias"], state_v_first=v_first,
            cu_seqlens=list(cu) if cu else None)
        o_ref, ht_ref = torch.from_numpy(o_ref).reshape(x["o"].shape), torch.from_numpy(ht_ref)
        for v in mine:
            ctx = f"{name} {v['id']} ({'v_first' if v_first else 'k_first'}) [{lib.spec}] seed {s} (--seed={seed})"
            o0, h0 = _launch(torch, lib, v["index"], x, abi.FLAG_CHUNK_NO_OVERLAP)
            o1, h1 = _launch(torch, lib, v["index"], x, abi.FLAG_CHUNK_OVERLAP)
            for what, t in (("o plain", o0), ("state plain", h0), ("o overlapped", o1), ("state overlapped", h1)):
                assert bool(torch.isfinite(t.float()).all()), f"{ctx}: {what} has NaN/Inf (unwritten or overflowed)"
            assert torch.equal(o0.view(torch.int16), o1.view(torch.int16)), f"{ctx}: o differs, overlapped vs plain"
            assert torch.equal(h0.view(torch.int32), h1.view(torch.int32)), f"{ctx}: state differs, overlapped vs plain"
            e_o, e_h = _rel(o1.cpu(), o_ref), _rel(h1.cpu(), ht_ref)
            assert e_o <= BAR and e_h <= BAR, f"{ctx}: relative L2 vs float64 o {e_o:.2e}, state {e_h:.2e} > {BAR}"


def _counter(torch, x) -> int:
    """The overlapped prep's work counter, the ready region's first int32: after an overlapped launch the number of
    items it handed out (one per chunk id and head), after a plain one whatever it was before (the region is the
    workspace's last)."""
    from kda2.runtime import abi

    a = x["args"]
    off = a.workspace_bytes - abi.ready_bytes(a.N, a.T if a.cu_seqlens else a.N * a.T, a.HV)
    return int(x["ws"][off:off + 4].view(torch.int32).item())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_overlap_replays_under_a_cuda_graph(chunk_lib, torch_cuda, seed, case):
    """An overlapped launch captured in a CUDA graph (the memset node, the state kernel, the prep as its programmatic
    dependent) and replayed twice, on new inputs in the same buffers before the second replay: each replay gives
    the bits of a plain launch on the inputs of the moment. A ready region left as the last replay set it would
    let the state pass copy slots before the prep rewrites them (the memset node must run every replay)."""
    from kda2.runtime import abi

    torch, lib = torch_cuda, chunk_lib
    name, N, T, cu, H, HV = case
    for v_first, mine, s, x in _layouts(torch, lib, case, seed, 950):
        items = -(-x["args"].max_seqlen // abi.CHUNK) * HV * N   # the overlapped prep's grid
        for v in mine:
            ctx = f"{name} {v['id']} ({'v_first' if v_first else 'k_first'}) [{lib.spec}] seed {s} (--seed={seed})"
            x["args"].flags = x["flags"] | abi.FLAG_CHUNK_OVERLAP
            x["ws"].zero_()
            lib.launch_variant(v["index"], x["args"])   # loads the module outside the capture
            torch.cuda.synchronize()
            graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
            with torch.cuda.graph(graph, stream=stream):
                lib.launch_variant(v["index"], x["args"], stream_handle=stream.cuda_stream)
            for rep in range(2):
                if rep:   # new inputs, same buffers
                    gen = torch.Generator(device=DEVICE).manual_seed(s + 1000 + rep)
                    for k in ("q", "k", "v"):
                        x[k].copy_(torch.randn(x[k].shape, generator=gen, device=DEVICE))
                    x["g"].copy_(torch.randn(x["g"].shape, generator=gen, device=DEVICE))
                    x["h0"].copy_(torch.randn(x["h0"].shape, generator=gen, device=DEVICE) * 0.1)
                o0, h0 = _launch(torch, lib, v["index"], x, abi.FLAG_CHUNK_NO_OVERLAP)
                x["o"].fill_(math.nan)
                x["ht"].fill_(math.nan)
                graph.replay()
                torch.cuda.synchronize()
                got = _counter(torch, x)
                assert got in (0, items), f"{ctx}: replay {rep}: work counter {got}, expected 0 (plain) or {items}"
                assert torch.equal(x["o"].view(torch.int16), o0.view(torch.int16)), \
                    f"{ctx}: replay {rep} (counter {got}): o differs from a plain launch on the same inputs"
                assert torch.equal(x["ht"].view(torch.int32), h0.view(torch.int32)), \
                    f"{ctx}: replay {rep} (counter {got}): state differs from a plain launch on the same inputs"
            print(f"{ctx}: graph replays {'overlapped' if got else 'plain'}")
