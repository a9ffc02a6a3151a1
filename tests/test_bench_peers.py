"""CPU checks of the benchmark's peers and roofline (issue 12 item 3): cuDNN-FE's adapter (kda2.bench.cudnn_peer),
the k3 shape set, the roofline bounds and chart (kda2.bench.report), and the run without cuDNN-FE.

The adapter is driven through a numpy stand-in for torch (host memory, real pointers) and a stand-in for cuDNN's
`cuda_host` whose `launch` reads the operands back from the addresses it is given, so the marshalling (which
buffer each pointer names, its shape, dtype and values) is checked without a GPU. Where the unpacked
nvidia-cudnn-frontend wheel is present ($KDA2_CUDNN_FE_DIR, else /tmp/cudnnwhl/x) its real `cuda_host` is imported
through the stand-in package and our launch arguments are bound against its signature; elsewhere that test skips.
"""
from __future__ import annotations

import ctypes
import inspect
import json
import math
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from kda2.bench import chunk as bc
from kda2.bench import cudnn_peer as cp
from kda2.bench import main as bench_main
from kda2.bench import report
from kda2.bench.timing import Stats
from kda2.reference import gate_activation

K = V = 128


# ---- a numpy stand-in for the torch calls the adapter makes -------------------------------------------

class T(np.ndarray):
    def float(self):
        return np.asarray(self, dtype=np.float32).view(T)

    def contiguous(self):
        return np.ascontiguousarray(self).view(T)

    def data_ptr(self):
        return self.ctypes.data

    def is_contiguous(self):
        return self.flags.c_contiguous

    def isfinite(self):
        return np.isfinite(np.asarray(self)).view(T)


def _t(a, dtype=None):
    return np.ascontiguousarray(np.asarray(a, dtype=dtype)).view(T)


def fake_torch():
    m = types.SimpleNamespace(float32=np.float32, float64=np.float64, int32=np.int32, bfloat16=np.float16)
    m.tensor = lambda data, dtype=None, device=None: _t(data, dtype)
    m.empty = lambda *shape, dtype=np.float32, device=None: _t(np.full(shape, np.nan, dtype=dtype))
    m.empty_like = lambda x: _t(np.full(x.shape, np.nan, dtype=x.dtype))
    m.exp, m.abs, m.log1p = np.exp, np.abs, np.log1p
    m.nn = types.SimpleNamespace(functional=types.SimpleNamespace(
        softplus=lambda x: np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))).view(T)))
    m.cuda = types.SimpleNamespace(current_device=lambda: 0, synchronize=lambda *a: None, empty_cache=lambda: None,
                                   current_stream=lambda: types.SimpleNamespace(cuda_stream=1234))
    m.linalg = types.SimpleNamespace(
        vector_norm=lambda x, dtype=None: np.float64(np.linalg.norm(np.asarray(x, dtype=np.float64).ravel())))
    return m


