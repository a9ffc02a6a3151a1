"""Agents that design `recurrent` variants (see the kernel's design notes in recurrent.cu.j2).

Cost model in brief: a warp owns `v_per_warp` value columns and all K key rows, so per token it
reduces 2*v_per_warp + 3 values over 32 lanes (5 shuffle rounds), and holds K/32 * v_per_warp state
registers per lane. Decode (T = 1) is a pure state-bandwidth problem: what matters is bytes in flight
and coalescing. Longer sequences are a serial chain per (sequence, head, tile): what matters is the
latency of one token step, which grows with v_per_warp, while more, narrower tiles run in parallel.
"""
from __future__ import annotations

from typing import Any, Sequence

from kda2.plan.agents import Candidate
from kda2.plan.agents.layout import LayoutAgent

DECODE_MAX_T = 16  # buckets up to this length are treated as decode-like (bandwidth-bound)


class PipelineAgent:
    name = "pipeline"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        if bucket <= 1:
            why = ("T<=1: decode-only kernel, one token per sequence: no next-token prefetch (its registers and "
                   "branches buy nothing)")
        else:
            why = (f"T<={bucket}: prefetch token t+1's q/k/g/v/beta while token t updates the state (the per-token "
                   "chain is latency-bound)")
        inter = bucket <= DECODE_MAX_T
        why += ("; per-token states compiled in (multi-token decode keeps them for speculative rollback)" if inter
                else "; no per-token states (they cost ~18 registers in the prefill kernels, sm_90a, 2026-11-30)")
        states = ["fp32", "bf16"] if inter and getattr(spec.features, "bf16_decode_state", False) else ["fp32"]
        if len(states) > 1:
            why += "; bf16-state entries too (features.bf16_decode_state: half the state bytes)"
        return [c.extend(self.name, why, prefetch=bucket > 1, intermediate=inter, state_dtypes=states) for c in cands]


class StagingAgent:
    name = "staging"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        out = []
        for c in cands:
            layout = c.config["state_layout"]
            allowed = getattr(spec.agents.staging, layout)
            if layout == "v_first":
                # Lanes span K, which is contiguous here: direct 16-B loads are already coalesced.
                if "direct" in allowed:
                    out.append(c.extend(self.name, "v_first: lanes span the contiguous K axis, so direct 16-B "
                                        "loads are coalesced; blocked key rows make them vectors",
                                        staging="direct", k_map="blocked"))
                continue
            decode = bucket <= DECODE_MAX_T
            options = []
            if "direct" in allowed:
                options.append(("direct", "all", "k_first, one value column per lane over all K rows: every state "
                                "load and store is a coalesced 128-B row segment and a CTA reads whole rows, with "
                                "no shared-memory transpose; reductions over K stay inside the lane"))
            if "smem" in allowed:
                options.append(("smem", "strided", "k_first: a warp's own columns are a 16-64 B strip per key row; "
                                "staging the CTA's [K, warps*v_per_warp] tile through shared memory makes the "
                                "global traffic whole row segments (bank conflicts handled by the TIR pass)"))
            if "direct" in allowed:
                options.append(("direct", "strided", "k_first direct with lanes over K: no shared memory or "
                                "barrier, at the price of strided 16-B state loads (kept as a tuning candidate)"))
            if not decode:  # per-token latency: the shuffle-reduced layouts first, all-K last
                options = options[1:] + options[:1] if options and options[0][1] == "all" else options
            for staging, k_map, why in options:
                if k_map == "all":  # its token loop has no prefetch pipeline: one kernel for every decode bucket
                    out.append(c.extend(self.name, why + " (no next-token prefetch in this loop)", staging=staging,
                                        k_map=k_map, prefetch=False))
                    continue
                out.append(c.extend(self.name, why, staging=staging, k_map=k_map))
        return out


