"""CPU checks of the chunk GPU suite's pure helpers (kda2/bench/cases.py): the case table covers
what issue 4 asks for, inputs are what the cases say, the accuracy bar and the results table."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))

from kda2.bench import cases as cc  # noqa: E402
from kda2.reference import recurrent_kda_ref, relative_l2  # noqa: E402


def test_cases_cover_the_issue():
    ids = [c.id for c in cc.CASES]
    assert len(ids) == len(set(ids))
    dense_T = {c.T for c in cc.CASES if c.cu is None}
    assert {63, 64, 65, 160, 500, 1000, 1500, 2048, 8192} <= dense_T
    assert {c.ratio for c in cc.CASES} == {1, 2, 4, 8}
    # GVA 4 and 8 and bf16 A_log / dt_bias (issue 13) in both input dtypes and both layouts
    wide = [c for c in cc.CASES if c.ratio >= 4]
    assert {(c.dtype, c.ratio) for c in wide} >= {("bf16", 4), ("bf16", 8), ("fp16", 4), ("fp16", 8)}
    assert {c.v_first for c in wide} == {False, True} and any(c.cu for c in wide)
    p16 = [c for c in cc.CASES if c.param != "fp32"]
    assert {c.dtype for c in p16} == {"bf16", "fp16"} and {c.v_first for c in p16} == {False, True}
    assert all(c.in_kernel_gate for c in p16) and {c.gate for c in p16} == {"softplus", "lower_bound"}
    assert {c.param for c in p16} == {"bf16", "fp16"}
    for gate in ("precomputed", "softplus", "lower_bound"):
        assert {c.v_first for c in cc.CASES if c.gate == gate} == {False, True}, gate
    assert {c.g_bf16 for c in cc.CASES if c.gate == "softplus"} == {False, True}
    assert {tuple(v) for v in cc.VARLEN} <= {c.cu for c in cc.CASES if c.cu}
    assert {c.h0 for c in cc.CASES} == {True, False} and {c.final for c in cc.CASES} == {True, False}
    assert {c.l2 for c in cc.CASES} == {True, False} and {c.bsig for c in cc.CASES} == {True, False}
    assert sum(c.neg for c in cc.CASES) >= 1
    assert {c.stress for c in cc.CASES} >= {"g_minus20", "g_block_edge", "dt_bias_plus6", "beta_small", "beta_large"}
    assert any(c.gate == "lower_bound" and c.safe_gate for c in cc.CASES)
    # fp16 inputs (issue 13, chunk family): every gate mode in both layouts, h0 and ht on and off, 16-bit g and
    # beta, GVA, varlen, and the strong-decay stress
    f16 = [c for c in cc.CASES if c.dtype == "fp16"]
    assert {c.dtype for c in cc.CASES} == set(cc.TORCH_DTYPES)
    for gate in ("precomputed", "softplus", "lower_bound"):
        assert {c.v_first for c in f16 if c.gate == gate} == {False, True}, gate
    assert {c.h0 for c in f16} == {True, False} and {c.final for c in f16} == {True, False}
    assert any(c.g_bf16 for c in f16) and any(c.beta_bf16 for c in f16) and any(c.ratio > 1 for c in f16)
    assert any(c.cu for c in f16) and any(c.stress == "g_minus20" for c in f16)
    for c in cc.CASES:  # the fp64 reference stays cheap: big T only with few heads
        B, T = c.shape_BT
        assert B * T * c.HV <= 32_768, c.id
        if c.neg:
            assert c.bsig, c.id


@pytest.mark.parametrize("case", cc.CASES, ids=lambda c: c.id)
def test_draw_matches_case(case):
    x = cc.draw(case, seed=5, K=128, V=128)
    B, T = case.shape_BT
    assert x["q"].shape == x["k"].shape == (B, T, case.H, 128)
    assert x["v"].shape == (B, T, case.HV, 128) and x["g"].shape == (B, T, case.HV, 128)
    assert x["beta"].shape == (B, T, case.HV)
    assert all(x[n].dtype == np.float32 for n in ("q", "k", "v", "g", "beta"))
    assert (x["A_log"] is not None) == (case.in_kernel_gate and case.a_log)
    assert (x["dt_bias"] is not None) == (case.in_kernel_gate and case.dt_bias)
    assert (x["initial_state"] is not None) == case.h0
    if case.h0:
        assert x["initial_state"].shape == x["sshape"]
    assert x["sshape"] == ((case.N, case.HV, 128, 128))
    if case.cu:
        assert x["cu_seqlens"].dtype == np.int64 and x["cu_seqlens"].tolist() == list(case.cu)
    if not case.in_kernel_gate:
        assert np.all(x["g"] < 0)
    if not case.l2:
        assert np.allclose(np.linalg.norm(x["k"], axis=-1), 1, atol=1e-5)
    if not case.bsig:
        assert np.all((x["beta"] > 0) & (x["beta"] < 1))
    ch = x["stressed_channels"]
    if case.stress == "g_minus20":
        assert len(ch) == cc.STRESS_CHANNELS and np.all(x["g"][..., ch] == cc.STRESS_G)
        others = np.setdiff1d(np.arange(128), ch)
        assert np.all(x["g"][..., others] > -5)
    elif case.stress == "g_block_edge":
        # channels on each side of the middle-row anchor's range (8 tokens) and of the quarter anchors' (4 tokens),
        # log2 units; every value on some channel
        edges = [n * -g * np.log2(np.e) for n, g in zip((8, 8, 4, 4), cc.BLOCK_EDGE_G)]
        assert edges[0] < cc.DIAG_RANGE < edges[1] and edges[2] < cc.DIAG_RANGE < edges[3]
        for n, gv in enumerate(cc.BLOCK_EDGE_G):
            assert len(ch[n::len(cc.BLOCK_EDGE_G)]) > 0
            assert np.all(x["g"][..., ch[n::len(cc.BLOCK_EDGE_G)]] == np.float32(gv))
    elif case.stress == "dt_bias_plus6":
        assert np.all(x["dt_bias"].reshape(case.HV, 128)[:, ch] == cc.STRESS_DT_BIAS)
    elif case.stress == "beta_small":
        assert np.all(x["beta"] == np.float32(1e-3))
    elif case.stress == "beta_large":
        assert np.all(x["beta"] == np.float32(0.999))
    elif case.stress == "long_memory":
        beta = 1 / (1 + np.exp(-x["beta"])) if case.bsig else x["beta"]
        assert np.median(beta) < 0.01


def test_draw_is_fresh_per_seed_and_reproducible():
    c = cc.CASES[0]
    a, b, a2 = cc.draw(c, 1), cc.draw(c, 2), cc.draw(c, 1)
    assert not np.array_equal(a["q"], b["q"]) and np.array_equal(a["q"], a2["q"])


def test_bad_stress_combinations_are_refused():
    with pytest.raises(ValueError, match="precomputed"):
        cc.draw(cc.Case("x", gate="softplus", stress="g_minus20"), 0)
    with pytest.raises(ValueError, match="g_block_edge"):
        cc.draw(cc.Case("x", gate="softplus", stress="g_block_edge"), 0)
    with pytest.raises(ValueError, match="bsig"):
        cc.draw(cc.Case("x", stress="beta_small"), 0)
    with pytest.raises(ValueError, match="long_memory.*softplus or precomputed"):
        cc.draw(cc.Case("x", gate="lower_bound", stress="long_memory"), 0)
    with pytest.raises(ValueError, match="unknown"):
        cc.draw(cc.Case("x", stress="nope"), 0)


def _tail_from(c: cc.Case, x: dict, cut: int, state) -> np.ndarray:
    """The fp64 reference's output on tokens [cut, T) started from `state` (the state at `cut`)."""
    o, _ = recurrent_kda_ref(*(x[n][:, cut:] for n in ("q", "k", "v", "g", "beta")), A_log=x["A_log"],
                             dt_bias=x["dt_bias"], initial_state=state, **cc.ref_options(c))
    return o


