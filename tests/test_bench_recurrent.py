"""`kda2 bench recurrent`: the forced-variant dispatch a same-run A/B of a candidate uses, and the shapes a run takes
(no GPU)."""
from __future__ import annotations

import ctypes

import pytest

from kda2.bench import recurrent as br
from kda2.bench.recurrent import force_variants
from kda2.runtime import abi


class FakeLib:
    """What force_variants touches of a Library: spec, arch, variants, and the two launch entries."""

    spec, arch = "kimi_linear_recurrent", "sm_90a"

    def __init__(self):
        self.variants = [{"id": "aaaaaaaaaaaa", "index": 0, "config": {"state_layout": "k_first"}},
                         {"id": "bbbbbbbbbbbb", "index": 1, "config": {"state_layout": "v_first"}},
                         {"id": "cccccccccccc", "index": 2, "config": {"state_layout": "v_first"}}]
        self.calls: list = []
        self._fwd = lambda args, max_seqlen, stream: self.calls.append(("routed", args)) or 0
        self._launch = lambda index, args, stream: self.calls.append((index, args)) or 0


def _args(v_first: bool):
    a = abi.KDA2RecurrentArgs()
    a.state_v_first = int(v_first)
    return a, ctypes.addressof(a)


def test_a_forced_layout_launches_its_variant_and_the_other_keeps_its_route() -> None:
    lib = FakeLib()
    assert force_variants(lib, ["cccccccccccc"]) == {"v_first": "cccccccccccc"}
    (vf, vf_ptr), (kf, kf_ptr) = _args(True), _args(False)
    assert lib._fwd(vf_ptr, 1, None) == 0 and lib._fwd(kf_ptr, 1, None) == 0
    assert lib.calls == [(2, vf_ptr), ("routed", kf_ptr)]


def test_unknown_ids_and_two_per_layout_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"dddddddddddd: no such variant.*allowed: ids"):
        force_variants(FakeLib(), ["dddddddddddd"])
    with pytest.raises(ValueError, match=r"bbbbbbbbbbbb and cccccccccccc are both v_first; allowed: one per"):
        force_variants(FakeLib(), ["bbbbbbbbbbbb", "cccccccccccc"])


def test_shapes_named_and_custom_decode_sizes() -> None:
    assert br.resolve_shapes(None) == br.SHAPES
    got = br.resolve_shapes(["N128T4", "M1", "D2", "N512T1h", "N128T4"])
    assert [(s.id, s.kind, s.N, s.T, s.state) for s in got] == [
        ("D2", "decode", 64, 1, "fp32"), ("M1", "decode", 64, 4, "fp32"),
        ("N128T4", "decode", 128, 4, "fp32"), ("N512T1h", "decode", 512, 1, "bf16")]
    assert br.call_bytes(got[2], 128, 128)["state"] == 2 * br.call_bytes(got[1], 128, 128)["state"]
    with pytest.raises(ValueError, match="at least 1"):
        br.resolve_shapes(["N0T1"])
    for bad in ("D9", "N64", "n64t1", "N64T1x", "B2T64H4"):
        with pytest.raises(ValueError, match=r"unknown shape .*N<sequences>T<tokens>\[h\]"):
            br.resolve_shapes([bad])


def test_an_unknown_shape_fails_the_run_before_any_gpu_work(tmp_path, capsys) -> None:
    # a typo used to select nothing and run only the correctness check; now it is refused, with the allowed forms
    rc = br.run(tmp_path / "out", None, None, ["D2", "D9"], True, False, ["recurrent"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("kda2: error: --shapes: unknown shape 'D9'") and "M1" in err
    assert "N<sequences>T<tokens>[h]" in err and not (tmp_path / "out").exists()


def test_the_readme_table_states_the_timing_floor_of_its_run() -> None:
    from kda2.bench.report import readme_table

    row = dict(id="D2", kind="decode", N=64, T=1, H=32, layout="v_first", impl="kda2", ms_median=0.0714,
               pct_copy=89.1, graph_us=70.6, wall_us=68.9, wall_prepared_us=68.0)
    result = {"device": {"name": "NVIDIA H200"}, "copy": {"TBps": 4.26}, "rows": [row],
              "fla": {"available": False, "error": "disabled with --no-fla"}}
    assert "timing's own" not in readme_table(result)          # a result from before the floor was measured
    result["timing"] = {"floor_us": 3.904}
    text = readme_table(result)
    assert "includes the timing's own 3.9 µs" in text and "| D2 N=64 T=1 v_first | 71.4 |" in text
