"""The library's own split choice (kda2.plan.smem split_segments; templates/library.cpp.j2 choose_split mirrors it,
tests/gpu/test_chunk_split_gpu.py compares the two on a GPU). The cases are the H200's: a wave of 132 state CTAs
(one a SM) and 4 fold CTAs a chain at K = V = 128, block_v 64 (experiments/2026-12-04-splitrule, call 1); at K = 64
the routed warpgroup-MMA pass, 3 state CTAs a SM and 2 fold CTAs a chain (bench/results/h200-2026-12-05-k64/call3)."""
from __future__ import annotations

import itertools

import pytest

from kda2.plan.smem import (SPLIT_MAX_SEGMENTS, SPLIT_MIN_CHUNKS, SPLIT_MIN_SEGMENTS, SPLIT_SPILL_MIN_CHUNKS,
                            split_min_chunks, split_segments)

WAVE, PER_CHAIN = 132, 4


@pytest.mark.parametrize("chains, chunks, fastest", [
    (1, 64, 5),     # T4096 H1: 0.0964 ms unsplit, 0.0709 at 5
    (8, 64, 4),     # T4096 H8 (cuDNN's K3): 0.1227 unsplit, 0.1064 at 4 (5 spills the fold: 0.1047)
    (1, 128, 8),    # T8192 H1: 0.2674 unsplit, 0.0943 at 8
    (12, 128, 3),   # T8192 H12: the fold's 144 CTAs spill past the wave, 43-chunk segments: 0.2901 -> 0.2306
    (16, 256, 3),   # T16384 H16: 0.5588 -> 0.4690
    (16, 48, 1),    # B4 T3072 H4: every split slower (0.1177 unsplit, 0.1277 at 3)
    (12, 48, 1),    # T3072 H12: a spilling fold with 16-chunk segments, 0.1095 -> 0.1138 at 3
    (16, 64, 1),    # B2 T4096 H8: 0.1527 unsplit, 0.1566 at 3
    (64, 32, 1),    # P3's chains fill the GPU
])
def test_the_rule_picks_a_measured_fast_split(chains, chunks, fastest):
    assert split_segments(chains * PER_CHAIN, WAVE, chunks, 128) == fastest


@pytest.mark.parametrize("chains, chunks, fastest", [
    (1, 32, 4),     # T2048 H1: 0.0539 ms unsplit, 0.0419 at 4 (K = 128's 12-chunk segments left it unsplit)
    (12, 32, 4),    # T2048 H12: 0.0865 unsplit, 0.0598 at 4
    (16, 64, 5),    # T4096 H16: 0.1564 unsplit, 0.108 at 5 (0.1071 at 6 and 8)
    (4, 128, 8),    # T8192 H4: 0.2412 unsplit, 0.0902 at 8 (0.0867 at 10)
])
def test_at_k64_shorter_segments_pay(chains, chunks, fastest):
    assert split_segments(chains * 2, 3 * 132, chunks, 64) == fastest


def test_no_device_or_no_work_never_splits():
    assert split_segments(4, 0, 1024, 128) == 1 and split_segments(0, 132, 1024, 128) == 1


def test_a_head_dim_without_a_fitted_rule_is_refused():
    with pytest.raises(ValueError, match=r"no split rule for K=96; fitted for K in \[64, 128, 256\]"):
        split_segments(4, 132, 1024, 96)


def test_bounds_and_monotonicity_over_a_grid():
    """1 or SPLIT_MIN_SEGMENTS..SPLIT_MAX_SEGMENTS segments, each of >= SPLIT_MIN_CHUNKS chunks (>=
    SPLIT_SPILL_MIN_CHUNKS where the fold spills past the wave) and no more than the cap; more chains never more
    segments, longer sequences never fewer (what lets a dispatch row judge its calls at its fewest chains and its
    bucket's length)."""
    chains_set, chunk_set, waves = range(1, 80), range(1, 1100, 7), (16, 78, 132, 264)
    for k in sorted(SPLIT_MIN_CHUNKS):
        for wave, per_chain in itertools.product(waves, (2, 4, 8)):
            for chains, chunks in itertools.product(chains_set, chunk_set):
                fold = chains * per_chain
                s = split_segments(fold, wave, chunks, k)
                assert s == 1 or SPLIT_MIN_SEGMENTS <= s <= SPLIT_MAX_SEGMENTS, (fold, wave, chunks, s)
                if s > 1:
                    assert chunks // s >= (SPLIT_SPILL_MIN_CHUNKS if fold * s > wave else split_min_chunks(k))
                    assert fold * s < wave + fold   # spills by less than one segment's worth
                assert split_segments(fold + per_chain, wave, chunks, k) <= s, (fold, wave, chunks)
                assert split_segments(fold, wave, chunks + 7, k) >= s, (fold, wave, chunks)
                for cap in (1, 4, 8):
                    assert split_segments(fold, wave, chunks, k, cap) <= max(min(s, cap), 1)