@pytest.mark.parametrize("gate", ["softplus", "precomputed"])
def test_long_memory_makes_a_segments_start_state_matter(gate):
    """What the split tests need of `long_memory`: a segment's output 600 tokens long still depends on its start state
    (a combine off by δ moves the output by about δ), where the ordinary inputs forget it (a wrong combine would pass)."""
    cut, T = 200, 800
    for stress, lo, hi in ((None, 0.0, 1e-4), ("long_memory", 0.3, np.inf)):
        c = cc.Case("m", T=T, H=1, gate=gate, stress=stress)
        x = cc.draw(c, 11)
        _, s_cut = recurrent_kda_ref(*(x[n][:, :cut] for n in ("q", "k", "v", "g", "beta")), A_log=x["A_log"],
                                     dt_bias=x["dt_bias"], initial_state=x["initial_state"], output_final_state=True,
                                     **cc.ref_options(c))
        o_true = _tail_from(c, x, cut, s_cut)
        late = slice(T - cut - 100, None)   # the segment's last 100 tokens, 500+ tokens after its start
        moved = relative_l2(_tail_from(c, x, cut, np.zeros_like(s_cut))[:, late], o_true[:, late])
        assert lo <= moved <= hi, f"{gate} stress={stress}: zero start state moves the late output by {moved:.2e}"


