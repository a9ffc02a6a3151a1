"""`kda2 bench recurrent --variant`: the forced-variant dispatch a same-run A/B of a candidate uses (no GPU)."""
from __future__ import annotations

import ctypes

import pytest

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
