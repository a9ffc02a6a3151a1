"""Shared-memory sizes of the `chunk` family's two kernels: one formula, used by the planner's budget
agent (with the strides the TIR pass is expected to pick) and by the TIR stage (with the strides it
picked). The kernel template (templates/chunk.cu.j2) lays its shared memory out by the same formulas.

Row strides are in elements (bf16 or fp32 as noted), padded so the tensor-core fragment loads are
free of bank conflicts (see kda2.tir.chunk):

    prep kernel:  3 bf16 tiles [64][lds_kv], gamma fp32 [64][lds_g], T fp32 [64][lds_t], 64 floats
    state kernel: per stage: w, qg, kg bf16 [64][K] and Aqk bf16 [64][64] (unpadded: whole-tile
                  copies of workspace tiles, XOR-swizzled where the TIR stage says so), K floats (the chunk's last gate row), u^T
                  bf16 [block_v][lds_u]; then per warp (two warps
                  per 16 value columns, one per half of K) an fp32 exchange tile of 12 x 32 float4
                  (its partial sums for the partner) and a bf16 o staging tile [32][lds_o]; then one
                  16-byte mbarrier slot per stage (wgmma state: the stages hold the tiles only, at 1024-byte
                  boundaries, then one u^T slice for all stages and the mbarrier slots)
"""
from __future__ import annotations

import math
from typing import Mapping

from kda2.artifact.abi import CHUNK as ABI_CHUNK