def _at(ptr: int, shape, dtype) -> np.ndarray:
    """The host array at a raw address (what the kernel would index)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.frombuffer((ctypes.c_char * n).from_address(ptr), dtype=dtype).reshape(shape)


class FakeHost:
    """cuda_host's surface: the flags, a P (any; the real heuristic is checked against the wheel below), a launch
    that reads every operand back from its address and writes o = v and final state = initial state (+ a NaN)."""
    FLAG_L2NORM, FLAG_SAFE_GATE, FLAG_BETA_SIGMOID = 1, 2, 4
    DEFAULT_Q_SCALE = 0.08838834764831845

    def __init__(self, nan_in_o: bool = False):
        self.calls: list[dict] = []
        self.nan_in_o = nan_in_o

    @staticmethod
    def pieces_per_sequence(total, n, h):
        return 1 + (total // n + h) % 5

    def launch(self, **kw):
        TT, N, H = kw["total_tokens"], kw["n_seqs"], kw["n_heads"]
        seen = {"cu": _at(kw["cu_seqlens"], (N + 1,), np.int32).copy(),
                "g": _at(kw["g"], (TT, H, K), np.float32).copy(),
                "beta": _at(kw["beta"], (TT, H), np.float32).copy(),
                "q": _at(kw["q"], (TT, H, K), np.float16).copy()}
        o = _at(kw["o"], (TT, H, V), np.float16)
        o[:] = _at(kw["v"], (TT, H, V), np.float16)
        if self.nan_in_o:
            o[0, 0, 0] = np.nan
        _at(kw["final_state"], (N, H, V, K), np.float32)[:] = _at(kw["initial_state"], (N, H, V, K), np.float32)
        self.calls.append({**kw, "seen": seen})


def peer(host=None) -> cp.Cudnn:
    c = cp.Cudnn.__new__(cp.Cudnn)
    c.host, c.info = host or FakeHost(), {"import": "test"}
    return c


def inputs(s: bc.Shape, R: int = 1, seed: int = 0):
    """The benchmark's input dict layout (make_sets) in numpy: bf16 stand-in q/k/v/g/beta, fp32 rest."""
    rng = np.random.default_rng(seed)
    B, TT, H = s.B, s.T, s.H
    f16 = lambda *sh: _t(rng.standard_normal(sh), np.float16)  # noqa: E731
    sets = [dict(q=f16(B, TT, H, K), k=f16(B, TT, H, K), v=f16(B, TT, H, V), g=f16(B, TT, H, K), beta=f16(B, TT, H),
                 h0=_t(rng.standard_normal((s.N, H, V, K)) * 0.1, np.float32)) for _ in range(R)]
    cu = s.cu_seqlens
    shared = dict(A_log=_t(rng.standard_normal(H) * 0.5, np.float32), dt_bias=_t(rng.standard_normal(H * K), np.float32),
                  cu_seqlens=None if cu is None else _t(cu, np.int64), cu_seqlens_cpu=None, sshape=(s.N, H, V, K))
    return sets, shared


# ---- shape sets ----------------------------------------------------------------------------------------

def test_k3_shape_set():
    want = [(2048, 12, 1), (2048, 16, 1), (4096, 8, 1), (4096, 12, 1), (8192, 12, 4), (8192, 16, 1), (1024, 4, 1),
            (3072, 10, 1), (8192, 24, 1), (16384, 16, 8)]
    assert [(s.tokens, s.H, s.N) for s in bc.K3_SHAPES] == want
    assert [s.id for s in bc.K3_SHAPES] == [f"K{i}" for i in range(1, 11)]
    k5, k10 = bc.K3_SHAPES[4], bc.K3_SHAPES[9]
    assert k5.seqlens == (2048,) * 4 and k5.cu_seqlens == [0, 2048, 4096, 6144, 8192] and k5.B == 1
    assert k10.seqlens == (2048,) * 8 and k10.cu_seqlens[-1] == 16384
    assert bc.K3_SHAPES[0].seqlens is None and bc.K3_SHAPES[0].B == 1  # N = 1: dense
    with pytest.raises(ValueError):
        bc.k3_shape(1, 1000, 4, 3)


def test_resolve_shapes_and_gates():
    assert [s.id for s in bc.resolve_shapes(None)] == ["P1", "P2", "P3", "P4", "P5", "P6"]
    assert [s.id for s in bc.resolve_shapes(["k3"])] == [f"K{i}" for i in range(1, 11)]
    assert [s.id for s in bc.resolve_shapes(["K2", "P6", "p"])] == ["P1", "P2", "P3", "P4", "P5", "P6", "K2"]
    assert [s.id for s in bc.resolve_shapes(["f"])] == ["F1", "F2", "F3", "F4"]
    assert [s.id for s in bc.resolve_shapes(["K3"])] == ["K3"]       # the shape, not the set k3
    assert [s.id for s in bc.resolve_shapes(["K3", "P1"])] == ["P1", "K3"]
    assert len(bc.resolve_shapes(["K3", "k3"])) == 10
    assert all(s.B == 1 and s.H <= 4 for s in bc.resolve_shapes(["f"]))   # few chains: one prompt on a few heads
    assert len(bc.resolve_shapes(["all"])) == 20
    with pytest.raises(ValueError, match="unknown shape 'K11'"):
        bc.resolve_shapes(["K11"])
    assert bc.gates_for(bc.SHAPES[0], None) == ["softplus", "lower_bound"]
    assert bc.gates_for(bc.K3_SHAPES[0], None) == ["lower_bound"]  # cuDNN's shapes run with the bounded gate
    assert bc.gates_for(bc.K3_SHAPES[0], ["softplus"]) == ["softplus"]
    assert bc.gates_for(bc.FEW_CHAIN_SHAPES[0], None) == ["softplus", "lower_bound"]


