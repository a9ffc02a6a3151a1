"""kda2 as FLA's KDA backend (kda2.integrations.fla) on a GPU: FLA's own layer and model, backend on vs off.

1. `fla.layers.kda.KimiDeltaAttention` (random weights, bf16, hidden 1024, 16 heads of K = V = 128: the
   built kimi_linear_* specs) forward on a 2 x 1024 prefill: FLA_KDA2=1 vs FLA_KDA2=0 (FLA's Triton
   kernels; FLA_FLASH_KDA=0 throughout) agree to relative L2 <= 1e-2, and kda2 really ran (every call of
   the backend's chunk_kda is counted through a wrapper on the registered instance; FLA's
   "[FLA Backend] ... -> kda2" log lines are recorded too). The same layer cast to fp16 (A_log and dt_bias with
   it, which the backend reads as fp32) likewise: served by the fp16 kernels every spec builds, not declined.
2. A small random `fla.models.kda.KDAForCausalLM` (2 layers, vocab 4096, same heads): greedy generation of
   16 tokens after a 2 x 1024 prompt (prefill: chunk_kda; decode: fused_recurrent_kda, one token a step)
   with the backend on vs off: the same tokens, and logits (prompt and every step) within relative L2 3e-2:
   the per-layer difference (test 1: about 5e-3) compounds through two random-weight layers, their MLPs
   and the bf16 lm_head (measured on an H200: 1.4e-2 for the prompt, 1.2-1.3e-2 per step). A token
   may differ only where the reference's top two logits are within 4 bf16 ulps (a near-tie that rounding
   decides); the runs then continue from different tokens, so the comparison stops there (recorded).
3. Prefill time (median of CUDA-event timings) of the layer and of the model, backend on vs off: printed,
   and written with the results of 1-2 to DIR/fla_backend.json with `--results-dir DIR`. No assertion.

FLA's Triton kernels compile on first use (about 100 s per option set), so the layer and the model use the
same head count, head dims and options (a prefill with output_final_state, as generation does): one chunk
option set and one recurrent one, and the fp16 layer one more chunk set. Skips without torch/CUDA (conftest.py) or without FLA 0.6 (scripts/
gpu_check.sh installs .whl/*.whl); fails when a GPU and FLA are there but no kda2 library serves them.
"""
from __future__ import annotations

import json
import logging
import os
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
pytestmark = pytest.mark.gpu

REL_L2 = 1e-2        # one layer's output
REL_L2_MODEL = 3e-2  # a 2-layer model's logits (the layer's difference, compounded)
HIDDEN, HEADS, HEAD_DIM = 1024, 16, 128
BATCH, PROMPT, NEW_TOKENS = 2, 1024, 16
LAYERS, VOCAB = 2, 4096
RESULTS: dict = {}


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(f"{record.name}: {record.getMessage()}")


@pytest.fixture(scope="module")
def fla(torch_cuda, pytestconfig):
    try:
        import fla as fla_pkg
        from fla.layers.kda import KimiDeltaAttention
        from fla.models.kda import KDAConfig, KDAForCausalLM
    except ImportError as exc:
        pytest.skip(f"flash-linear-attention 0.6 is not importable ({exc}); scripts/gpu_check.sh installs .whl/*.whl")
    saved = {k: os.environ.get(k) for k in ("FLA_KDA2", "FLA_FLASH_KDA", "KDA2_BUILD_DIR")}
    os.environ.setdefault("KDA2_BUILD_DIR", str(ROOT / "build"))
    os.environ["FLA_FLASH_KDA"] = "0"  # "off" is FLA's Triton path, whatever else is installed
    os.environ["FLA_KDA2"] = "0"
    log = _Collect()
    loggers = [logging.getLogger(n) for n in ("fla.backends", "kda2.integrations.fla")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(log)
        lg.setLevel(logging.INFO)
    try:
        import kda2.integrations.fla as integ

        status = integ.status()
        missing = {name: s["reason"] for name, s in status.items() if not s["available"]}
        if missing:
            pytest.fail(f"a GPU and FLA are present but the kda2 backend is unavailable: {missing}")
        torch = torch_cuda
        RESULTS["env"] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                          "fla": getattr(fla_pkg, "__version__", "?"), "kda2_backend": status}
        yield SimpleNamespace(integ=integ, torch=torch, log=log, KimiDeltaAttention=KimiDeltaAttention,
                              KDAConfig=KDAConfig, KDAForCausalLM=KDAForCausalLM)
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(log)
            lg.setLevel(level)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module", autouse=True)
def _write_results(pytestconfig):
    yield
    out = pytestconfig.getoption("results_dir")
    if out and RESULTS:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "fla_backend.json").write_text(json.dumps(RESULTS, indent=2, default=str) + "\n")