CHUNK = ABI_CHUNK      # tokens per chunk: the workspace layout's (kda2/artifact/abi.py), the only one built
PREP_THREADS = 256     # threads of the prep kernel: two warps per 16-row sub-chunk, at every K
#: The most elements the TIR stage's bank pass appends to a row (kda2.tir.bankpass): the planner's budget
#: estimate before the TIR stage has run sizes every padded tile with it (an upper bound, not a choice).
MAX_ROW_PAD = 16
XCH_BYTES = 12 * 32 * 16  # per-warp exchange tile of the state kernel (8 + 4 float4 per lane)
# The exact split's combine kernel (docs/DESIGN.md §1): two threads per key row, COMBINE_COLS value columns
# per CTA (static shared memory: one fp32 [K][COMBINE_COLS] start-state slice). Its segments run one after another,
# so a CTA's step is the split's serial part and few heads leave most SMs idle: 8 columns (V / 8 CTAs a head, the
# fewest a thread's 16-byte accesses allow) against 32 made F1–F4 9–21 % faster, the combine of F4 137 → 75 µs
# (H200, experiments/2026-12-04-kernels, call 2).
COMBINE_COLS = 8
# The library's own split choice (docs/DESIGN.md §1 exact split): split_segments below, which library.cpp.j2
# choose_split mirrors. A split into s segments walks 2·nch/s chunk steps in sequence (fold, then emission) and the
# combine chains the s segments one after another, a segment's combine step costing about SPLIT_SEGMENT_STEPS chain
# steps, so the walk is shortest near s = sqrt(2·nch / SPLIT_SEGMENT_STEPS). The fold's CTAs ((K + V) / block_v a
# chain and segment) may spill past one wave of the state kernel by less than one segment's worth; when they do, a
# segment keeps SPLIT_SPILL_MIN_CHUNKS chunks or the split falls back to what one wave holds. Fewest chunks a
# segment keeps: SPLIT_MIN_CHUNKS. Fewest segments: at s = 2 fold + emission walk as many steps as no split. Fitted
# on the H200 to forced splits 1-16 of 80 few-chain shapes (T 2048-16384, 1-16 chains, K = V = 128; softplus;
# experiments/2026-12-04-splitrule, call 1): the choice is within 0.3 % of each shape's fastest split on average,
# at most 3.7 % off, and one shape 3.6 % slower than unsplit (T3072 H10), where the rule before (one wave, segments
# of >= 32 chunks) was 10 % off on average and up to 49 % (T5120 H1 unsplit: 0.117 ms, split 5 0.078); on 62 more
# shapes (call 2) 0.8 % off on average, one 7.6 % slower than unsplit (T2560 H9). The fold's extra work per chunk
# grows as K², so at K = 64 shorter segments pay: on 105 few-chain K = 64 shapes (T 2048-32768, 1-32 heads; the
# routed warpgroup-MMA pass, H200, bench/results/h200-2026-12-05-k64/call3/grid64_new.json) 12 chunks left T = 2048
# unsplit where 4 segments were 19-45 % faster, 4.8 % off the fastest on average; 8 chunks (the choice's time being
# the forced split's in the same grid) 2.8 %, at most 10.5 %, one shape slower than unsplit either way. K = 256
# (76 shapes, call1/grid256.json) kept at 12: 8 moved the mean 2.5 → 2.0 % but left two shapes slower than unsplit.
SPLIT_MIN_CHUNKS = {64: 8, 128: 12, 256: 12}
SPLIT_SPILL_MIN_CHUNKS = 24
SPLIT_SEGMENT_STEPS = 4
SPLIT_MIN_SEGMENTS = 3
SPLIT_MAX_SEGMENTS = 16
# Fewest chunks per sequence from which the library overlaps the state pass with the prep by default (docs/DESIGN.md
# §1 overlap). Measured on the H200 (bench/results/h200-2026-12-01-prep3/call4, same variant overlapped or not): at
# 16-32 chunks no gain or up to 15 % slower (the ready region's memset and the dependent launch), at 256 and 1024
# chunks 15-19 % faster.
OVERLAP_MIN_CHUNKS = 128
# Each state CTA beside the prep takes an SM's second prep slot, so by default the state CTAs hold at most
# 1 / OVERLAP_SM_SHARE of the SMs (the prep keeps at least 3/4 of its slots; library.cpp.j2 choose_overlap).
OVERLAP_SM_SHARE = 2
# Shorter sequences overlap where there are many chains (sequences × heads): (chains at least this % of the SMs, from
# this many chunks) in OVERLAP_SHORT, within the state CTAs' share above. The more chains, the more prep per chunk the
# overlap hides behind the chains' walk, and the fewer chunks pay for its fixed cost (the ready region's memset, each
# chain's wait for its first items); the state CTAs' share is what it costs the prep. Measured on the H200 (132 SMs,
# softplus, split 1, experiments/2026-12-04-overlap calls 1-6, overlapped vs plain) at K = V = 128, where the few-chain
# rows run 2 state CTAs a chain (block_v 64): 30-32 chains 4-7 % faster at 32-48 chunks, 10-12 % at 64-96; 28-29
# chains 1-3 % at 32-48 chunks; 26 chains 3 % at 64 chunks; 24 chains 2-3 % at 64-96 chunks, 2-6 % slower at 32-48;
# 22 chains 3 % slower at 64 chunks, even at 96; <= 16 chains 5-17 % slower below 128 chunks (2026-12-04-splitrule
# call 12); 40 chains (80 CTAs) -7 ... +2 %; >= 48 chains (96+ CTAs) 5-25 % slower. At K = 64 (4 CTAs a chain) 16
# chains lose 10-16 % at 32-64 chunks; at K = 256 (4-8) the overlap moves 6-16 chains by under 1 %.
OVERLAP_SHORT = ((18, 64), (20, 32))


def split_min_chunks(k: int) -> int:
    """Fewest chunks a segment of the library's own split keeps at head dim K (SPLIT_MIN_CHUNKS)."""
    if k not in SPLIT_MIN_CHUNKS:
        raise ValueError(f"no split rule for K={k}; fitted for K in {sorted(SPLIT_MIN_CHUNKS)}")
    return SPLIT_MIN_CHUNKS[k]


