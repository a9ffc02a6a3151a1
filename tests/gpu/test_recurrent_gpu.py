"""The built recurrent KDA library on a GPU, against the float64 reference (kda2.reference).

Every output and final state is poisoned with NaN before the call, so an element the kernel fails to
write shows up as NaN. Inputs are random draws from --seed (default fixed, so a run is reproducible;
`--seed random` for fresh ones; the seed is in the header and in every failure). A covering set of
cases, not the full cartesian product: every gate mode appears with both state layouts, every GVA
ratio, every T of {1, 2, 63, 64, 500, 1000}, both dtypes of g and beta, with and without
initial/final state, three varlen packings, bf16 and fp16 inputs, fp32 and bf16 A_log / dt_bias, and a
GVA ratio that is not a power of two (issue 13; test_recurrent_matrix_gpu.py has the full matrix). A case the library lacks is checked against its spec
file (feature_matrix.require_built): skipped if the spec does not build it, a failure if it does.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from feature_matrix import require_built  # noqa: E402

TOL = 5e-3


@dataclass(frozen=True)
class Case:
    id: str
    B: int = 1
    T: int = 1
    cu: tuple[int, ...] | None = None
    H: int = 2
    ratio: int = 1
    gate: str = "precomputed"          # precomputed | softplus | lower_bound
    a_log: bool = True
    dt_bias: bool = True
    lower_bound: float = -5.0
    l2: bool = True
    bsig: bool = True
    neg: bool = False
    h0: bool = True
    final: bool = True
    v_first: bool = False
    g_bf16: bool = False               # g 16-bit, in the input dtype
    beta_bf16: bool = False            # beta 16-bit, in the input dtype
    scale: float | None = None
    dtype: str = "bf16"                # q/k/v/o: bf16 | fp16
    param: str = "fp32"                # A_log / dt_bias dtype: fp32, bf16 or fp16
    strong_g: float | None = None      # precomputed gate: this log decay on 10 channels of every odd token

    @property
    def longest(self) -> int:
        return max(b - a for a, b in zip(self.cu, self.cu[1:])) if self.cu else self.T


CASES = [
    Case("T1-decode-precomputed-kf", B=4, T=1, l2=False, bsig=False),
    Case("T1-decode-lowerbound-vf-gva2", B=8, T=1, ratio=2, gate="lower_bound", v_first=True, beta_bf16=True),
    Case("T2-softplus-vf-gva2-gbf16", B=2, T=2, ratio=2, gate="softplus", v_first=True, g_bf16=True),
    Case("T63-lowerbound-gva4-negeig", B=2, T=63, H=1, ratio=4, gate="lower_bound", neg=True, beta_bf16=True),
    Case("T64-softplus-nodt-noh0-vf", B=1, T=64, gate="softplus", dt_bias=False, bsig=False, h0=False, v_first=True),
    Case("T64-lowerbound-noAlog-vf-gva2", B=2, T=64, ratio=2, gate="lower_bound", a_log=False, l2=False, v_first=True),
    Case("T500-precomputed-gva2-scale", B=1, T=500, ratio=2, g_bf16=True, scale=0.05),
    Case("T1000-kimi-softplus-vf", B=1, T=1000, gate="softplus", v_first=True),
    Case("T2-nofinal-gva4-kf", B=3, T=2, ratio=4, gate="softplus", final=False),
    Case("varlen-15-softplus-vf", cu=(0, 15), gate="softplus", v_first=True),
    Case("varlen-256-500-1000-lowerbound-gva2-kf", cu=(0, 256, 500, 1000), ratio=2, gate="lower_bound"),
    Case("varlen-1-2-50-51-precomputed-gva4-vf", cu=(0, 1, 2, 50, 51), H=1, ratio=4, l2=False, bsig=False,
         h0=False, v_first=True, beta_bf16=True),
    Case("T1-decode-fp16-softplus-vf-gva8-pbf16", B=8, T=1, H=1, ratio=8, gate="softplus", v_first=True,
         dtype="fp16", param="bf16"),
    Case("T64-fp16-lowerbound-kf-g16-b16", B=2, T=64, gate="lower_bound", dtype="fp16", g_bf16=True, beta_bf16=True),
    Case("T5-softplus-kf-pbf16-gva4", B=3, T=5, H=1, ratio=4, gate="softplus", param="bf16"),
    Case("T3-softplus-vf-gva3", B=2, T=3, ratio=3, gate="softplus", v_first=True),
    # Strong decays inside a multi-token block (every other token, 10 channels): 2^-17 a token (-12), and a decay that
    # is 0 in fp32 (-200). A kernel that defers the decay over a block must restart it there
    # (experiments/2026-12-05-defer ran these on one).
    Case("T8-strong-decay-kf", B=2, T=8, strong_g=-12.0),
    Case("T7-zero-decay-kf-gva2", B=2, T=7, ratio=2, strong_g=-200.0),
    Case("varlen-3-8-5-strong-decay-kf", cu=(0, 3, 11, 16), strong_g=-12.0),
    Case("varlen-3-37-1-fp16-softplus-vf-gva2", cu=(0, 3, 40, 41), ratio=2, gate="softplus", v_first=True,
         dtype="fp16", param="bf16"),
]


def _gate(f) -> str:
    """The Kimi-Linear gate (softplus) if built, else the first. `f`: library features or feature_matrix.Built."""
    return "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]


def pool_case(f, v_first: bool, T: int | None, cu: tuple[int, ...] | None) -> Case:
    """test_pool_in_place's case for a library with features `f` (also feature_matrix's view of a spec)."""
    return Case("pool", B=4, T=T or 1, cu=cu, gate=_gate(f), v_first=v_first, ratio=4, H=1)


def prepared_case(f) -> Case:
    """test_prepared_pool_matches_and_checks's case for a library with features `f`."""
    return Case("prepared", B=3, T=1, cu=None, gate=_gate(f), v_first="v_first" in f.state_layouts, ratio=1, H=2)