def test_custom_chunk_shapes_from_the_command_line():
    got = bc.resolve_shapes(["B2T4096H16", "P6", "B2T4096H16", "B1T100H3"])
    assert [(s.id, s.B, s.T, s.H, s.N, s.tokens) for s in got] == [
        ("P6", 2, 2048, 8, 2, 4096), ("B2T4096H16", 2, 4096, 16, 2, 8192), ("B1T100H3", 1, 100, 3, 1, 100)]
    custom = got[1]
    assert custom.seqlens is None and custom.cu_seqlens is None   # dense
    assert bc.gates_for(custom, None) == ["softplus", "lower_bound"]
    assert bc.at_head_dim(custom, 64) is custom                    # as given at every head dim
    assert bc.at_head_dim(bc.SHAPES[5], 64).H == 16                # the named shapes keep H·K
    for bad in ("B0T64H4", "B1T0H4", "B1T64H0"):
        with pytest.raises(ValueError, match="at least 1"):
            bc.resolve_shapes([bad])
    for bad in ("B2T4096", "b2t4096h16", "B2xT4096xH16", "B2T4096H16x"):
        with pytest.raises(ValueError, match=r"B<sequences>T<tokens>H<heads>"):
            bc.resolve_shapes([bad])


def test_fla_warm_k3_tasks():
    from kda2.bench import fla_warm

    assert fla_warm.tasks("k3") == [("bench", f"K{i}", "lower_bound", 128) for i in range(1, 11)]
    assert fla_warm.tasks("f") == [("bench", f"F{i}", g, 128) for i in range(1, 5) for g in ("softplus", "lower_bound")]
    assert all(t[1].startswith("P") for t in fla_warm.tasks("bench"))


# ---- roofline ------------------------------------------------------------------------------------------

def test_floor_bytes_by_hand():
    # P6: B2 T2048 H8 -> 4096 tokens x 8 heads x (q 256 + k 256 + v 256 + g 256 + beta 2 + o 256 B)
    #     + h0 and ht: 2 x (2 seqs x 8 heads x 128 x 128 x 4 B)
    p6 = 4096 * 8 * 1282 + 2 * 2 * 8 * 65536
    assert p6 == 44_105_728
    assert report.floor_bytes(4096, 8, 2) == p6 == bc.set_bytes(bc.SHAPES[5])
    k10 = 16384 * 16 * 1282 + 2 * 8 * 16 * 65536
    assert bc.set_bytes(bc.K3_SHAPES[9]) == k10 == 352_845_824
    row = dict(id="P6", gate="softplus", B=2, T=2048, tokens=4096, H=8, K=128, V=128, cu_seqlens=None)
    b = report.row_bounds(row, copy_tbps=4.0, step_us=2.5)
    assert b["floor_bytes"] == p6 and b["hbm_floor_ms"] == pytest.approx(p6 / 4e12 * 1e3) == pytest.approx(0.011026432)
    assert b["serial_steps"] == 32 and b["serial_chain_ms"] == pytest.approx(0.08)
    none = report.row_bounds(row)
    assert none["hbm_floor_ms"] is None and none["serial_chain_ms"] is None and none["serial_steps"] == 32


def test_serial_steps_use_the_longest_sequence():
    p4 = bc.SHAPES[3]
    row = dict(id="P4", gate="x", B=1, T=p4.T, tokens=p4.tokens, H=64, cu_seqlens=p4.cu_seqlens, N=p4.N)
    assert report.serial_steps(3063) == 48 and report.row_bounds(row)["serial_steps"] == 48
    assert report.row_bounds(row)["floor_bytes"] == bc.set_bytes(p4)
    p5 = dict(id="P5", gate="x", B=1, T=65536, tokens=65536, H=32)
    assert report.row_bounds(p5, step_us=2.5)["serial_chain_ms"] == pytest.approx(1024 * 2.5e-3)
    assert report.serial_steps(64) == 1 and report.serial_steps(65) == 2