class TileAgent:
    name = "tile"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        k, v = spec.head_dims.k, spec.head_dims.v
        decode = bucket <= DECODE_MAX_T
        # Wide tiles first everywhere: in decode they put more independent loads in flight per lane; in
        # prefill each warp loads and gates q/k/g once for all of its columns, which outweighs the longer
        # per-token reduction (kda2 tune, H200, 2026-11-29, T=256 N=8 H=32 v_first scatter: v_per_warp 8
        # 880 us, 16 885 us, 4 1480 us).
        vpws = sorted(spec.agents.tile.v_per_warp, reverse=True)
        out = []
        for c in cands:
            # k_map=all: a lane holds lane_cols adjacent columns (one 4/8/16-B vector per key row) of its
            # share of K, K*v_per_warp/32 state registers in all; more than 64 spilled at K=128 (255
            # registers + 200 B spills, sm_90a, 2026-11-29). Widest vectors first. The spec's v_per_warp
            # list is for the lanes-over-K layouts.
            if c.config["k_map"] == "all":
                shapes = [(vpw, cw) for vpw in (16, 8) for cw in (4, 2, 1)
                          if 32 % (vpw // cw) == 0 and (k // (32 // (vpw // cw))) % 4 == 0
                          and (k // (32 // (vpw // cw))) * cw <= 64]
            else:
                shapes = [(vpw, 1) for vpw in vpws]
            for vpw, cw in shapes:
                for warps in spec.agents.tile.warps:
                    bv = vpw * warps
                    if v % bv:
                        continue  # a CTA tile must divide V; other sizes are simply not candidates
                    if c.config["staging"] == "smem" and bv % 4:
                        continue
                    state_regs = (k // 32) * vpw
                    why = (f"T<={bucket}: " + ("bandwidth-bound decode, " if decode else "serial token chain, ")
                           + f"v_per_warp={vpw} -> {state_regs} state registers/lane; {warps} warps -> "
                           f"{v // bv} CTAs per head; ")
                    why += (f"{cw} adjacent column(s) per lane = {4 * cw}-B state vectors, sums over K in-lane"
                            if c.config["k_map"] == "all" else f"{2 * vpw + 3} values reduced over lanes per token")
                    out.append(c.extend(self.name, why, v_per_warp=vpw, warps=warps, lane_cols=cw))
        return out


class ReduceAgent:
    name = "reduce"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        out = []
        why = {"butterfly": "xor all-reduce: every lane ends with every sum (5 x (2*v_per_warp+3) shuffles), "
                            "no broadcast after it",
               "scatter": "reduce-scatter: each round halves what a lane carries (~2*v_per_warp + 15 "
                          "shuffles, then v_per_warp broadcasts); shortest per-token chain"}
        for c in cands:
            if c.config["k_map"] == "all":  # sums over K are in-lane: only three scalars cross lanes
                out.append(c.extend(self.name, "k_map=all sums over K inside each lane; the three q/k scalars "
                                    "use the xor all-reduce", reduce="butterfly"))
                continue
            for r in spec.agents.reduce:
                out.append(c.extend(self.name, why[r], reduce=r))
        return out


class BudgetAgent:
    """Drops candidates that cannot fit the budget, then keeps the best-ranked `max_candidates`."""
    name = "budget"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        b = spec.budget
        kept: dict[str, list[Candidate]] = {}
        for c in cands:
            cfg = c.config
            kpl = cfg["k"] // 32
            # State, reduction buffer, two tokens of inputs (current + prefetched), ~24 for addressing.
            if cfg["k_map"] == "all":  # state share, one token's q/k/g rows, ~30 for addressing
                est = cfg["k"] * cfg["v_per_warp"] // 32 + 3 * kpl + 30  # = RPL * lane_cols + ...
            else:  # state, reduction buffer, two tokens of inputs (current + prefetched), addressing
                est = kpl * cfg["v_per_warp"] + (2 * cfg["v_per_warp"] + 3) + 2 * (3 * kpl + cfg["v_per_warp"] + 1) + 24
            if est > b.max_registers:
                continue
            smem = (cfg["k"] * (cfg["warps"] * cfg["v_per_warp"] + 8) * 4 if cfg["staging"] == "smem"
                    else cfg["warps"] * 3 * (cfg["k"] + 4 * 32 // cfg["v_per_warp"]) * 4 if cfg["k_map"] == "all" else 0)
            if smem > b.max_smem_bytes:
                continue
            group = kept.setdefault(cfg["state_layout"], [])
            if len(group) < b.max_candidates:
                group.append(c.extend(self.name, f"~{est} registers (budget {b.max_registers}), "
                                      f"<= {smem} B smem (budget {b.max_smem_bytes}); rank {len(group) + 1} "
                                      f"of max {b.max_candidates}"))
        return [c for group in kept.values() for c in group]


RECURRENT_AGENTS = (
    LayoutAgent(k_first="states [N,HV,K,V]: FLA's default layout",
                v_first="states [N,HV,V,K]: the layout FLA's KDA layer keeps (state_v_first=True); "
                        "each value column is 512 contiguous bytes along K"),
    PipelineAgent(), StagingAgent(), TileAgent(), ReduceAgent(), BudgetAgent())