def make_inputs(torch, lib, c: Case, seed: int) -> dict:
    """Realistic inputs (docs/DESIGN.md §1.1): bf16/fp16 randn q/k/v, logsigmoid/16 or raw gates, h0 ~ randn*0.1."""
    import torch.nn.functional as F

    gen = torch.Generator(device="cuda").manual_seed(seed)
    K, V, H = lib.k, lib.v, c.H
    HV = H * c.ratio
    B, T = (1, c.cu[-1]) if c.cu else (c.B, c.T)
    N = len(c.cu) - 1 if c.cu else B

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32)

    q, k = randn(B, T, H, K), randn(B, T, H, K)
    if not c.l2:  # without in-kernel l2norm the caller normalises (an unnormalised k makes the recurrence blow up)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    in_kernel = c.gate != "precomputed"
    g = randn(B, T, HV, K) if in_kernel else F.logsigmoid(randn(B, T, HV, K)) / 16
    if c.strong_g is not None:
        assert not in_kernel, f"{c.id}: strong_g is for the precomputed gate"
        g[:, 1::2, :, :10] = c.strong_g
    beta = randn(B, T, HV) if c.bsig else torch.sigmoid(randn(B, T, HV))
    sshape = (N, HV, V, K) if c.v_first else (N, HV, K, V)
    half = torch.float16 if c.dtype == "fp16" else torch.bfloat16
    param = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[c.param]
    return dict(
        q=q.to(half), k=k.to(half), v=randn(B, T, HV, V).to(half),
        g=g.to(half if c.g_bf16 else torch.float32),
        beta=beta.to(half if c.beta_bf16 else torch.float32),
        A_log=(randn(HV) * 0.5).to(param) if in_kernel and c.a_log else None,
        dt_bias=randn(HV * K).to(param) if in_kernel and c.dt_bias else None,
        initial_state=randn(*sshape) * 0.1 if c.h0 else None,
        cu_seqlens=torch.tensor(c.cu, dtype=torch.int64, device="cuda") if c.cu else None,
        sshape=sshape)


def options(c: Case) -> dict:
    return dict(scale=c.scale, use_qk_l2norm_in_kernel=c.l2, use_gate_in_kernel=c.gate != "precomputed",
                use_beta_sigmoid_in_kernel=c.bsig, allow_neg_eigval=c.neg,
                lower_bound=c.lower_bound if c.gate == "lower_bound" else None, state_v_first=c.v_first)


def run_ref(ref, x: dict, c: Case, **extra):
    return ref.recurrent_kda_ref(
        x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
        initial_state=extra.pop("initial_state", x["initial_state"]), output_final_state=True,
        cu_seqlens=list(c.cu) if c.cu else None, **options(c), **extra)