def test_options_match_fla_and_reference_names():
    c = cc.Case("x", gate="lower_bound", safe_gate=True, v_first=True, neg=True)
    o = cc.options(c)
    assert o["lower_bound"] == -5.0 and o["safe_gate"] and o["state_v_first"] and o["use_gate_in_kernel"]
    assert "safe_gate" not in cc.ref_options(c)
    assert cc.options(cc.Case("y", gate="softplus"))["lower_bound"] is None


def test_strong_decay_stays_finite_in_the_reference():
    """The stress inputs are well-posed: the fp64 reference of a short strong-decay case is finite."""
    c = cc.Case("s", T=70, H=1, ratio=2, gate="softplus", stress="dt_bias_plus6", v_first=True)
    x = cc.draw(c, 3, K=16, V=8)
    o, s = recurrent_kda_ref(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                             initial_state=x["initial_state"], output_final_state=True, **cc.ref_options(c))
    assert np.isfinite(o).all() and np.isfinite(s).all() and s.shape == (1, 2, 8, 16)
    assert relative_l2(o, o) == 0.0


def test_to_torch_dtypes():
    torch = pytest.importorskip("torch")
    c = cc.Case("t", cu=(0, 5, 9), gate="softplus", g_bf16=True, beta_bf16=True)
    t = cc.to_torch(torch, cc.draw(c, 0, K=16, V=8), c, device="cpu")
    assert t["q"].dtype == t["k"].dtype == t["v"].dtype == torch.bfloat16
    assert t["g"].dtype == torch.bfloat16 and t["beta"].dtype == torch.bfloat16
    assert t["A_log"].dtype == t["dt_bias"].dtype == t["initial_state"].dtype == torch.float32
    assert t["cu_seqlens"].dtype == torch.int64 and t["cu_seqlens_cpu"].tolist() == [0, 5, 9]
    c2 = cc.Case("u")
    t2 = cc.to_torch(torch, cc.draw(c2, 0, K=16, V=8), c2, device="cpu")
    assert t2["g"].dtype == t2["beta"].dtype == torch.float32 and t2["cu_seqlens"] is None
    c3 = cc.Case("h", dtype="fp16", g_bf16=True, beta_bf16=True)  # 16-bit g / beta follow the input dtype
    t3 = cc.to_torch(torch, cc.draw(c3, 0, K=16, V=8), c3, device="cpu")
    assert t3["q"].dtype == t3["k"].dtype == t3["v"].dtype == t3["g"].dtype == t3["beta"].dtype == torch.float16
    for param, want in (("bf16", torch.bfloat16), ("fp16", torch.float16)):  # whatever the input dtype
        c4 = cc.Case("p", dtype="fp16" if param == "bf16" else "bf16", gate="softplus", param=param)
        t4 = cc.to_torch(torch, cc.draw(c4, 0, K=16, V=8), c4, device="cpu")
        assert t4["A_log"].dtype == t4["dt_bias"].dtype == want and t4["initial_state"].dtype == torch.float32


