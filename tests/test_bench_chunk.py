"""CPU checks of the chunk benchmark's pure parts (kda2.bench.chunk): shapes, anchors, the report, the CLI,
and one shape's bookkeeping driven through stand-in implementations (the timing itself needs a GPU)."""
from __future__ import annotations

import pytest

from kda2.bench import chunk as bc
from kda2.bench import main as bench_main
from kda2.bench.timing import Stats


def test_shapes_are_consistent():
    """Each shape's derived sizes agree with its definition (dense: N = B sequences of T; varlen: B = 1 and the
    sequences tile the packed tokens exactly), ids are P1..P6 in order, labels say what the shape is."""
    assert [s.id for s in bc.SHAPES] == [f"P{i}" for i in range(1, len(bc.SHAPES) + 1)]
    for s in bc.SHAPES:
        if s.cu_seqlens is None:
            assert (s.N, s.tokens) == (s.B, s.B * s.T) and f"B{s.B} T{s.T} H{s.H}" in s.label
        else:
            cu = s.cu_seqlens
            assert s.B == 1 and cu[0] == 0 and cu[-1] == s.tokens == s.T and s.N == len(cu) - 1
            assert all(b > a for a, b in zip(cu, cu[1:])) and "varlen" in s.label


def test_anchors_are_labelled_and_complete():
    assert bc.ANCHORS["measured_by_this_run"] is False
    for s in bc.SHAPES:
        for gate in bc.GATES:
            a = bc.anchor(s.id, gate)
            assert a["fla_ms"] > 0 and a["target_ms"] > 0 and a["hbm_floor_ms"] > 0
        assert bc.anchor(s.id, "softplus")["flashkda_ms"] is None  # FlashKDA cannot run the unbounded gate
    assert bc.GATE_OPTIONS["lower_bound"]["safe_gate"] is True  # FLA requires it with a lower bound


def test_rotating_sets():
    l2 = 50 * 2**20
    by = {s.id: bc.n_sets(s, l2) for s in bc.SHAPES}
    assert by["P5"] == 1 and by["P1"] == 1 and 2 <= by["P6"] <= 4
    assert bc.set_bytes(bc.SHAPES[4]) > 2e9


def _result(rows, **kw):
    return dict(kind="kda2-bench-chunk", date="2026-11-29", device={"name": "NVIDIA H200"}, versions={"torch": "2.11"},
                config={"layout": "v_first", "iters": 20}, fla={"available": True}, rows=rows, notes=[], **kw)


ROWS = [
    dict(id="P1", label="P1 B1 T8192 H64", gate="softplus", layout="v_first", anchor=bc.anchor("P1", "softplus"),
         kda2={"ms_median": 0.5}, fla={"ms_median": 2.0}, speedup=4.0,
         agreement={"o_rel_l2_kda2_vs_fla": 3e-3, "ok": True}),
    dict(id="P1", label="P1 B1 T8192 H64", gate="lower_bound", layout="v_first", anchor=bc.anchor("P1", "lower_bound"),
         kda2={"error": "KDA2LaunchError: boom"}, fla={"ms_median": 1.8}, agreement={"o_rel_l2_kda2_vs_fla": 0.5,
                                                                                  "ok": False}),
]


def test_markdown_table():
    md = bc.markdown_table(_result(ROWS))
    assert "| P1 B1 T8192 H64 | softplus | 0.500 | 2.000 | 4.00× | 1.935 | 0.25 | 3.0e-03 |" in md
    assert "| P1 B1 T8192 H64 | lower_bound | – | 1.800 | – | 1.749 | – | 5.0e-01 **(> 1e-2)** |" in md
    assert "P1 lower_bound kda2: ERROR KDA2LaunchError: boom" in md and "not measured here" in md
    assert "The run failed: no GPU" in bc.markdown_table(_result([], error="no GPU"))
    assert "FLA was not measured: disabled" in bc.markdown_table(
        dict(_result([]), fla={"available": False, "error": "disabled"}))


def test_chart(tmp_path):
    pytest.importorskip("matplotlib")
    assert bc.chart(_result(ROWS), tmp_path / "c.png") is None
    assert (tmp_path / "c.png").stat().st_size > 1000
    assert "no timed rows" in bc.chart(_result([]), tmp_path / "d.png")