def assert_close(ref, name: str, got, want, ctx: str) -> float:
    """`ctx` names the case and the seed (--seed), so a failure can be rerun exactly."""
    got = got.float().cpu().numpy() if hasattr(got, "cpu") else np.asarray(got)
    bad = int((~np.isfinite(got)).sum())
    assert bad == 0, f"{ctx}: {name} has {bad} NaN/Inf elements (unwritten or overflowed)"
    err = ref.relative_l2(got, want)
    assert err <= TOL, f"{ctx}: {name} relative L2 {err:.3e} > {TOL}"
    return err


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_reference(lib, ref, torch_cuda, seed, case: Case):
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda

    require_built(lib, case)
    x = make_inputs(torch, lib, case, seed)
    ctx = f"{case.id} [{lib.spec}] --seed={seed}"
    out = torch.full_like(x["v"], math.nan)
    fso = torch.full(x["sshape"], math.nan, device="cuda") if case.final else None
    o, ht = fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                                initial_state=x["initial_state"], output_final_state=case.final,
                                cu_seqlens=x["cu_seqlens"], library=lib, out=out, final_state_out=fso,
                                **options(case))
    torch.cuda.synchronize()
    assert o is out and ht is fso
    o_ref, ht_ref = run_ref(ref, x, case)
    assert_close(ref, "o", o, o_ref, ctx)
    if case.final:
        assert_close(ref, "final_state", ht, ht_ref, ctx)


#: id -> (v_first, T, cu_seqlens) of test_pool_in_place (feature_matrix.gpu_cases lists them too)
POOL_CASES = {"decode-kf": (False, 1, None), "decode-vf": (True, 1, None), "T5-kf": (False, 5, None),
              "varlen-vf": (True, None, (0, 3, 4, 10))}