def _result(rows, **kw):
    return dict(kind="kda2-bench-chunk", date="2026-11-30", device={"name": "NVIDIA H200"}, versions={"torch": "2.11"},
                config={"layout": "v_first", "iters": 20}, fla={"available": True}, rows=rows, notes=[], **kw)


PEER_ROWS = [
    dict(id="P6", label="P6 B2 T2048 H8", gate="lower_bound", B=2, T=2048, tokens=4096, H=8, K=128, V=128, N=2,
         cu_seqlens=None, layout="v_first", anchor=bc.anchor("P6", "lower_bound"),
         kda2={"ms_median": 0.05}, fla={"ms_median": 0.9},
         cudnn={"ms_median": 0.04, "P": 16, "nonfinite_o": 0, "nonfinite_state": 0, "o_rel_l2_vs_kda2": 4e-3,
                "o_rel_l2_vs_fla": 5e-3, "state_rel_l2_vs_kda2": 2e-3},
         cudnn_with_prep={"ms_median": 0.06}, agreement={"ok": True, "o_rel_l2_kda2_vs_fla": 3e-3}),
    dict(id="K1", label="K1 B1 T2048 H12", gate="lower_bound", B=1, T=2048, tokens=2048, H=12, K=128, V=128, N=1,
         cu_seqlens=None, layout="v_first", anchor=bc.anchor("K1", "lower_bound"), kda2={"ms_median": 0.03},
         cudnn={"ms_median": 0.02, "P": 22, "nonfinite_o": 3, "nonfinite_state": 0}, agreement={"ok": True}),
    dict(id="P5", label="P5", gate="*", layout="v_first", kda2={"error": "OOM"}),
]


def test_roofline_rows_take_the_json_or_the_arguments():
    res = _result(PEER_ROWS, copy={"TBps": 4.0}, serial_step_us=None)
    rows = report.roofline_rows(res)
    assert [r["id"] for r in rows] == ["P6", "K1"]  # the errored row has nothing to plot
    assert rows[0]["cudnn"] == 0.04 and rows[0]["cudnn_with_prep"] == 0.06 and rows[1]["fla"] is None
    assert rows[0]["hbm_floor_ms"] == pytest.approx(0.011026432) and rows[0]["serial_chain_ms"] is None
    over = report.roofline_rows(res, step_us=3.0, copy_tbps=2.0)
    assert over[0]["hbm_floor_ms"] == pytest.approx(0.022052864) and over[0]["serial_chain_ms"] == pytest.approx(0.096)
    assert report.roofline_rows(dict(res, serial_step_us=1.0))[1]["serial_chain_ms"] == pytest.approx(0.032)