@pytest.fixture(scope="module")
def calls(fla):
    """Counts of the kda2 backend's implementations, through wrappers on the instances FLA's registry holds."""
    counts = {"chunk_kda": 0, "fused_recurrent_kda_fwd": 0}
    backends = fla.integ.registered()
    for name, backend in backends.items():
        assert backend is not None, f"FLA's registry holds no kda2 backend for {name}"
        impl = getattr(type(backend), name).__get__(backend)

        def counted(*args, _impl=impl, _name=name, **kwargs):
            counts[_name] += 1
            return _impl(*args, **kwargs)

        setattr(backend, name, counted)  # FLA looks the implementation up on the instance: getattr(self, name)
    yield counts
    for name, backend in backends.items():
        backend.__dict__.pop(name, None)


def backend(on: bool) -> None:
    os.environ["FLA_KDA2"] = "1" if on else "0"  # FLA reads the switch on every call


def rel_l2(a, b) -> float:
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _layer(fla, seed, dtype):
    torch = fla.torch
    torch.manual_seed(seed)
    m = fla.KimiDeltaAttention(hidden_size=HIDDEN, head_dim=HEAD_DIM, num_heads=HEADS, mode="chunk", layer_idx=0)
    m = m.to("cuda", dtype).eval()   # A_log and dt_bias too: the backend reads them as fp32
    x = torch.randn(BATCH, PROMPT, HIDDEN, device="cuda", dtype=dtype)

    def forward():
        with torch.inference_mode():  # use_cache: the final state is produced, as in a model's prefill
            return m(x, use_cache=True)[0]

    return forward


@pytest.fixture(scope="module")
def layer(fla, seed):
    return _layer(fla, seed, fla.torch.bfloat16)


@pytest.fixture(scope="module")
def model(fla, seed):
    torch = fla.torch
    torch.manual_seed(seed + 1)
    cfg = fla.KDAConfig(hidden_size=HIDDEN, num_heads=HEADS, head_dim=HEAD_DIM, num_hidden_layers=LAYERS,
                        vocab_size=VOCAB, attn_mode="chunk", fuse_norm=False, fuse_swiglu=False,
                        fuse_cross_entropy=False, use_cache=True)
    m = fla.KDAForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    g = torch.Generator(device="cuda").manual_seed(seed + 2)
    ids = torch.randint(0, VOCAB, (BATCH, PROMPT), device="cuda", generator=g)
    return SimpleNamespace(m=m, ids=ids)


def test_layer_forward_kda2_matches_fla(fla, calls, layer):
    _layer_matches(fla, calls, layer, "layer")


def test_fp16_layer_forward_kda2_matches_fla(fla, calls, seed):
    """The same layer cast to fp16 (its A_log / dt_bias too): served by kda2's fp16 kernels, not declined."""
    _layer_matches(fla, calls, _layer(fla, seed, fla.torch.float16), "layer_fp16")


def _layer_matches(fla, calls, layer, label):
    torch = fla.torch
    fla.log.lines.clear()
    backend(False)
    before = dict(calls)
    ref = layer()
    assert calls == before, "FLA_KDA2=0 must leave kda2 out"
    backend(True)
    out = layer()
    torch.cuda.synchronize()
    took = calls["chunk_kda"] - before["chunk_kda"]
    err = rel_l2(out, ref)
    RESULTS[label] = {"shape": [BATCH, PROMPT, HIDDEN], "heads": HEADS, "head_dim": HEAD_DIM, "rel_l2": err,
                      "dtype": str(out.dtype), "kda2_chunk_calls": took,
                      "fla_log": [ln for ln in fla.log.lines if "kda2" in ln]}
    print(f"\n{label} {BATCH}x{PROMPT}x{HIDDEN} {out.dtype}, {HEADS} heads of {HEAD_DIM}: rel L2 kda2 vs FLA = "
          f"{err:.2e}, kda2 chunk_kda calls: {took}")
    assert took == 1, f"the kda2 backend was not taken (FLA log: {fla.log.lines})"
    assert torch.isfinite(out.float()).all()
    assert err <= REL_L2, f"layer output: relative L2 {err:.3e} > {REL_L2}"
    taken = [ln for ln in fla.log.lines if "[FLA Backend]" in ln and "-> kda2" in ln]
    assert not [ln for ln in taken if "rejected" in ln], taken