def test_bound():
    assert cc.bound(None) == cc.TOL and cc.bound(float("nan")) == cc.TOL
    assert cc.bound(1e-3) == pytest.approx(2.1e-3)
    assert cc.bound(0.0) == pytest.approx(1e-4)          # the floor
    assert cc.bound(1e-2) == cc.TOL                       # never looser than 5e-3
    assert cc.verdict(2e-3, 1e-3) == (True, pytest.approx(2.1e-3))
    assert cc.verdict(2.2e-3, 1e-3)[0] is False
    assert cc.verdict(float("nan"), None)[0] is False
    assert cc.verdict(4.9e-3, None)[0] is True
    assert cc.model_verdict(4.2e-3, 4.1e-3) and not cc.model_verdict(4.5e-3, 4.1e-3)   # 5 % over the model
    assert cc.model_verdict(4.5e-3, None) and cc.model_verdict(None, 4.1e-3)
    assert not cc.model_verdict(float("nan"), 4.1e-3)


def test_results_table_and_append(tmp_path):
    row = cc.Row(spec="kimi_linear_chunk", case="T63", B=2, T=63, H=2, HV=2, cu_seqlens=None, gate="precomputed",
                 layout="k_first", seed=7, ours_o=1.5e-3, ours_state=None, fla_o=2e-3, fla_status="ok",
                 bound_o=4.1e-3, ok=True)
    bad = dict(vars(row), case="T64", ok=False, fla_status="rejected: ValueError: x", fla_o=None,
               ours_state=float("nan"))
    md = cc.format_table([vars(row), bad])
    lines = md.splitlines()
    assert lines[2].startswith("| spec | case |") and len(lines) == 6
    assert "| T63 | k_first | 1.50e-03 | – | 2.00e-03 | 4.10e-03 | – | – |" in md and "**NO**" in md and "nan" in md
    p = cc.write_results(tmp_path, [row], {"seed": 7})
    cc.write_results(tmp_path, [bad], {"seed": 8})
    data = json.loads(p.read_text())
    assert data["kind"] == "kda2-chunk-accuracy" and [s["seed"] for s in data["sessions"]] == [7, 8]
    assert data["sessions"][0]["rows"][0]["ours_o"] == 1.5e-3
    assert data["sessions"][1]["rows"][0]["case"] == "T64"
    assert "T64" in (tmp_path / f"{cc.RESULTS_STEM}.md").read_text()
    p.write_text("{not json")
    cc.write_results(tmp_path, [row])
    assert len(json.loads(p.read_text())["sessions"]) == 1
    assert list(tmp_path.glob("chunk-accuracy.json.unreadable.*"))
    q = cc.write_results(tmp_path, [bad], {"seed": 9}, stem="recurrent-accuracy")  # a second table beside it
    assert q.name == "recurrent-accuracy.json" and json.loads(q.read_text())["kind"] == "kda2-recurrent-accuracy"
    assert "T64" in (tmp_path / "recurrent-accuracy.md").read_text() and len(json.loads(p.read_text())["sessions"]) == 1


def test_gpu_results_carry_the_run(tmp_path, capsys):
    """A GPU module's table records the seed, device and torch it ran with, and is printed."""
    from types import SimpleNamespace

    fake = SimpleNamespace(__version__="9.9", cuda=SimpleNamespace(get_device_name=lambda i: "Fake GPU"))
    row = cc.Row(spec="s", case="c1", B=1, T=4, H=2, HV=2, cu_seqlens=None, gate="softplus", layout="v_first", seed=3,
                 ours_o=1e-3, ours_state=1e-7, ok=True)
    cc.write_gpu_results(tmp_path, [row], fake, 3, stem="recurrent-accuracy")
    session = json.loads((tmp_path / "recurrent-accuracy.json").read_text())["sessions"][0]
    assert (session["seed"], session["device"], session["torch"]) == (3, "Fake GPU", "9.9") and "fla-core" in session
    assert "| s | c1 | v_first | 1.00e-03 |" in capsys.readouterr().out


def test_block_edge_case_follows_the_kernels_diag_range():
    """The g_block_edge stress case is only a test of the prep kernel's diagonal-range switch while its
    DIAG_RANGE is the kernels'."""
    import re
    from pathlib import Path
    hdr = Path(__file__).resolve().parents[1] / "src" / "kda2" / "codegen" / "include" / "kda2" / "chunk.cuh"
    (value,) = re.findall(r"constexpr float DIAG_RANGE = ([0-9.]+)f;", hdr.read_text())
    assert float(value) == cc.DIAG_RANGE