def test_roofline_chart_and_cli(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    res = _result(PEER_ROWS, copy={"TBps": 4.0})
    assert report.roofline_chart(res, tmp_path / "r.png", step_us=2.0) is None
    assert (tmp_path / "r.png").stat().st_size > 1000
    assert "no timed rows" in report.roofline_chart(_result([]), tmp_path / "x.png")
    (tmp_path / "b.json").write_text(json.dumps(res))
    assert report.main(["--roofline", str(tmp_path / "b.json"), str(tmp_path / "c.png"), "--step-us", "2"]) == 0
    out = capsys.readouterr().out
    assert "P6 lower_bound" in out and "floor 0.011" in out and "serial 0.064 (32 steps)" in out
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_roofline_cli_names_a_file_that_is_no_chunk_result(tmp_path, capsys):
    """One line naming the file, exit 2, nothing drawn (it raised FileNotFoundError / KeyError)."""
    (tmp_path / "r.json").write_text(json.dumps({"kind": "kda2-bench-recurrent", "rows": [{}]}))
    for bad, what in ((tmp_path / "none.json", "cannot read it"), (tmp_path / "r.json", "a kda2 bench recurrent result")):
        assert report.main(["--roofline", str(bad), str(tmp_path / "d.png")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"kda2: error: {bad}: ") and what in err and err.count("\n") == 1, err
    assert not (tmp_path / "d.png").exists()


def test_roofline_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert "matplotlib is not importable" in report.roofline_chart(_result(PEER_ROWS), tmp_path / "r.png")
    (tmp_path / "b.json").write_text(json.dumps(_result(PEER_ROWS)))
    assert report.main(["--roofline", str(tmp_path / "b.json"), str(tmp_path / "c.png")]) == 1
    assert not (tmp_path / "c.png").exists()


def test_markdown_has_the_peer_table():
    md = bc.markdown_table(_result(PEER_ROWS, cudnn={"available": True}))
    assert "| P6 B2 T2048 H8 | lower_bound | 0.040 | 0.060 | 0.050 | 16 | 0, 0 | 4.0e-03 | 5.0e-03 | 2.0e-03 |" in md
    assert "| K1 B1 T2048 H12 | lower_bound | 0.020 | – | 0.030 | 22 | 3, 0 **non-finite** |" in md
    assert "cuDNN has no softplus gate" in md


# ---- the gate precompute and the marshalling -----------------------------------------------------------

def test_softplus_gate_matches_the_fp64_reference():
    rng = np.random.default_rng(1)
    H = 3
    g = rng.standard_normal((2, 7, H, K)) * 4
    g[0, 0, 0, :4] = [25.0, -40.0, 19.9, 20.1]  # both sides of FLA's softplus threshold, and far negative
    A_log, dt = rng.standard_normal(H) * 0.5, rng.standard_normal(H * K)
    ref = gate_activation(g, A_log, dt, None)
    ours = cp.softplus_gate(np, g, A_log, dt)  # exact softplus: differs from FLA's threshold-20 form by < 2.1e-9
    assert ours.shape == g.shape and np.max(np.abs(ours - ref) / np.maximum(np.abs(ref), 1e-300)) < 1e-9
    thresholded = cp.softplus_gate(np, g, A_log, dt, fake_torch().nn.functional.softplus)  # FLA's threshold form
    assert np.max(np.abs(thresholded - ref)) < 1e-12
    g32 = cp.softplus_gate(np, g.astype(np.float32), A_log.astype(np.float32), dt.astype(np.float32))
    assert g32.dtype == np.float32 and np.max(np.abs(g32 - ref) / np.abs(ref)) < 1e-5
    assert np.all(ours < 0)
    # a wrong formula (no dt_bias, or exp(A_log) left out) would be far off
    assert np.max(np.abs(cp.softplus_gate(np, g, A_log, 0 * dt) - ref)) > 0.1


def test_softplus_gate_in_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    g, A_log, dt = rng.standard_normal((1, 5, 2, K)), rng.standard_normal(2) * 0.5, rng.standard_normal(2 * K)
    t = lambda a: torch.from_numpy(a).float()  # noqa: E731
    ours = cp.softplus_gate(torch, t(g), t(A_log), t(dt), torch.nn.functional.softplus)
    assert ours.dtype == torch.float32
    np.testing.assert_allclose(ours.double().numpy(), gate_activation(g, A_log, dt, None), rtol=1e-5, atol=1e-6)


def test_flags_tables_and_shapes():
    h = FakeHost()
    assert cp.flags(h, "lower_bound") == 7 and cp.flags(h, "softplus") == 5
    assert cp.flags(h, "softplus", l2norm=False, beta_sigmoid=False) == 0
    with pytest.raises(ValueError):
        cp.flags(h, "sigmoid")
    assert cp.seq_table(2, 5, None) == [0, 5, 10] and cp.seq_table(1, 9, [0, 4, 9]) == [0, 4, 9]
    with pytest.raises(ValueError):
        cp.seq_table(2, 9, [0, 4, 9])
    sh = cp.thd_shapes(2, 5, 3, 2)
    assert sh["q"] == ((10, 3, 128), "bfloat16") and sh["g"] == ((10, 3, 128), "float32")
    assert sh["beta"] == ((10, 3), "float32") and sh["cu_seqlens"] == ((3,), "int32")
    assert sh["initial_state"] == sh["final_state"] == ((2, 3, 128, 128), "float32")


@pytest.mark.parametrize("gate", ["softplus", "lower_bound"])
@pytest.mark.parametrize("shape", [bc.Shape("DX", 2, 37, 2), bc.Shape("VX", 1, 50, 3, seqlens=(17, 33))])
def test_marshalling_reaches_the_kernel(gate, shape):
    """Every pointer names the buffer it should, with the kernel's shape / dtype and the right values: g is the
    fp32 precomputed softplus gate (== the fp64 reference to fp32 rounding) or the raw gate under the safe-gate
    flag, beta the raw fp32 logits (sigmoid flag), cu int32, A_log / dt_bias only for the safe gate."""
    torch = fake_torch()
    sets, shared = inputs(shape, R=2)
    c = peer()
    m = c.marshal(torch, sets, shared, gate, shape)
    TT, N, H = shape.tokens, shape.N, shape.H
    assert (m["total"], m["N"], m["H"]) == (TT, N, H) and m["P"] == FakeHost.pieces_per_sequence(TT, N, H)
    assert m["flags"] == (7 if gate == "lower_bound" else 5)
    for i in (1, 0):
        o, ht = c.call(torch, sets, shared, m)(i)
        kw = c.host.calls[-1]
        x = sets[i]
        assert kw["o"] == m["o"][i].data_ptr() and kw["final_state"] == m["ht"][i].data_ptr()
        assert (kw["q"], kw["k"], kw["v"], kw["initial_state"]) == tuple(x[n].data_ptr() for n in ("q", "k", "v", "h0"))
        assert (kw["total_tokens"], kw["n_seqs"], kw["n_heads"], kw["n_qk_heads"]) == (TT, N, H, H)
        assert kw["q_scale"] == pytest.approx(FakeHost.DEFAULT_Q_SCALE) and kw["gate_lower_bound"] == -5.0
        assert kw["stream"] == 1234 and kw["device"] == 0 and kw["flags"] == m["flags"]
        seen = kw["seen"]
        assert seen["cu"].tolist() == cp.seq_table(shape.B, shape.T, shape.cu_seqlens)
        np.testing.assert_array_equal(seen["q"], np.asarray(x["q"]).reshape(TT, H, K))
        np.testing.assert_array_equal(seen["beta"], np.asarray(x["beta"], np.float32).reshape(TT, H))
        raw = np.asarray(x["g"], np.float64).reshape(TT, H, K)
        if gate == "softplus":
            assert kw["a_log"] == 0 and kw["dt_bias"] == 0
            ref = gate_activation(raw, np.asarray(shared["A_log"]), np.asarray(shared["dt_bias"]), None)
            np.testing.assert_allclose(seen["g"], ref, rtol=2e-6, atol=1e-7)
        else:
            assert kw["a_log"] == shared["A_log"].data_ptr() and kw["dt_bias"] == shared["dt_bias"].data_ptr()
            np.testing.assert_array_equal(seen["g"], raw.astype(np.float32))
        assert o.shape == (TT, H, V) and o.dtype == np.float16 and ht.shape == (N, H, V, K) and ht.dtype == np.float32
        np.testing.assert_array_equal(np.asarray(o), np.asarray(x["v"]).reshape(TT, H, V))
    # with the marshalling per call: fresh buffers, same values
    before = len(c.host.calls)
    c.call_with_prep(torch, sets, shared, m)(0)
    kw = c.host.calls[before]
    assert kw["g"] != m["prepped"][0][0].data_ptr()
    np.testing.assert_array_equal(kw["seen"]["g"], c.host.calls[before - 1]["seen"]["g"])


class _FakeTimer:
    def __init__(self):
        self.timed = []

    def kernel(self, fn, n_sets, reps, warmup=5):
        for i in range(warmup + reps):
            fn(i % n_sets)
        self.timed.append(fn.__qualname__)
        return Stats.of([2.0 if "with_prep" in fn.__qualname__ else 1.0] * reps)


def test_bench_cudnn_row():
    torch, timer = fake_torch(), _FakeTimer()
    s = bc.Shape("VX", 1, 50, 2, seqlens=(17, 33))
    sets, shared = inputs(s, R=2)
    kda2_o = _t(np.asarray(sets[0]["v"], np.float32) * 1.01)  # o of kda2 / FLA on set 0 (B, T, H, V)
    keep = {"kda2": (kda2_o, _t(np.asarray(sets[0]["h0"]))), "fla": (_t(np.asarray(sets[0]["v"], np.float32)),
                                                                      _t(np.asarray(sets[0]["h0"]) * 2))}
    res, prep = bc.bench_cudnn(torch, timer, peer(), s, sets, shared, "lower_bound", True, 4, 1, keep)
    assert res["P"] == FakeHost.pieces_per_sequence(50, 2, 2) and res["grid"] == [2, 2 * res["P"]]
    assert res["nonfinite_o"] == 0 and res["nonfinite_state"] == 0 and res["flags"] == 7
    assert res["o_rel_l2_vs_kda2"] == pytest.approx(0.01 / 1.01, rel=1e-2) and res["o_rel_l2_vs_fla"] < 1e-6
    assert res["state_rel_l2_vs_kda2"] == 0 and res["state_rel_l2_vs_fla"] == pytest.approx(0.5)
    assert res["ms_median"] == 1.0 and prep["ms_median"] == 2.0 and "safe-gate" in res["gate_mode"].replace("SAFE_GATE",
                                                                                                          "safe-gate")
    res, _ = bc.bench_cudnn(torch, _FakeTimer(), peer(FakeHost(nan_in_o=True)), s, sets, shared, "softplus", True, 2, 0,
                            {})
    assert res["nonfinite_o"] == 1 and "o_rel_l2_vs_kda2" not in res and "precomputed" in res["gate_mode"]
    res, prep = bc.bench_cudnn(torch, _FakeTimer(), peer(), s, sets, shared, "softplus", False, 2, 0, keep)
    assert "V-first" in res["skipped"] and prep is None


def test_bench_shape_with_the_peer(monkeypatch):
    """One shape x both gates through bench_shape: stand-ins for kda2 and FLA (o = v·(1 + noise), state = h0), the
    cuDNN adapter on the pointer-reading host; the rows carry the peer's timings, its distance to kda2 / FLA
    and the roofline bounds."""
    torch, timer = fake_torch(), _FakeTimer()
    s = bc.Shape("VX", 1, 50, 2, seqlens=(17, 33))
    monkeypatch.setattr(bc, "make_sets", lambda torch_, shape, R, v_first, seed, K, V: inputs(shape, R, seed))

    class Impl:
        def __init__(self, name, noise):
            self.name, self.noise, self.entry = name, noise, name

        def call(self, sets, shared, gate, v_first, outs=None, hts=None):
            def kda2_or_fla(i):
                return (_t(np.asarray(sets[i]["v"], np.float32) * (1 + self.noise)),
                        _t(np.asarray(sets[i]["h0"]).copy()))
            return kda2_or_fla

    rows = bc.bench_shape(torch, timer, Impl("kda2", 0.0), Impl("fla", 0.005), s, ["softplus", "lower_bound"],
                          "v_first", 3, 1, 50 * 2**20, peer(), {"copy_tbps": 4.0, "step_us": 2.0})
    assert [r["gate"] for r in rows] == ["softplus", "lower_bound"]
    for r in rows:
        c = r["cudnn"]
        assert c["ms_median"] == 1.0 and r["cudnn_with_prep"]["ms_median"] == 2.0 and c["nonfinite_o"] == 0
        assert c["o_rel_l2_vs_kda2"] < 1e-6 and c["o_rel_l2_vs_fla"] == pytest.approx(0.005 / 1.005, rel=1e-2)
        assert c["state_rel_l2_vs_kda2"] == 0 and c["flags"] == (5 if r["gate"] == "softplus" else 7)
        assert r["roofline"]["floor_bytes"] == bc.set_bytes(s) and r["roofline"]["serial_steps"] == 1
        assert r["roofline"]["hbm_floor_ms"] == pytest.approx(bc.set_bytes(s) / 4e9)
        assert r["agreement"]["ok"] is True and "speedup" in r
    md = bc.markdown_table(_result(rows, cudnn={"available": True}))
    assert md.count("| VX varlen [17, 33] H2 |") == 4  # the main table and the peer table, both gates


# ---- without cuDNN-FE -----------------------------------------------------------------------------------

def test_not_importable(tmp_path):
    with pytest.raises(cp.CudnnUnavailable, match="not installed"):
        cp.find_package([str(tmp_path)])
    (tmp_path / "cudnn").mkdir()
    (tmp_path / "cudnn" / "__init__.py").write_text("raise ImportError('would load the compiled extension')\n")
    with pytest.raises(cp.CudnnUnavailable, match=">= 1.32"):
        cp.find_package([str(tmp_path)])
    with pytest.raises(cp.CudnnUnavailable):
        cp.Cudnn(search_path=[str(tmp_path)])
    assert "cudnn" not in sys.modules or not getattr(sys.modules["cudnn"], "_kda2_stand_in", False)


def test_run_goes_on_without_cudnn_and_says_so(tmp_path):
    result = {"notes": []}
    assert bc.start_cudnn(result, True, "v_first", make=lambda: cp.Cudnn(search_path=[str(tmp_path)])) is None
    assert result["cudnn"]["available"] is False and "not installed" in result["cudnn"]["error"]
    assert any(n.startswith("cuDNN-FE not benchmarked: CudnnUnavailable") for n in result["notes"])
    md = bc.markdown_table(_result([], cudnn=result["cudnn"]))
    assert "cuDNN-FE was not measured: CudnnUnavailable" in md
    off = {"notes": []}
    assert bc.start_cudnn(off, False, "v_first") is None and off["cudnn"]["error"] == "disabled with --no-cudnn"
    kf = {"notes": []}
    assert bc.start_cudnn(kf, True, "k_first", make=lambda: pytest.fail("must not import")) is None
    assert "V-first" in kf["cudnn"]["error"]
    ok = {"notes": []}
    got = bc.start_cudnn(ok, True, "v_first", make=lambda: peer())
    assert got is not None and ok["cudnn"]["available"] is True and ok["notes"] == []


def test_cli_takes_the_peer_options(tmp_path, monkeypatch, capsys):
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = bench_main(["chunk", "--out", str(tmp_path), "--shapes", "k3,P6", "--no-cudnn", "--step-us", "2.5"])
    assert rc == 2 and "needs" in capsys.readouterr().err
    assert bench_main(["chunk", "--out", str(tmp_path), "--shapes", "k4"]) == 2
    assert "unknown shape 'k4'" in capsys.readouterr().err
    assert bench_main(["chunk", "--out", str(tmp_path), "--step-us", "0"]) == 2
    assert "--step-us 0.0 (allowed" in capsys.readouterr().err


# ---- the real wheel, where it is unpacked -----------------------------------------------------------------

WHEEL = Path(os.environ.get("KDA2_CUDNN_FE_DIR", "/tmp/cudnnwhl/x"))


@pytest.fixture
def clean_cudnn():
    yield
    for name in [n for n in sys.modules if n == "cudnn" or n.startswith("cudnn.")]:
        del sys.modules[name]


def test_real_cuda_host_through_the_stand_in(clean_cudnn):
    if not (WHEEL / "cudnn" / cp.HOST_FILE).is_file() or "cudnn" in sys.modules:
        pytest.skip(f"no unpacked nvidia-cudnn-frontend wheel at {WHEEL} (set KDA2_CUDNN_FE_DIR)")
    pytest.importorskip("cuda.bindings.driver")
    host, info = cp.import_cuda_host([str(WHEEL)])
    assert info["import"].startswith("stand-in") and info["smem_bytes"] == 94464 and info["block"] == 128
    assert "cudnn.graph" not in info["modules"] and "cudnn._compiled_module" not in info["modules"]
    assert (host.FLAG_L2NORM, host.FLAG_SAFE_GATE, host.FLAG_BETA_SIGMOID) == (1, 2, 4)
    # the adapter's keyword arguments bind to the wheel's launch signature
    torch, s = fake_torch(), bc.Shape("DX", 1, 20, 2)
    sets, shared = inputs(s)
    fake = peer()
    fake.call(torch, sets, shared, fake.marshal(torch, sets, shared, "lower_bound", s))(0)
    kw = {k: v for k, v in fake.host.calls[-1].items() if k != "seen"}
    inspect.signature(host.launch).bind(**kw)
    # P: its own heuristic, by hand from its rule (~264 CTAs = N·H·P, at most one piece per 16-token chunk)
    assert [cp.pieces(host, s.tokens, s.N, s.H) for s in bc.K3_SHAPES] == [22, 16, 33, 22, 5, 16, 64, 26, 11, 2]
    assert cp.pieces(host, 65536, 1, 32) == 8 and cp.pieces(host, 40, 1, 1) == 3 and cp.pieces(host, 8192, 1, 512) == 1
    assert math.isclose(host.DEFAULT_Q_SCALE, 128 ** -0.5)