@pytest.mark.parametrize("v_first,T,cu", list(POOL_CASES.values()), ids=list(POOL_CASES))
def test_pool_in_place(lib, ref, torch_cuda, seed, v_first, T, cu):
    """Serving form: rows named by ssm_state_indices updated in place, others untouched, -1 skips."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda_pool

    c = pool_case(lib.features, v_first, T, cu)
    require_built(lib, c)
    x = make_inputs(torch, lib, c, seed + 1)
    ctx = f"pool [{lib.spec}] --seed={seed}"
    N = len(cu) - 1 if cu else c.B
    P = 9
    slots = [6, -1, 0, 3][:N]
    gen = torch.Generator(device="cuda").manual_seed(seed + 2)
    pool = torch.randn((P,) + x["sshape"][1:], generator=gen, device="cuda") * 0.1
    before = pool.clone()
    idx = torch.tensor(slots, dtype=torch.int32, device="cuda")
    out = torch.full_like(x["v"], math.nan)
    o = fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx, A_log=x["A_log"],
                                 dt_bias=x["dt_bias"], cu_seqlens=x["cu_seqlens"], library=lib, out=out,
                                 **options(c))
    torch.cuda.synchronize()
    o_ref, pool_ref = run_ref(ref, x, c, initial_state=before, ssm_state_indices=np.array(slots))
    assert_close(ref, "o", o, o_ref, ctx)
    used = [s for s in slots if s >= 0]
    assert_close(ref, "pool rows", pool[used], pool_ref[used], ctx)
    for r in range(P):
        if r not in used:
            assert torch.equal(pool[r], before[r]), f"pool row {r} is not referenced but changed"
    skipped = slots.index(-1)
    rows = slice(cu[skipped], cu[skipped + 1]) if cu else None
    o_skipped = o[0, rows] if cu else o[skipped]
    assert bool((o_skipped == 0).all()), "a skipped sequence (index -1) must output zeros"


def test_prepared_pool_matches_and_checks(lib, ref, torch_cuda, seed):
    """prepare_pool validates once; each step equals the reference and a mismatched tensor is refused."""
    torch = torch_cuda
    from kda2.runtime import KDA2InputError, prepare_pool

    c = prepared_case(lib.features)
    require_built(lib, c)
    x = make_inputs(torch, lib, c, seed + 5)
    ctx = f"prepared [{lib.spec}] --seed={seed}"
    gen = torch.Generator(device="cuda").manual_seed(seed + 6)
    pool = torch.randn((5,) + x["sshape"][1:], generator=gen, device="cuda") * 0.1
    idx = torch.tensor([4, 0, 2], dtype=torch.int32, device="cuda")
    step = prepare_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx, A_log=x["A_log"],
                        dt_bias=x["dt_bias"], library=lib, **options(c))
    before = pool.clone()
    out = torch.full_like(x["v"], math.nan)
    o = step(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx, out=out)
    torch.cuda.synchronize()
    o_ref, pool_ref = run_ref(ref, x, c, initial_state=before, ssm_state_indices=np.array([4, 0, 2]))
    assert o is out
    assert_close(ref, "o", o, o_ref, ctx)
    assert_close(ref, "pool rows", pool[[4, 0, 2]], pool_ref[[4, 0, 2]], ctx)
    snapshot = pool.clone()
    with pytest.raises(KDA2InputError, match="q"):  # another batch size needs another prepared call
        step(x["q"][:2], x["k"], x["v"], x["g"], x["beta"], pool, idx, out=out)
    with pytest.raises(KDA2InputError, match="ssm_state_indices"):
        step(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx.long(), out=out)
    torch.cuda.synchronize()
    assert torch.equal(pool, snapshot), "a refused step must not touch the pool"


def _graph_case(lib):
    """A gate and layout the library builds (these tests adapt to the library; they never skip)."""
    return _gate(lib.features), "v_first" in lib.features.state_layouts


def _randn(torch, seed: int, *shape):
    return torch.randn(*shape, generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda")


def test_cuda_graph_replay_equals_eager(lib, ref, torch_cuda, seed):
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda, fused_recurrent_kda_pool

    gate, v_first = _graph_case(lib)
    # decode, pool form (what a serving engine captures)
    c = Case("graph-decode", B=8, T=1, gate=gate, v_first=v_first)
    x = make_inputs(torch, lib, c, seed + 3)
    pool0 = _randn(torch, seed + 7, *((12,) + x["sshape"][1:])) * 0.1
    pool = pool0.clone()
    idx = torch.tensor([3, 0, 11, -1, 5, 7, 1, 9], dtype=torch.int32, device="cuda")
    out = torch.empty_like(x["v"])

    def step():
        fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx, A_log=x["A_log"],
                                 dt_bias=x["dt_bias"], library=lib, out=out, **options(c))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up off the capture path (loads modules, first-use checks)
    torch.cuda.current_stream().wait_stream(side)
    pool.copy_(pool0)
    step()
    o_eager, pool_eager = out.clone(), pool.clone()

    graph = torch.cuda.CUDAGraph()
    pool.copy_(pool0)
    with torch.cuda.graph(graph):
        step()
    for _ in range(2):  # replays are repeatable
        pool.copy_(pool0)
        out.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, o_eager) and torch.equal(pool, pool_eager)

    # prefill, varlen, int32 cu_seqlens converted and final state allocated inside the capture
    c2 = Case("graph-varlen", cu=(0, 7, 40, 41), gate=gate, v_first=v_first)
    if lib.features.varlen and c2.longest <= lib.max_bucket:
        y = make_inputs(torch, lib, c2, seed + 4)
        cu32 = y["cu_seqlens"].int()

        def prefill():
            return fused_recurrent_kda(y["q"], y["k"], y["v"], y["g"], y["beta"], A_log=y["A_log"],
                                       dt_bias=y["dt_bias"], initial_state=y["initial_state"],
                                       output_final_state=True, cu_seqlens=cu32, max_seqlen=33, library=lib,
                                       **options(c2))

        o_e, ht_e = prefill()
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            o_g, ht_g = prefill()
        g2.replay()
        torch.cuda.synchronize()
        assert torch.equal(o_g, o_e) and torch.equal(ht_g, ht_e)

        # Only the device cu_seqlens (no host hint): nothing is read back, so the call captures (issue 13).
        def device_only():
            return fused_recurrent_kda(y["q"], y["k"], y["v"], y["g"], y["beta"], A_log=y["A_log"],
                                       dt_bias=y["dt_bias"], initial_state=y["initial_state"],
                                       output_final_state=True, cu_seqlens=y["cu_seqlens"], library=lib,
                                       **options(c2))

        o_d, ht_d = device_only()
        g3 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g3):
            o_g3, ht_g3 = device_only()
        o_g3.fill_(math.nan)
        g3.replay()
        torch.cuda.synchronize()
        assert torch.equal(o_g3, o_d) and torch.equal(ht_g3, ht_d)


def test_bad_inputs_leave_buffers_untouched(lib, torch_cuda, seed):
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda, fused_recurrent_kda_pool
    from kda2.runtime.errors import KDA2InputError

    gate, v_first = _graph_case(lib)
    c = Case("bad", B=2, T=3, gate=gate, v_first=v_first)
    x = make_inputs(torch, lib, c, seed + 5)
    out = torch.full_like(x["v"], math.nan)
    fso = torch.full(x["sshape"], math.nan, device="cuda")
    pool = _randn(torch, seed + 8, *((4,) + x["sshape"][1:]))
    before = pool.clone()
    idx = torch.tensor([0, 2], dtype=torch.int32, device="cuda")
    good = dict(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"])
    opts = options(c)
    big = lib.max_bucket + 1
    bad_calls = {
        "g float16": dict(g=x["g"].half()),
        "k on the CPU": dict(k=x["k"].cpu()),
        "q non-contiguous": dict(q=x["q"].transpose(0, 1).contiguous().transpose(0, 1)),
        "K mismatch": dict(q=x["q"][..., :32].contiguous(), k=x["k"][..., :32].contiguous()),
        "beta wrong shape": dict(beta=x["beta"][:, :, :1].contiguous()),
        "T over the largest bucket": {n: torch.zeros((1, big) + t.shape[2:], dtype=t.dtype, device="cuda")
                                      for n, t in good.items() if n in ("q", "k", "v", "g", "beta")},
    }
    for what, change in bad_calls.items():
        args = dict(good, **change)
        with pytest.raises(KDA2InputError):
            fused_recurrent_kda(**args, initial_state=x["initial_state"], output_final_state=True, library=lib,
                                out=out if what != "T over the largest bucket" else None,
                                final_state_out=fso if what != "T over the largest bucket" else None, **opts)
        with pytest.raises(KDA2InputError):
            fused_recurrent_kda_pool(**args, state_pool=pool, ssm_state_indices=idx, library=lib,
                                     out=out if what != "T over the largest bucket" else None, **opts)
        torch.cuda.synchronize()
        assert bool(out.isnan().all()) and bool(fso.isnan().all()), f"{what}: an output was written"
        assert torch.equal(pool, before), f"{what}: the state pool was written"
    with pytest.raises(KDA2InputError):
        fused_recurrent_kda_pool(**good, state_pool=pool.double(), ssm_state_indices=idx, library=lib, out=out, **opts)
    with pytest.raises(KDA2InputError):
        fused_recurrent_kda(**good, library=lib, out=out, cu_seqlens=torch.tensor([0, 3, 5], device="cuda"), **opts)
    torch.cuda.synchronize()
    assert bool(out.isnan().all()) and torch.equal(pool, before)


def test_fresh_thread_without_cuda_context(lib, torch_cuda, seed):
    """The library launches in the current driver context; a thread that never touched CUDA has none."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda_pool

    gate, v_first = _graph_case(lib)
    c = Case("thread", B=2, T=1, gate=gate, v_first=v_first)
    x = make_inputs(torch, lib, c, seed + 6)
    pool0 = _randn(torch, seed + 9, *((2,) + x["sshape"][1:])) * 0.1
    idx = torch.tensor([1, 0], dtype=torch.int32, device="cuda")
    outs = [torch.empty_like(x["v"]) for _ in range(2)]
    pools = [pool0.clone(), pool0.clone()]
    call = lambda i: fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], pools[i], idx,  # noqa: E731
                                              A_log=x["A_log"], dt_bias=x["dt_bias"], library=lib, out=outs[i],
                                              **options(c))
    call(0)
    errors: list[BaseException] = []

    def worker():
        try:
            call(1)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert not errors, errors
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1]) and torch.equal(pools[0], pools[1])


