"""The library's default overlap below OVERLAP_MIN_CHUNKS (kda2.plan.smem OVERLAP_SHORT, rendered into
templates/library.cpp.j2 choose_overlap): its tiers (chains as a share of the SMs, fewest chunks) must lie inside the
state CTAs' share the default allows at all (a chain has at least one state CTA), and more chains must never need more
chunks (experiments/2026-12-04-overlap: the prep the overlap hides per chunk grows with the chains)."""
from __future__ import annotations

from kda2.plan.smem import OVERLAP_MIN_CHUNKS, OVERLAP_SHORT, OVERLAP_SM_SHARE


def test_tiers_lie_inside_the_default_share_and_below_its_length():
    assert OVERLAP_SHORT, "no short-sequence tier"
    for percent, chunks in OVERLAP_SHORT:
        assert 0 < percent <= 100 // OVERLAP_SM_SHARE, (percent, chunks)
        assert 0 < chunks < OVERLAP_MIN_CHUNKS, (percent, chunks)


def test_a_larger_share_never_needs_more_chunks():
    tiers = sorted(OVERLAP_SHORT)
    assert all(a[1] > b[1] for a, b in zip(tiers, tiers[1:])), tiers
    assert len({p for p, _ in tiers}) == len(tiers), tiers