def _greedy(torch, m, ids, n):
    """Greedy decoding with FLA's cache: the prompt in one forward (chunk_kda), then one token per forward
    (fused_recurrent_kda). Returns (tokens [B, n], prompt logits [B, T, V], per-step logits [B, n, V])."""
    with torch.inference_mode():
        out = m(input_ids=ids, use_cache=True)
        prompt_logits = out.logits
        step = [out.logits[:, -1]]
        tokens = [step[-1].argmax(-1, keepdim=True)]
        cache = out.past_key_values
        for _ in range(n - 1):
            out = m(input_ids=tokens[-1], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            step.append(out.logits[:, -1])
            tokens.append(step[-1].argmax(-1, keepdim=True))
    return torch.cat(tokens, 1), prompt_logits, torch.stack(step, 1)


def test_greedy_generation_kda2_matches_fla(fla, calls, model):
    torch = fla.torch
    backend(False)
    before = dict(calls)
    ref_tok, ref_prompt, ref_step = _greedy(torch, model.m, model.ids, NEW_TOKENS)
    assert calls == before, "FLA_KDA2=0 must leave kda2 out"
    backend(True)
    tok, prompt, step = _greedy(torch, model.m, model.ids, NEW_TOKENS)
    torch.cuda.synchronize()
    took = {k: calls[k] - before[k] for k in calls}
    assert took == {"chunk_kda": LAYERS, "fused_recurrent_kda_fwd": LAYERS * (NEW_TOKENS - 1)}, \
        f"kda2 calls {took}: expected every layer's prefill and decode steps (FLA log: {fla.log.lines})"

    prompt_err = rel_l2(prompt, ref_prompt)
    same = (tok == ref_tok).all(0)  # per step, over the batch
    diverged = int((~same).nonzero()[0]) if not bool(same.all()) else None
    upto = NEW_TOKENS if diverged is None else diverged + 1  # logits compare while the prefixes agree
    step_err = [rel_l2(step[:, i], ref_step[:, i]) for i in range(upto)]
    tie = None
    if diverged is not None:
        top2 = ref_step[:, diverged].float().topk(2, dim=-1).values  # [B, 2]
        margin = (top2[:, 0] - top2[:, 1])
        ulp = torch.exp2(torch.floor(torch.log2(top2[:, 0].abs().clamp_min(1e-30))) - 7)  # bf16: 8 significant bits
        tie = {"step": diverged, "margin": margin.tolist(), "bf16_ulp": ulp.tolist()}
    RESULTS["generation"] = {"layers": LAYERS, "vocab": VOCAB, "batch": BATCH, "prompt": PROMPT,
                             "new_tokens": NEW_TOKENS, "tokens_equal": diverged is None,
                             "tokens_kda2": tok.tolist(), "tokens_fla": ref_tok.tolist(),
                             "prompt_logits_rel_l2": prompt_err,
                             "step_logits_rel_l2": step_err, "near_tie": tie, "kda2_calls": took}
    print(f"\ngeneration: tokens equal: {diverged is None}, prompt logits rel L2 {prompt_err:.2e}, "
          f"step logits rel L2 max {max(step_err):.2e}" + (f", near-tie at step {diverged}: {tie}" if tie else ""))
    assert prompt_err <= REL_L2_MODEL, f"prompt logits: relative L2 {prompt_err:.3e} > {REL_L2_MODEL}"
    bad = [(i, e) for i, e in enumerate(step_err) if e > REL_L2_MODEL]
    assert not bad, f"step logits beyond relative L2 {REL_L2_MODEL}: {bad}"
    if diverged is not None:
        rows = (tok[:, diverged] != ref_tok[:, diverged]).nonzero().flatten().tolist()
        for b in rows:
            assert tie["margin"][b] <= 4 * tie["bf16_ulp"][b], (
                f"token {diverged} of sequence {b} differs ({int(tok[b, diverged])} vs FLA's "
                f"{int(ref_tok[b, diverged])}) "
                f"where FLA's top-2 margin {tie['margin'][b]:.4g} is no near-tie")


def _median_ms(torch, fn, reps=15, warmup=3) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def test_prefill_time_kda2_vs_fla(fla, calls, layer, model):
    torch = fla.torch

    def model_prefill():
        with torch.inference_mode():
            return model.m(input_ids=model.ids, use_cache=True)

    timings = {}
    for name, fn in (("layer", layer), ("model", model_prefill)):
        row = {}
        for label, on in (("fla", False), ("kda2", True)):
            backend(on)
            before = calls["chunk_kda"]
            row[f"{label}_ms"] = _median_ms(torch, fn)
            assert (calls["chunk_kda"] > before) == on
        row["speedup"] = row["fla_ms"] / row["kda2_ms"]
        timings[name] = row
    backend(False)
    RESULTS["prefill_ms"] = {"batch": BATCH, "tokens": PROMPT, "median_of": 15, **timings}
    print("\nprefill (median CUDA-event time, batch %d x %d tokens):" % (BATCH, PROMPT))
    for name, row in timings.items():
        print(f"  {name:5s}: FLA {row['fla_ms']:.3f} ms, kda2 backend {row['kda2_ms']:.3f} ms "
              f"(x{row['speedup']:.2f})")