def test_cli_refuses_bad_arguments_and_needs_a_gpu(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert bench_main(["chunk", "--out", str(out), "--gates", "softplus,nope"]) == 2
    assert "--gates: unknown gate 'nope'" in capsys.readouterr().err
    assert bench_main(["chunk", "--out", str(out), "--shapes", "P7"]) == 2
    assert "--shapes: unknown shape 'P7'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_main(["chunk", "--layout", "sideways"])
    assert "invalid choice: 'sideways'" in capsys.readouterr().err
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench_main(["chunk", "--out", str(out), "--shapes", "P6", "--iters", "2"]) == 2
    assert capsys.readouterr().err == "kda2: error: torch.cuda is not available: the benchmark needs a GPU\n"
    assert not out.exists()   # stopped before measuring: nothing written


def test_overlap_option_reaches_every_kda2_call(tmp_path, capsys):
    """--overlap auto | on | off becomes chunk_kda's overlap=None | True | False on every timed call; anything else is
    refused before a GPU is looked for."""
    with pytest.raises(SystemExit):
        bench_main(["chunk", "--out", str(tmp_path), "--overlap", "sometimes"])
    assert bc.run(tmp_path, shapes=["P6"], overlap="sometimes") == 2
    assert "--overlap 'sometimes' (allowed ['auto', 'on', 'off'])" in capsys.readouterr().err
    sets = [dict(q=1, k=2, v=3, g=4, beta=5, h0=6)]
    shared = dict(cu_seqlens=None, cu_seqlens_cpu=None, A_log=None, dt_bias=None)
    for flag, want in (("auto", None), ("on", True), ("off", False)):
        seen = []
        ours = bc.Ours(None, bc.OVERLAP[flag])
        ours.fn = lambda *a, **kw: seen.append(kw["overlap"])
        ours.call(sets, shared, "softplus", True, None, None)(0)
        assert seen == [want], flag


class _FakeTimer:
    def kernel(self, fn, n_sets, reps, warmup=5):
        for i in range(warmup + reps):
            fn(i % n_sets)
        return Stats.of([1.0 if "kda2" in fn.__qualname__ else 3.0] * reps)


def test_bench_shape_bookkeeping(monkeypatch):
    """One shape through stand-in implementations on the CPU: rows, speed-up, agreement, freeing."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    s = bc.Shape("PX", 2, 40, 2)
    calls = {"kda2": 0, "fla": 0}

    def make_sets(torch_, shape, R, v_first, seed, K=16, V=8):
        g = torch.Generator().manual_seed(seed)
        sshape = (shape.N, shape.H, V, K) if v_first else (shape.N, shape.H, K, V)
        sets = [dict(q=torch.randn(shape.B, shape.T, shape.H, K, generator=g).bfloat16(),
                     k=None, g=None, beta=None, v=torch.randn(shape.B, shape.T, shape.H, V, generator=g).bfloat16(),
                     h0=torch.randn(*sshape, generator=g)) for _ in range(R)]
        return sets, dict(cu_seqlens=None, cu_seqlens_cpu=None, A_log=None, dt_bias=None, sshape=sshape)

    class Impl:
        def __init__(self, name, noise):
            self.name, self.noise, self.entry = name, noise, name

        def call(self, sets, shared, gate, v_first, outs=None, hts=None):
            name, noise = self.name, self.noise

            def kda2_or_fla(i):
                calls[name] += 1
                o = sets[i]["v"].float() * (1 + noise)
                h = sets[i]["h0"] * (1 + noise)
                if outs is not None:
                    outs[i].copy_(o)
                    hts[i].copy_(h)
                return o.bfloat16(), h
            kda2_or_fla.__qualname__ = name
            return kda2_or_fla

    class Lib:  # the dispatch a row records: asked with the longest sequence and N·HV chains
        def route(self, v_first, longest, chains):
            return {"variant": f"v{int(v_first)}-{longest}-{chains}", "bucket": 64, "class": "c", "routed_by": "tune",
                    "candidates": ["not copied"]}

    monkeypatch.setattr(bc, "make_sets", make_sets)
    ours = Impl("kda2", 0.0)
    ours.lib = Lib()
    rows = bc.bench_shape(torch, _FakeTimer(), ours, Impl("fla", 4e-3), s, ["softplus", "lower_bound"],
                          "k_first", iters=4, warmup=1, l2=1)
    assert [r["gate"] for r in rows] == ["softplus", "lower_bound"]
    assert rows[0]["route"] == {"variant": "v0-40-4", "bucket": 64, "class": "c", "routed_by": "tune"}
    varlen = bc.Shape("PV", 1, 50, 3, seqlens=(10, 35, 5))
    assert bc.route_of(Lib(), varlen, True)["variant"] == "v1-35-9" and bc.route_of(None, varlen, True) is None
    for r in rows:
        assert r["kda2"]["ms_median"] == 1.0 and r["fla"]["ms_median"] == 3.0 and r["speedup"] == 3.0
        ag = r["agreement"]
        assert ag["ok"] is True and 0 < ag["o_rel_l2_kda2_vs_fla"] < bc.AGREE_TOL and ag["kda2_nonfinite"] == 0
        assert r["anchor"]["fla_ms"] is None and r["sets"] == 1  # PX has no anchor
    assert calls == {"kda2": 2 * (1 + 5), "fla": 2 * (1 + 5)}

    rows = bc.bench_shape(torch, _FakeTimer(), Impl("kda2", 0.0), Impl("fla", 0.5), s, ["softplus"], "v_first",
                          iters=2, warmup=0, l2=1)
    assert rows[0]["agreement"]["ok"] is False


def test_shapes_at_other_head_dims_keep_tokens_and_bytes_per_token():
    """--head-dim 64 / 256: every P shape keeps its tokens and H·K, so its q/k/v/g/o bytes are the P shape's."""
    from kda2.bench.chunk import SHAPES, at_head_dim, set_bytes

    for s in SHAPES:
        assert at_head_dim(s, 128) is s
        for k in (64, 256):
            t = at_head_dim(s, k)
            assert (t.id, t.B, t.T, t.seqlens, t.tokens) == (s.id, s.B, s.T, s.seqlens, s.tokens)
            assert t.H * k == s.H * 128 and f"K = V = {k}" in t.why
            # bytes of the set: q/k/v/g/o unchanged; β (one per token and head) and the states (H·K·V) are not
            other = lambda x, kk: 2 * x.N * x.H * kk * kk * 4 + x.tokens * x.H * 2  # noqa: E731
            assert set_bytes(t, k, k) - other(t, k) == set_bytes(s) - other(s, 128)


def test_a_log_option_reaches_every_implementation(tmp_path, monkeypatch, capsys):
    """--a-log sets every head's A_log for every implementation of a shape (the draw otherwise); a value that is not a
    finite number is refused before a GPU is looked for."""
    assert bc.run(tmp_path, shapes=["P6"], a_log=float("nan")) == 2
    assert "--a-log nan (allowed: a finite number)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_main(["chunk", "--out", str(tmp_path), "--a-log", "strong"])
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    drawn = torch.tensor([0.3, -0.2, 0.9])

    def make_sets(torch_, shape, R, v_first, seed, K=16, V=8):
        sets = [dict(v=torch.zeros(1, 4, shape.H, V), h0=torch.zeros(1, shape.H, V, K)) for _ in range(R)]
        return sets, dict(A_log=drawn.clone(), dt_bias=None, cu_seqlens=None, cu_seqlens_cpu=None)

    class Impl:
        def __init__(self, name):
            self.name, self.entry, self.seen = name, name, []

        def call(self, sets, shared, gate, v_first, outs=None, hts=None):
            def run(i):
                self.seen.append(shared["A_log"].tolist())
                return sets[i]["v"].bfloat16(), sets[i]["h0"]
            run.__qualname__ = self.name
            return run

    monkeypatch.setattr(bc, "make_sets", make_sets)
    s = bc.Shape("PX", 1, 4, 3)
    for a_log, want in ((None, drawn.tolist()), (2.0, [2.0] * 3)):
        ours, fla = Impl("kda2"), Impl("fla")
        bc.bench_shape(torch, _FakeTimer(), ours, fla, s, ["softplus"], "v_first", iters=2, warmup=0, l2=1, a_log=a_log)
        assert ours.seen and fla.seen and all(x == want for x in ours.seen + fla.seen), (a_log, ours.seen, fla.seen)


def test_shared_gate_draw_does_not_follow_the_number_of_sets():
    """A shape's gate parameters (how much of the prep takes the exact path) are the same whether the GPU's L2 asks
    for one input set or four, in both benchmarks; the sets themselves are fresh draws of one seed."""
    torch = pytest.importorskip("torch")
    from kda2.bench import recurrent as br

    def both(R):
        c = bc.make_sets(torch, bc.Shape("PX", 1, 8, 2), R, True, seed=5, K=16, V=16, device="cpu")
        r = br.make_sets(torch, br.Shape("MX", "prefill", 1, 4, 2), 16, 16, R, True, seed=5, device="cpu")
        return c, r
    (c1, r1), (c4, r4) = both(1), both(4)
    for a, b in ((c1, c4), (r1, r4)):
        assert torch.equal(a[1]["A_log"], b[1]["A_log"]) and torch.equal(a[1]["dt_bias"], b[1]["dt_bias"])
        assert len(b[0]) == 4 and torch.equal(a[0][0]["q"], b[0][0]["q"])
        assert not torch.equal(b[0][0]["q"], b[0][1]["q"])
