"""Agents that design `recurrent` variants (see the kernel's design notes in recurrent.cu.j2).

Cost model in brief: a warp owns `v_per_warp` value columns and all K key rows, so per token it
reduces 2*v_per_warp + 3 values over 32 lanes (5 shuffle rounds), and holds K/32 * v_per_warp state
registers per lane. Decode (T = 1) is a pure state-bandwidth problem: what matters is bytes in flight
and coalescing. Longer sequences are a serial chain per (sequence, head, tile): what matters is the
latency of one token step, which grows with v_per_warp, while more, narrower tiles run in parallel.
"""
from __future__ import annotations

from typing import Any, Sequence

from kda2.agents import Candidate

DECODE_MAX_T = 16  # buckets up to this length are treated as decode-like (bandwidth-bound)


class LayoutAgent:
    name = "layout"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        out = []
        for c in cands:
            for layout in spec.features.state_layouts:
                why = ("states [N,HV,K,V]: FLA's default layout" if layout == "k_first"
                       else "states [N,HV,V,K]: the layout FLA's KDA layer keeps (state_v_first=True); "
                            "each value column is 512 contiguous bytes along K")
                out.append(c.extend(self.name, why, state_layout=layout))
        return out


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
            for staging in ("smem", "direct"):  # preference order: smem first
                if staging not in allowed:
                    continue
                why = ("k_first: a warp's own columns are a 16-32 B strip per key row; staging the CTA's "
                       "[K, warps*v_per_warp] tile through shared memory makes the global traffic full "
                       "128-B rows (bank conflicts handled by the TIR pass)" if staging == "smem" else
                       "k_first direct: no shared memory or barrier, at the price of strided 16-B loads "
                       "(kept as a tuning candidate)")
                out.append(c.extend(self.name, why, staging=staging, k_map="strided"))
        return out


class TileAgent:
    name = "tile"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        k, v = spec.head_dims.k, spec.head_dims.v
        decode = bucket <= DECODE_MAX_T
        # Decode prefers wide tiles (more independent loads per lane); prefill prefers narrow ones
        # (shorter per-token reduction, more tiles in parallel).
        vpws = sorted(spec.agents.tile.v_per_warp, reverse=decode)
        out = []
        for c in cands:
            for vpw in vpws:
                for warps in spec.agents.tile.warps:
                    bv = vpw * warps
                    if v % bv:
                        continue  # a CTA tile must divide V; other sizes are simply not candidates
                    if c.config["staging"] == "smem" and bv % 4:
                        continue
                    state_regs = (k // 32) * vpw
                    why = (f"T<={bucket}: " + ("bandwidth-bound decode, " if decode else "serial token chain, ")
                           + f"v_per_warp={vpw} -> {state_regs} state registers/lane, {2 * vpw + 3} values "
                           f"reduced per token; {warps} warps -> {v // bv} CTAs per head")
                    out.append(c.extend(self.name, why, v_per_warp=vpw, warps=warps))
        return out


class ReduceAgent:
    name = "reduce"

    def __call__(self, spec: Any, arch: str, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        out = []
        for c in cands:
            for r in spec.agents.reduce:
                out.append(c.extend(self.name, "xor-butterfly all-reduce: every lane ends with every sum, "
                                    "so no broadcast is needed after it", reduce=r))
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
            est = kpl * cfg["v_per_warp"] + (2 * cfg["v_per_warp"] + 3) + 2 * (3 * kpl + cfg["v_per_warp"] + 1) + 24
            if est > b.max_registers:
                continue
            smem = cfg["k"] * (cfg["warps"] * cfg["v_per_warp"] + 8) * 4 if cfg["staging"] == "smem" else 0
            if smem > b.max_smem_bytes:
                continue
            group = kept.setdefault(cfg["state_layout"], [])
            if len(group) < b.max_candidates:
                group.append(c.extend(self.name, f"~{est} registers (budget {b.max_registers}), "
                                      f"<= {smem} B smem (budget {b.max_smem_bytes}); rank {len(group) + 1} "
                                      f"of max {b.max_candidates}"))
        return [c for group in kept.values() for c in group]


RECURRENT_AGENTS = (LayoutAgent(), StagingAgent(), TileAgent(), ReduceAgent(), BudgetAgent())
