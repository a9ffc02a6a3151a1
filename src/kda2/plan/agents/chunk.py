"""Agents that design `chunk` variants: chunkwise-parallel tensor-core prefill (templates/chunk.cu.j2).

Two kernels per variant. The prep kernel is parallel over every (chunk, head, sequence): gates,
in-chunk cumulative gate Γ, the WY/UT terms w, u and the masked Aqk, written to a workspace. The
state kernel then walks the chunks of one (sequence, head, V-slice) in order, the only serial chain
of the algorithm (docs/DESIGN.md §1): per chunk it loads w, qg, kg, Aqk and u^T of its slice (bulk copies
on sm_90, cp.async on sm_80, `stages` deep) and runs the state update and the output on tensor cores. What the agents choose:
how wide a V-slice one state CTA owns (block_v) and how deep its load pipeline is (stages).
"""
from __future__ import annotations

from typing import Any, Sequence

from kda2.plan.agents import Candidate
from kda2.plan.agents.layout import LayoutAgent
from kda2.plan.hardware import SMEM_PER_BLOCK_OPTIN as ARCH_SMEM_LIMIT
from kda2.plan.smem import (CHUNK, PREP_THREADS, expected_strides, prep_smem_bytes, state_smem_bytes,
                              state_threads)

#: Buckets from this length up are "few long chains": narrow V-slices first.
LONG_BUCKET = 16384



class ChunkSizeAgent:
    name = "chunk"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        why = (f"chunk {CHUNK}: FLA's chunk size (four 16-row MMA tiles); every exponent the kernels take is <= 0 "
               "(exp(Γ_i - Γ_j) for j <= i, exp(Γ_last - Γ), never exp(-Γ)), so the unbounded softplus gate "
               "needs no lower bound")
        return [c.extend(self.name, why, chunk=CHUNK) for c in cands]


class TileAgent:
    name = "tile"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        v = spec.head_dims.v
        long = bucket >= LONG_BUCKET
        rank = (32, 64, 16, 128) if long else (64, 32, 128, 16)
        widths = [bv for bv in rank if bv in spec.agents.chunk.block_v and bv <= v and v % bv == 0]
        out = []
        for c in cands:
            for bv in widths:
                ctas = v // bv
                why = (f"T<={bucket}: block_v={bv} -> {bv // 8} warps (a pair per 16-column MMA slice, one per half "
                       f"of K), {ctas} state "
                       f"CTAs per (sequence, head); ")
                if long:
                    why += ("few long sequences: the state pass is a serial chain per (sequence, head, V-slice), so "
                            "narrow slices put more chains in flight" + (
                                f" (32 heads x {ctas} = {32 * ctas} CTAs on 132 SMs)" if bv == 32 else
                                " (ranked after the narrower slice)"))
                else:
                    why += ("short or batched sequences already give many chains; wide slices read the shared "
                            "w / qg / kg / Aqk tiles of a chunk fewer times" + (
                                "" if bv == 64 else " (ranked after block_v=64)"))
                out.append(c.extend(self.name, why, block_v=bv))
        return out


class StagesAgent:
    name = "stages"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        allowed = spec.agents.chunk.stages
        why = {2: "2 stages: loads of the next chunk's w / qg / kg / Aqk / u tiles (bulk copies on sm_90, cp.async "
                  "on sm_80) overlap this chunk's MMAs",
               1: "1 stage: no prefetch (half the shared memory; the loads sit on the serial chain)"}
        return [c.extend(self.name, why[s], stages=s) for c in cands for s in sorted(allowed, reverse=True)]


class BudgetAgent:
    """Drops candidates whose shared memory exceeds the arch (or spec) limit, keeps the best `max_candidates`."""
    name = "budget"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        b = spec.budget
        arch_limit = ARCH_SMEM_LIMIT[arch]
        limit = min(arch_limit, b.max_smem_bytes)
        which = f"{arch} opt-in limit" if arch_limit <= b.max_smem_bytes else "spec budget"
        kept: dict[str, list[Candidate]] = {}
        for c in cands:
            cfg = c.config
            strides = expected_strides(cfg["k"])
            prep = prep_smem_bytes(strides)
            state = state_smem_bytes(strides, k=cfg["k"], block_v=cfg["block_v"], stages=cfg["stages"])
            if max(prep, state) > limit:
                continue
            group = kept.setdefault(cfg["state_layout"], [])
            if len(group) < b.max_candidates:
                group.append(c.extend(self.name, f"~{prep} B smem prep ({PREP_THREADS} threads), ~{state} B smem state "
                                      f"({state_threads(cfg['block_v'])} threads); limit {limit} B ({which}); "
                                      f"rank {len(group) + 1} of max {b.max_candidates}"))
        return [c for group in kept.values() for c in group]


CHUNK_AGENTS = (
    LayoutAgent(k_first="states [N,HV,K,V]: FLA's default layout; the state kernel reads/writes its [K, block_v] "
                        "slice as K rows of block_v*4 contiguous bytes",
                v_first="states [N,HV,V,K]: the layout FLA's KDA layer keeps (state_v_first=True); the "
                        "state kernel's V-slice is block_v rows of K*4 contiguous bytes"),
    ChunkSizeAgent(), TileAgent(), StagesAgent(), BudgetAgent())