def split_segments(fold_ctas: int, wave: int, chunks: int, k: int, cap: int = SPLIT_MAX_SEGMENTS) -> int:
    """Segments of the library's own split of a call (1: unsplit): fold_ctas, the fold pass's CTAs per segment (chains
    × (K + V) / block_v); wave, the state kernel's CTAs one wave holds on the device; chunks, the longest sequence's;
    k, the head dim; cap, the dispatch row's bound. The same arithmetic as library.cpp.j2 choose_split
    (tests/gpu/test_chunk_split_gpu.py compares them on the GPU)."""
    if fold_ctas <= 0 or wave <= 0:
        return 1
    s = min(-(-wave // fold_ctas), math.isqrt(2 * chunks // SPLIT_SEGMENT_STEPS), chunks // split_min_chunks(k),
            SPLIT_MAX_SEGMENTS, cap)
    if fold_ctas * s > wave and chunks // s < SPLIT_SPILL_MIN_CHUNKS:
        s = min(s, wave // fold_ctas)
    return s if s >= SPLIT_MIN_SEGMENTS else 1


def expected_strides(k: int) -> dict[str, int]:
    """Upper bounds of the strides the TIR stage can pick (every padded tile at its natural row length plus
    MAX_ROW_PAD): the planner's budget estimate; the TIR stage sizes with what the pass really chose."""
    natural = {"lds_kv": k, "lds_u": CHUNK, "lds_g": k, "lds_t": CHUNK, "lds_t16": CHUNK, "lds_o": 16, "lds_y": 8,
               "lds_x": COMBINE_COLS}
    return {key: n + MAX_ROW_PAD for key, n in natural.items()}


def combine_shape(k: int) -> dict[str, int]:
    """Block size and value columns per CTA of the split's combine kernel at key dim k (kda2/chunk.cuh)."""
    return {"threads": 2 * k, "cols": COMBINE_COLS}


#: How the state kernel runs its products (the `state_mma` knob): "mma_sync", warps in pairs splitting K, each pair
#: 16 value columns (sm_80 and sm_90a); "wgmma", one warpgroup per 64 value columns holding Sᵀ over all of K in
#: warpgroup-MMA accumulators (sm_90a only; kda2/chunk.cuh state_wg).
STATE_MMAS = ("mma_sync", "wgmma")
#: Value columns of one wgmma state warpgroup (the M of m64nNk16).
WG_COLS = 64
#: Shared-memory alignment of a wgmma variant's stage: the 128-byte-swizzled tiles it reads by descriptor sit at
#: 1024-byte boundaries (kda2/wgmma.cuh).
WG_ALIGN = 1024


def state_warps(block_v: int, mma: str = "mma_sync") -> int:
    """mma_sync: two warps per 16 value columns (each holds half of K); wgmma: a warpgroup per 64."""
    return 4 * (block_v // WG_COLS) if mma == "wgmma" else 2 * (block_v // 16)


def state_threads(block_v: int, mma: str = "mma_sync") -> int:
    return 32 * state_warps(block_v, mma)


def prep_smem_bytes(s: Mapping[str, int]) -> int:
    return 3 * CHUNK * s["lds_kv"] * 2 + CHUNK * s["lds_g"] * 4 + CHUNK * s["lds_t"] * 4 + CHUNK * 4


#: A tensor copy's box: at most 256 elements a dimension, its rows a multiple of 16 bytes (PTX cp.async.bulk.tensor).
TMA_BOX_MAX, TMA_ROW_ALIGN = 256, 16


def prep_tma(arch: str, s: Mapping[str, int]) -> bool:
    """Whether the prep's q, k, v and fp32 raw-gate tiles land by one tensor copy each (chunk.cuh step 1, sm_90):
    a padded shared row (LDS_KV 16-bit or LDS_G fp32 elements) is one box row, whose columns past K lie outside the
    tensor and land as zeros — so each stride must fit a box row (K = 256's 264 do not: its prep copies by cp.async)."""
    from kda2.plan.hardware import BULK_ARCHS
    return arch in BULK_ARCHS and all(
        s[key] <= TMA_BOX_MAX and s[key] * size % TMA_ROW_ALIGN == 0 for key, size in (("lds_kv", 2), ("lds_g", 4)))


def state_smem_bytes(s: Mapping[str, int], *, k: int, block_v: int, stages: int, mma: str = "mma_sync") -> int:
    # w, qg, kg and Aqk unpadded (XOR-swizzled in the workspace, copied linearly), uᵀ padded
    tiles = 3 * CHUNK * k * 2 + CHUNK * CHUNK * 2 + k * 4
    u_slice = block_v * s["lds_u"] * 2
    if mma == "wgmma":
        # stages of the tiles at 1024-byte boundaries (the last one unpadded), then one uᵀ slice for all stages; no
        # exchange tiles (the warpgroup MMA sums over all of K) and no o tiles (o is staged in the consumed stage's
        # w tile); one mbarrier slot (16 B) per stage. (A two-stage 64-column pass, 125472 B at K = 128, then fits
        # on an H100 / H200 SM beside the prep's 105728 B: docs/DESIGN.md §1, the overlap.)
        return (stages - 1) * (-(-tiles // WG_ALIGN) * WG_ALIGN) + tiles + u_slice + 16 * stages
    per_stage = tiles + u_slice
    # + one mbarrier slot (16 B) per stage: sm_90 multicast loads complete on it
    return stages * per_stage + state_warps(block_v) * (XCH_BYTES + CHUNK // 2 * s["lds_o"] * 2) + 16 * stages


# ---- the fused 16-token kernel (kda2/fused.cuh Fused16; docs/DESIGN.md §1, "the fused twin") ----------------------
#: Its block (two warpgroups: the producer phases on all 8 warps, then each warpgroup consumes 64 value rows) and the
#: CTAs an SM its launch bounds ask for (128 registers a thread).
FUSED_THREADS, FUSED_CTAS_PER_SM = 256, 2
#: Tokens a step of its chain (the chunk it factors at once).
FUSED_STEP = 16
#: The library runs a twin's unsplit varlen call on the fused kernel only while its longest sequence is at most this
#: percentage of the mean (max_seqlen · N ≤ FUSED_MAX_IMBALANCE_PCT / 100 · total tokens); else on its two kernels. A
#: fused chain lasts as long as its own sequence, so SMs whose chains end early idle while the longest runs, where the
#: two kernels' prep is parallel over chunks. Measured through the library (H100, experiments/2026-12-05-twin call 4):
#: P3 (uniform) 0.54 ms fused against 0.73 on two kernels, P4 (271–3063 tokens, longest 2.24× the mean) 0.82 against
#: 0.77. Between those two points, 150 % is a judgement, not a measurement.
FUSED_MAX_IMBALANCE_PCT = 150


def fused_takes(max_seqlen: int, n: int, total: int, *, varlen: bool, split: int = 1) -> bool:
    """Whether a fused twin runs a call on its fused kernel (templates/library.cpp.j2 fused_takes, the same rule):
    unsplit, sequences within 32 bits, and varlen batches no more uneven than FUSED_MAX_IMBALANCE_PCT allows."""
    if split > 1 or max_seqlen > 0x7FFFFFFF:
        return False
    return not varlen or max_seqlen * n * 100 <= FUSED_MAX_IMBALANCE_PCT * total


def fused_smem_bytes(k: int) -> int:
    """Dynamic shared memory of the fused kernel at K = V = k, its header's layout (Fused16::SMEM_BYTES, which the
    rendered variant asserts equal): the factor tiles (k 2^Γ, qg, kg 16-bit; Aqk, T̃; 2^Γ15) at a 1024-byte boundary,
    two buffers of q, k (rows of K + 8), the fp32 raw gate (rows of K + 8) and β, a ring of three v tiles, the
    producer's partial sums (8 warps × 2 × 16 × 16 fp32), A (rows of 20 fp32), the channel mask and 16 B a channel."""
    c, row = FUSED_STEP, k + 8
    factors = -(-(3 * c * k * 2 + 2 * c * 64 * 2 + k * 4) // 1024) * 1024
    raw = -(-(2 * c * row * 2 + c * row * 4 + c * 4) // 128) * 128
    return (factors + 2 * raw + 3 * c * row * 2 + (FUSED_THREADS // 32) * 2 * c * c * 4
            + -(-(c * (c + 4) * 4) // 128) * 128 + 128 + k * 16)