def test_arch_matches_device(lib, torch_cuda):
    """The default library is the best built arch for this GPU (sm_90a on an H200)."""
    from kda2.runtime.device import arch_preference

    prefs = arch_preference(torch_cuda.cuda.get_device_capability())
    assert lib.arch in prefs
    if not os.environ.get("KDA2_LIBRARY"):
        built = [a for a in prefs if (lib.root.parent / a / "manifest.json").exists()]
        assert lib.arch == built[0]


def _sanitizer() -> str | None:
    for cand in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer",
                 "/usr/local/cuda/compute-sanitizer/compute-sanitizer"):
        if cand and os.path.exists(cand):
            return cand
    return None


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer(lib, torch_cuda, seed, tool):
    exe = _sanitizer()
    if exe is None:
        pytest.skip("compute-sanitizer is not on PATH")
    env = dict(os.environ, KDA2_LIBRARY=str(lib.manifest_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([exe, "--tool", tool, "--error-exitcode", "86", sys.executable, str(HERE / "_small_case.py"),
                          "--seed", str(seed)],
                         capture_output=True, text=True, timeout=400, env=env)
    log = res.stdout + res.stderr
    assert "SMALL-CASE-OK" in log, log[-6000:]
    assert res.returncode == 0, log[-6000:]
    assert re.search(r"ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors", log), log[-6000:]
