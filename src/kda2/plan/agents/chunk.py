"""Agents that design `chunk` variants: chunkwise-parallel tensor-core prefill (templates/chunk.cu.j2).

Two kernels per variant. The prep kernel is parallel over every (chunk, head, sequence): gates,
in-chunk cumulative gate Γ, the WY/UT terms w, u and the masked Aqk, written to a workspace. The
state kernel then walks the chunks of one (sequence, head, V-slice) in order, the only serial chain
of the algorithm (docs/DESIGN.md §1): per chunk it loads w, qg, kg, Aqk and u^T of its slice (bulk copies
on sm_90, cp.async on sm_80, `stages` deep) and runs the state update and the output on tensor cores. What the agents choose:
how wide a V-slice one state CTA owns (block_v), how deep its load pipeline is (stages), and (sm_90a) whether its
products run on mma.sync or on warpgroup MMAs (state_mma), and whether the prep's w / u do (prep_wu); and (sm_90a,
K = V = 128) fused twins of the first unpruned candidate of each layout and state_mma (fused).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from kda2.plan.agents import Candidate
from kda2.plan.agents.layout import LayoutAgent
from kda2.plan.model import estimate_resources, occupancy, prune_reason, workloads
from kda2.spec.knobs import FUSED_HEAD_DIM, knob
from kda2.plan.smem import (CHUNK, FUSED_CTAS_PER_SM, FUSED_STEP, FUSED_THREADS, PREP_THREADS, SPLIT_MAX_SEGMENTS,
                             SPLIT_MIN_SEGMENTS, SPLIT_SEGMENT_STEPS, expected_strides, fused_smem_bytes,
                             prep_smem_bytes, split_min_chunks, split_segments, state_smem_bytes, state_threads)


class ChunkSizeAgent:
    name = "chunk"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        why = (f"chunk {CHUNK}: FLA's chunk size (four 16-row MMA tiles); every exponent the kernels take is <= 0 "
               "(exp(Γ_i - Γ_j) for j <= i, exp(Γ_last - Γ), never exp(-Γ)), so the unbounded softplus gate "
               "needs no lower bound")
        return [c.extend(self.name, why, chunk=CHUNK) for c in cands]


class TileAgent:
    """Orders V-slice widths by how the bucket's serial chains fill this GPU (profile: SM count, smem per SM).

    The state pass is a serial chain per (sequence, head, V-slice) (DESIGN §1). When the narrowest slice's
    chains at the bucket's routing workload (kda2.plan.model.workloads) fit in one wave of resident CTAs
    (SMs x CTAs per SM, from the state kernel's shared memory), narrower slices put more chains in flight
    at no wave cost: narrow first. Otherwise every width needs several waves, and wide slices read the
    shared w / qg / kg / Aqk tiles of a chunk fewer times: wide first. So one bucket can rank differently
    on a 132-SM H200 and a 108-SM A100 (128 chains of block_v 32 at N=1, H=32: one wave vs two).
    """
    name = "tile"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        v = spec.head_dims.v
        w = workloads("chunk", bucket)[0]
        widths = sorted(bv for bv in spec.agents.chunk.block_v if bv <= v and v % bv == 0)
        stages = min(spec.agents.chunk.stages)  # the least smem a width can have: its best occupancy
        out = []
        for c in cands:
            def fill(bv: int) -> tuple[int, int]:
                cfg = {**c.config, "block_v": bv, "stages": stages}
                per_sm = max(occupancy(estimate_resources(cfg), hw).ctas_per_sm, 1)
                return w.N * w.H * (v // bv), hw.sm_count * per_sm

            if not widths:
                continue
            n_narrow, slots_narrow = fill(widths[0])
            narrow_first = n_narrow <= slots_narrow
            order = widths if narrow_first else sorted(widths, reverse=True)
            for i, bv in enumerate(order):
                n, slots = fill(bv)
                why = (f"T<={bucket} (judged at N={w.N} T={w.T} H={w.H}): block_v={bv} -> {bv // 8} warps (a pair "
                       f"per 16-column MMA slice, one per half of K), {v // bv} state CTAs per (sequence, head), "
                       f"{n} serial chains on {slots} resident slots ({hw.cite('sm_count', 'smem_per_sm_bytes')}); ")
                why += (f"block_v={widths[0]}'s {n_narrow} chains fit one wave of {slots_narrow}: narrow slices "
                        "first (more chains in flight, no extra wave)" if narrow_first else
                        f"block_v={widths[0]}'s {n_narrow} chains need {-(-n_narrow // slots_narrow)} waves of "
                        f"{slots_narrow}: wide slices first (fewer reads of the shared chunk tiles)")
                if i:
                    why += f" (ranked after block_v={order[0]})"
                out.append(c.extend(self.name, why, block_v=bv))
        return out


class StagesAgent:
    name = "stages"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        allowed = spec.agents.chunk.stages
        why = {2: "2 stages: loads of the next chunk's w / qg / kg / Aqk / u tiles (bulk copies on sm_90, cp.async "
                  "on sm_80) overlap this chunk's MMAs",
               1: "1 stage: no prefetch (half the shared memory; the loads sit on the serial chain)"}
        return [c.extend(self.name, why[s], stages=s) for c in cands for s in sorted(allowed, reverse=True)]


class StateMmaAgent:
    """mma_sync candidates as the other agents made them, then (where the spec asks for wgmma and the arch has it)
    their warpgroup-MMA twins: Sᵀ over all of K in one warpgroup's accumulators per 64 value columns, so no
    partial sums cross warps and a V-slice of 128 reads each chunk's shared tiles once (kda2/chunk.cuh state_wg).
    The twins come after: the tuner measures them against the established kernels (issue 12's fused pass starts
    from this one)."""
    name = "state_mma"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        from kda2.plan.smem import WG_COLS

        allowed = spec.agents.chunk.state_mma
        out = [c.extend(self.name, "mma_sync: warps in pairs splitting K, 16 value columns per pair")
               for c in cands] if "mma_sync" in allowed else []
        if "wgmma" not in allowed:
            return out
        if hw.arch != "sm_90a":  # warpgroup MMAs are sm_90a's own instructions (not sm_80's, nor sm_100's)
            return out
        seen = set()
        for c in cands:
            cfg = c.config
            if cfg["k"] > 128 or cfg["block_v"] % WG_COLS:  # Sᵀ in one m64nK accumulator; a warpgroup per 64 columns
                continue
            # the twin at this width, and one at the whole V: a CTA per (sequence, head) reads each chunk's shared
            # tiles once (its warpgroups share them), where mma_sync's 16-warp CTA would not fit
            for bv in sorted({cfg["block_v"], cfg["v"]}):
                key = (cfg["state_layout"], bv, cfg["stages"])
                if key in seen:
                    continue
                seen.add(key)
                out.append(c.extend(self.name, f"wgmma ({hw.cite('arch')}): {bv // WG_COLS} warpgroup(s) of {WG_COLS} "
                                               f"value columns, Sᵀ over all K = {cfg['k']} in m64n{cfg['k']} "
                                               "accumulators; ranked after the mma_sync candidates",
                                    state_mma="wgmma", block_v=bv))
        return out


class PrepWuAgent:
    """How the prep makes w and u: every candidate as it is (T by block levels, then mma.sync products), then (where the
    spec asks for bfs and the arch is sm_90a) its twin solving them by blocked substitution on warpgroup MMAs, one
    warpgroup each (kda2/chunk.cuh prep_wu_bfs): two CTA barriers fewer, and T diag β never rounded to 16 bits as a
    whole (o's error 3 % lower on average, experiments/2026-12-05-prep-numerics). The twins come after: on an H100
    they were 1–3 % faster at K = 128 and 0–2 % slower at K = 256 with the same untuned routes; the tuner decides."""
    name = "prep_wu"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        allowed = spec.agents.chunk.prep_wu
        out = [c.extend(self.name, "levels: T = (I + A)^-1 by two block levels, w and u by mma.sync products")
               for c in cands] if "levels" in allowed else []
        if "bfs" not in allowed or hw.arch != "sm_90a":   # warpgroup MMAs are sm_90a's own
            return out
        return out + [c.extend(self.name, f"bfs ({hw.cite('arch')}): w and u by blocked substitution over the four "
                                          "sub-chunks, one warpgroup each (16-bit K' products on wgmma, the diagonal "
                                          "product in tf32); ranked after the levels candidates",
                               prep_wu="bfs") for c in cands]


class BudgetAgent:
    """Drops candidates whose shared memory exceeds the arch (or spec) limit, keeps the best `max_candidates`."""
    name = "budget"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        b = spec.budget
        arch_limit = hw.smem_per_block_bytes
        limit = min(arch_limit, b.max_smem_bytes)
        which = hw.cite("smem_per_block_bytes") if arch_limit <= b.max_smem_bytes else "spec budget"
        kept: dict[str, list[Candidate]] = {}
        for c in cands:
            cfg = c.config
            strides = expected_strides(cfg["k"])
            prep = prep_smem_bytes(strides)
            mma = knob(cfg, "state_mma")
            state = state_smem_bytes(strides, k=cfg["k"], block_v=cfg["block_v"], stages=cfg["stages"], mma=mma)
            if max(prep, state) > limit:
                continue
            occ = occupancy(estimate_resources(cfg), hw)
            group = kept.setdefault((cfg["state_layout"], mma, knob(cfg, "prep_wu")), [])
            if len(group) < b.max_candidates:
                group.append(c.extend(self.name, f"~{prep} B smem prep ({PREP_THREADS} threads), ~{state} B smem "
                                      f"state ({state_threads(cfg['block_v'], mma)} threads, {occ.ctas_per_sm} CTA/SM, "
                                      f"limited by {occ.limiter}); limit {limit} B ({which}); "
                                      f"rank {len(group) + 1} of max {b.max_candidates}"))
        return [c for group in kept.values() for c in group]


class FusedAgent:
    """Where the spec asks for it (agents.chunk.fused), on sm_90a at K = V = 128: after the budget, a fused twin of the
    first candidate of each (state layout, state_mma) the tuner would not prune — the same two kernels, plus the fused
    16-token kernel (kda2/fused.cuh), which runs the twin's unsplit calls in one pass with no workspace
    (docs/DESIGN.md §1, "the fused twin"); uneven varlen and split calls run on the two kernels. The twins come after:
    the fused kernel wins where the chains about fill its two CTAs an SM (P3 on the H200: 0.54 ms against the library's
    0.64) and loses where they are fewer or spill into a second wave (K10: 0.39 against 0.33, P4 0.82 against 0.70;
    experiments/2026-12-05-fused call 27), so the tuner routes them per batch class."""
    name = "fused"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        out = list(cands)
        if True not in spec.agents.chunk.fused or hw.arch != "sm_90a":   # warpgroup MMAs are sm_90a's own
            return out
        limit = min(hw.smem_per_block_bytes, spec.budget.max_smem_bytes)
        firsts: dict[tuple[str, str], Candidate] = {}
        for c in cands:
            cfg = c.config
            # a base the tuner would prune (kda2.plan.model prune_reason: e.g. 2 warps an SM) would take its twin with it
            if cfg["k"] == cfg["v"] == FUSED_HEAD_DIM and fused_smem_bytes(cfg["k"]) <= limit and \
                    prune_reason(cfg, estimate_resources(cfg), hw, spec.budget) is None:
                firsts.setdefault((cfg["state_layout"], knob(cfg, "state_mma")), c)
        return out + [c.extend(self.name, f"fused twin ({hw.cite('arch')}): this candidate's two kernels for split "
                                          f"calls, and for unsplit ones the fused {FUSED_STEP}-token kernel "
                                          f"({FUSED_THREADS} threads, {fused_smem_bytes(c.config['k'])} B smem, "
                                          f"{FUSED_CTAS_PER_SM} CTAs/SM, no workspace); ranked after the others",
                               fused=True) for c in firsts.values()]


def row_split(cfg: Mapping[str, Any], hw: Any, bucket: int, min_chains: int) -> tuple[int, str]:
    """The split knob of one dispatch row (docs/DESIGN.md §1 exact split): the most segments the library's own choice
    (kda2.plan.smem split_segments, which templates/library.cpp.j2 choose_split mirrors) may cut a sequence of the
    row's calls into; 1 keeps them unsplit unless the caller asks. Judged where the row leaves the most SMs idle — its
    fewest chains (min_chains, at least one) at the bucket's longest length — by that rule, with this profile's SMs
    and the routed variant's state CTAs per SM. Calls with more chains or shorter sequences get as many segments or
    fewer from the same rule; `kda2 tune` times the row's winner split this way and unsplit at this workload and keeps
    the faster (tuning/<spec>.<profile>.json)."""
    chains, nch = max(min_chains, 1), bucket // CHUNK
    per_sm = max(occupancy(estimate_resources(dict(cfg)), hw).ctas_per_sm, 1)
    wave, fold = hw.sm_count * per_sm, chains * (cfg["k"] + cfg["v"]) // cfg["block_v"]
    s, min_chunks = split_segments(fold, wave, nch, cfg["k"]), split_min_chunks(cfg["k"])
    judged = (f"judged at {chains} chain(s) of T={bucket} ({nch} chunks): the fold's {fold} CTAs per segment against "
              f"a wave of {wave} ({per_sm} state CTA(s)/SM, {hw.cite('sm_count')})")
    if s == 1:
        return 1, (f"unsplit: {judged} leave room for fewer than {SPLIT_MIN_SEGMENTS} segments (of >= "
                   f"{min_chunks} chunks at K={cfg['k']}; fold + emission walk 2·chunks/s steps)")
    return s, (f"up to {s} segments: {judged}, about sqrt(2·chunks/{SPLIT_SEGMENT_STEPS}), segments of >= "
               f"{min_chunks} chunks at K={cfg['k']}, at most {SPLIT_MAX_SEGMENTS}")


CHUNK_AGENTS = (
    LayoutAgent(k_first="states [N,HV,K,V]: FLA's default layout; the state kernel reads/writes its [K, block_v] "
                        "slice as K rows of block_v*4 contiguous bytes",
                v_first="states [N,HV,V,K]: the layout FLA's KDA layer keeps (state_v_first=True); the "
                        "state kernel's V-slice is block_v rows of K*4 contiguous bytes"),
    ChunkSizeAgent(), TileAgent(), StagesAgent(), StateMmaAgent(), PrepWuAgent(), BudgetAgent(), FusedAgent())
