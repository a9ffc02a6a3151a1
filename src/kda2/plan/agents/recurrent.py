"""Agents that design `recurrent` variants (see the kernel's design notes in recurrent.cu.j2).

Cost model in brief: a warp owns `v_per_warp` value columns and all K key rows, so per token it
reduces 2*v_per_warp + 3 values over 32 lanes (5 shuffle rounds), and holds K/32 * v_per_warp state
registers per lane. Decode (T = 1) is a pure state-bandwidth problem: what matters is bytes in flight
and coalescing. Longer sequences are a serial chain per (sequence, head, tile): what matters is the
latency of one token step, which grows with v_per_warp, while more, narrower tiles run in parallel.
"""
from __future__ import annotations

from dataclasses import replace

from typing import Any, Sequence

from kda2.plan.agents import Candidate
from kda2.plan.agents.layout import LayoutAgent
from kda2.plan.hardware import BULK_ARCHS, STATIC_SMEM_PER_BLOCK
from kda2.plan.model import (DECODE_MAX_T, Resources, bulk_tile_bytes, estimate, occupancy, preload_bytes,
                             register_cap, registers_estimate, registers_floor, smem_budget, smem_estimate, workloads)


def without_prefetch(c: Candidate, cause: str) -> Candidate:
    """`c` where a later agent turns the next-token prefetch off: the pipeline's reason, which proposed it, says
    so (left as it was, a kernel's reasons claimed a prefetch its config does not have)."""
    return replace(c, reasons=tuple(
        (a, f"{r} — not in {cause}" if a == PipelineAgent.name and "prefetch token t+1" in r and " — not in " not in r
         else r)
        for a, r in c.reasons))


class PipelineAgent:
    name = "pipeline"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        if bucket <= 1:
            why = ("T<=1: decode-only kernel, one token per sequence: no next-token prefetch (its registers and "
                   "branches buy nothing)")
        else:
            why = (f"T<={bucket}: prefetch token t+1's q/k/g/v/beta while token t updates the state (the per-token "
                   "chain is latency-bound)")
        # Per-token states only for multi-token decode (1 < T <= DECODE_MAX_T): a one-token call's only state is
        # its final one; leaving the code out of the T=1 kernels saved ~1 % at N=64/256 (H200, 2026-11-30,
        # experiments/2026-11-30-final calls 6 and 7); in the prefill kernels it costs ~18 registers.
        inter = 1 < bucket <= DECODE_MAX_T
        why += ("; per-token states compiled in (multi-token decode keeps them for speculative rollback)" if inter
                else "; no per-token states (T=1: the final state is the only one; prefill: ~18 registers)")
        states = (["fp32", "bf16"] if bucket <= DECODE_MAX_T and getattr(spec.features, "bf16_decode_state", False)
                  else ["fp32"])
        if len(states) > 1:
            why += "; bf16-state entries too (features.bf16_decode_state: half the state bytes)"
        return [c.extend(self.name, why, prefetch=bucket > 1, intermediate=inter, state_dtypes=states) for c in cands]


#: Why a decode candidate gets a bulk-staged twin (StagingAgent).
BULK_WHY = ("decode: the state tile in and out of shared memory by bulk copies on an mbarrier, so the copy engine, "
            "not registers, holds the bytes in flight (an in-place read + write of 128 MiB on the H200: 90 % of the "
            "1 GiB copy by bulk copies of 16 KB tiles, 84 % by 16-B loads and stores, one run, "
            "experiments/2026-12-01-decode/copy_ceiling.cu)")


def bulk_ok(allowed: Sequence[str], hw: Any, bucket: int) -> bool:
    """Bulk staging is planned where the spec allows it, for decode buckets (a state read and written once per
    call) on archs with bulk copies."""
    return "bulk" in allowed and bucket <= DECODE_MAX_T and hw.arch in BULK_ARCHS


class StagingAgent:
    name = "staging"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
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
                if bulk_ok(allowed, hw, bucket):
                    out.append(c.extend(self.name, BULK_WHY + "; v_first value rows of K, contiguous: one copy "
                                        "per tile, read by blocked lanes", staging="bulk", k_map="blocked"))
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
            if bulk_ok(allowed, hw, bucket):
                options.append(("bulk", "all", BULK_WHY + "; k_first: K key rows of BV columns, one tensor-map box "
                                "per tile (as K linear copies of a row each it was 1.7x slower than direct loads: the "
                                "copy engine's per-copy rate), read by the k_map=all lanes"))
            for staging, k_map, why in options:
                if k_map == "all":  # its token loop has no prefetch pipeline: one kernel for every decode bucket
                    out.append(without_prefetch(c, "the k_map=all loop (below)").extend(
                        self.name, why + " (no next-token prefetch in this loop)", staging=staging, k_map=k_map,
                        prefetch=False))
                    continue
                out.append(c.extend(self.name, why, staging=staging, k_map=k_map))
        return out


def waves(cfg: dict, hw: Any, bucket: int) -> tuple[int, int, int]:
    """(chains, resident slots, waves) of a config at the bucket's routing workload on this GPU: a chain is one
    (sequence, head, V-tile) CTA; slots = SMs x CTAs per SM (registers, smem, threads of the profile)."""
    w = workloads("recurrent", bucket)[0]
    occ = occupancy(Resources(min(registers_estimate(cfg), register_cap(cfg, hw)), smem_estimate(cfg), 0,
                              32 * cfg["warps"], "estimate"), hw)
    n = w.N * w.H * (cfg["v"] // (cfg["v_per_warp"] * cfg["warps"]))
    slots = hw.sm_count * max(occ.ctas_per_sm, 1)
    return n, slots, -(-n // slots)


class TileAgent:
    """Tile shapes: v_per_warp (the measured order, below) and warps per CTA. For serial-chain buckets the
    spec's warps options are ordered by the waves their chains need on this GPU (SM count, and CTAs per SM
    from the profile's registers and smem per SM): a partial last wave leaves SMs idle for a whole chain,
    which at T tokens per chain is the cost that dominates. Decode keeps the spec's order (bandwidth-bound). The
    T = 1 bucket also gets the spec's latency tiles (`tile.latency_v_per_warp`, latency_vpws) after the usual
    shapes: a one-sequence step is a latency chain per warp, which a narrower tile spreads over more CTAs."""
    name = "tile"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
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
                # (at T = 1 the spec's latency widths are planned as latency tiles below, not among these)
                shapes = [(vpw, cw) for vpw in all_k_vpws(spec, bucket) for cw in (4, 2, 1)
                          if 32 % (vpw // cw) == 0 and (k // (32 // (vpw // cw))) % 4 == 0
                          and (k // (32 // (vpw // cw))) * cw <= 64]
            else:
                shapes = [(vpw, 1) for vpw in vpws]
            # T = 1: the spec's latency tiles after them (k_map=all: the widest vector that divides the tile)
            shapes += [(vpw, (4 if vpw % 4 == 0 else vpw) if c.config["k_map"] == "all" else 1)
                       for vpw in latency_vpws(spec, c.config["k_map"], bucket)]
            for vpw, cw in shapes:
                options = list(spec.agents.tile.warps)
                if not decode:  # stable: ties keep the spec's order
                    options.sort(key=lambda wp: waves({**c.config, "v_per_warp": vpw, "warps": wp,
                                                       "lane_cols": cw}, hw, bucket)[2])
                for warps in options:
                    bv = vpw * warps
                    if v % bv:
                        continue  # a CTA tile must divide V; other sizes are simply not candidates
                    if c.config["staging"] == "smem" and bv % 4:
                        continue
                    if c.config["staging"] == "bulk" and bulk_row_bytes(c.config, k, bv) % 16:
                        continue  # a bulk copy (and a tensor-map box row) moves whole 16-byte pieces
                    state_regs = (k // 32) * vpw
                    why = (f"T<={bucket}: " + ("bandwidth-bound decode, " if decode else "serial token chain, ")
                           + f"v_per_warp={vpw} -> {state_regs} state registers/lane; {warps} warps -> "
                           f"{v // bv} CTAs per head; ")
                    why += (f"{cw} adjacent column(s) per lane = {4 * cw}-B state vectors, sums over K in-lane"
                            if c.config["k_map"] == "all" else f"{2 * vpw + 3} values reduced over lanes per token")
                    n, slots, nw = waves({**c.config, "v_per_warp": vpw, "warps": warps, "lane_cols": cw}, hw, bucket)
                    why += (f"; {n} chains in {nw} wave(s) of {slots} resident CTAs "
                            f"({hw.cite('sm_count', 'registers_per_sm', 'smem_per_sm_bytes')})")
                    if vpw in latency_vpws(spec, c.config["k_map"], bucket):
                        w1 = workloads("recurrent", bucket)[-1]
                        why += (f"; latency tile (spec tile.latency_v_per_warp): at {w1.name} (N={w1.N}, H={w1.H}) "
                                f"{w1.N * w1.H * (v // bv)} CTAs, each warp's one-token chain over {state_regs} "
                                "state registers instead of the wide tiles' more")
                    out.append(c.extend(self.name, why, v_per_warp=vpw, warps=warps, lane_cols=cw))
        return out


def bulk_row_bytes(cfg: dict, k: int, bv: int) -> int:
    """Bytes of one row of a bulk-staged tile in its narrowest state dtype (v_first: K, k_first: BV elements)."""
    elem = 2 if "bf16" in cfg.get("state_dtypes", ("fp32",)) else 4
    return (k if cfg["state_layout"] == "v_first" else bv) * elem


#: The widths of k_map=all tiles (their lanes hold lane_cols adjacent columns over a share of K).
ALL_K_VPWS = (16, 8)


def latency_vpws(spec: Any, k_map: str, bucket: int) -> list[int]:
    """The spec's latency tiles (tile.latency_v_per_warp) a T = 1 candidate of this k_map gets, narrowest last; none
    for other buckets. Lanes-over-K maps: those beyond the spec's v_per_warp. k_map=all: every listed width, planned
    as a latency tile instead of among the usual shapes (all_k_vpws): its tile group is capped apart (BudgetAgent), so
    a width the usual group's cap would cut still reaches the one-sequence class. Measured on the H200 (kda2 tune,
    2026-12-02, bench/results/h200-2026-12-02-decode/call3): k_first 8-column tiles (8x4, four warps) at N = 1 took
    3.81-3.97 us against 4.30 us for the best 16-column tile, which the cap of 8 had kept from the build."""
    if bucket != 1:
        return []
    listed = set(spec.agents.tile.latency_v_per_warp)
    if k_map == "all":
        return sorted(listed, reverse=True)
    return sorted((v for v in listed if v not in spec.agents.tile.v_per_warp), reverse=True)


def all_k_vpws(spec: Any, bucket: int) -> list[int]:
    """The usual widths of k_map=all tiles in this bucket: ALL_K_VPWS less the T = 1 latency widths."""
    lat = latency_vpws(spec, "all", bucket)
    return [v for v in ALL_K_VPWS if v not in lat]


class ReduceAgent:
    name = "reduce"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
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


class PreloadAgent:
    """Decode buckets (T <= DECODE_MAX_T), with the spec's `inputs: [.., preload]`: each candidate again with every
    token's q/k/g/v/beta copied to shared memory at CTA entry (`preload` = T tokens). A speculative
    verify call is a serial chain of T token steps per CTA, and each step otherwise starts with a round trip to
    memory for that token's inputs, with only a few CTAs per SM to hide it (H200, N = 64, H = 32, the same state
    bytes: the best T = 4 kernels took 123 / 138 us k_first / v_first, 77 / 74 us at T = 1; kda2 tune,
    tuning/kimi_linear_recurrent.h200.json). Issued beside the state loads, that latency overlaps the state's and
    the chain runs from shared memory and registers. The copies replace the next-token prefetch (prefetch off).
    The per-token candidates stay (`per_token` in `inputs`): both are measured. A call longer than T refills the
    buffer every T tokens (correct at any length, as every kernel here).
    At T = 1 the twins come beside the per-token candidates whatever `inputs` lists: the one token's inputs land
    beside the state, and its gate, norms and q.k are prepared once per CTA (every warp of a per-token kernel
    computes them).
    Measured (H200, D2 = N 64 T 1 H 32, experiments/2026-12-02-d2pre): the k_first 16x4 bulk 4-CTA twin 74.2 / 74.1
    us against the per-token route's 76.1 / 75.9; at v_first the per-token route stayed ahead."""
    name = "preload"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        modes = spec.agents.inputs
        if "preload" not in modes or bucket > DECODE_MAX_T:
            return list(cands)  # prefill chains are long and prefetched
        twins = []
        for c in cands:
            smem = preload_bytes({**c.config, "preload": bucket})
            c = without_prefetch(c, "the preload twin below: its copies replace the prefetch")
            why = ("the token's gate, norms and q.k prepared once per CTA, not in every warp" if bucket == 1 else
                   "the token chain waits on no global load (each step would otherwise start with a round trip to "
                   "memory); no next-token prefetch")
            twins.append(c.extend(self.name, f"T<={bucket}: every token's q/k/g/v/beta ({smem} B per CTA) copied "
                                  f"to shared memory at CTA entry, beside the state loads: {why}", preload=bucket,
                                  prefetch=False))
        return (list(cands) if "per_token" in modes or bucket == 1 else []) + twins


class OccupancyAgent:
    """Decode buckets: each shape as ptxas lays it out (registers as it likes, often 140-170 at K=128, so 2-3
    CTAs of 4 warps per SM) and, with the spec's `occupancy: [.., raised]`, again with launch bounds asking for
    more resident CTAs per SM. A decode call streams every state once, so its speed is bytes in flight per SM:
    the raised variant trades registers (ptxas must fit the cap, or the build's spill check refuses it) for
    more CTAs loading at once. The CTA count is the most whose register cap (the profile's registers per SM)
    still holds the kernel's register floor (model.registers_floor) plus HEADROOM; it is proposed only when that
    cap is below what a thread may address (else it binds nothing). Prefill buckets are serial-chain bound: left
    to ptxas. Measured (H200, experiments/2026-12-02-occ): the v_first 16-column preload tile under a 4-CTA bound
    (128 registers, no spills) runs M1 in 85.0 us against 90.5-91.3 for the 3-CTA route; the estimate plus 16
    had kept it at three.
    """
    name = "occupancy"

    HEADROOM = 8  # registers over the floor the cap must leave

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        modes = spec.agents.occupancy
        out = []
        for c in cands:
            cfg = c.config
            if "compiler" in modes or bucket > DECODE_MAX_T:
                out.append(c.extend(self.name, "resident CTAs per SM left to ptxas's register use"))
            if "raised" not in modes or bucket > DECODE_MAX_T or cfg["v_per_warp"] in latency_vpws(spec, cfg["k_map"], bucket):
                continue  # (a latency tile is for calls of few tiles: resident CTAs per SM do not bind there)
            est = registers_floor(cfg)
            need = est + self.HEADROOM
            threads = 32 * cfg["warps"]
            m = min(hw.registers_per_sm // (threads * need), hw.threads_per_sm_max // threads)
            while m > 1 and register_cap({**cfg, "min_ctas": m}, hw) < need:  # the cap is in whole 8-register steps
                m -= 1
            if m <= 1:
                continue
            cap = register_cap({**cfg, "min_ctas": m}, hw)
            if cap >= hw.registers_per_thread_max:
                continue  # a cap ptxas can never hit changes nothing
            out.append(c.extend(self.name, f"T<={bucket}: launch bounds ask for {m} CTAs/SM of {threads} threads: "
                                f"register cap {cap} >= floor {est} + {self.HEADROOM} "
                                f"({hw.cite('registers_per_sm')}); more state loads in flight per SM",
                                min_ctas=m))
        return out


def copy_run(cfg: dict) -> int:
    """State elements a thread's direct loads read contiguously (recurrent.cuh PF_RUN): the pieces the persistent
    kernels copy with cp.async, which moves 4, 8 or 16 bytes."""
    if cfg["k_map"] == "all":
        return cfg["lane_cols"]
    if cfg["state_layout"] == "v_first":
        return 1 if cfg["k_map"] == "strided" else cfg["k"] // 32
    return cfg["v_per_warp"]


class ScheduleAgent:
    """Decode buckets (T <= DECODE_MAX_T), with the spec's `schedule: [.., persistent]`: each direct-staged candidate
    again as a persistent kernel. A decode call streams every state once, one tile (one CTA's [K, BV] share of a
    (sequence, head) state) per CTA in the grid form: each CTA loads, computes, stores and exits, and the tiles
    come in waves of the resident CTA slots with a partial last one, so the GPU's memory sees per-CTA phases and a
    tail. The persistent form launches min(tiles, slots) CTAs (the library asks the driver for the slots per
    context); each loops over tiles and copies its next tile's state to shared memory (cp.async, no registers)
    before it computes and stores the current one, so loads and stores stay in flight from start to end. At T = 1
    a tile's compute is short and the grid form's waves already overlap (H200: every persistent candidate lost,
    tuning/kimi_linear_recurrent.h200.json); a multi-token tile is a chain of T token steps, the time a grid CTA's
    state bytes sit idle, which the next tile's copy fills. Preload candidates keep their input buffer: the
    kernel refills it per tile behind a barrier, in a commit group of its own. Its candidates come after the grid
    ones and the budget ranks them separately (BudgetAgent): they add to the bucket's grid candidates, never
    replace them; the tuner times both at every batch class. Not proposed for smem staging (its shared tile is
    the state's way in), where a bf16 state piece would be 2 bytes (too small for cp.async), or for latency tiles
    (TileAgent: calls of few tiles, nothing to loop over). Prefill buckets are token-chain bound over long
    sequences: one tile per CTA."""
    name = "schedule"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        modes = spec.agents.schedule
        if bucket > DECODE_MAX_T or "persistent" not in modes:
            why = (f"T<={bucket}: one CTA per tile, grid (V/BV, HV, N): " +
                   ("each tile is a long token chain, whose steps set the time" if bucket > DECODE_MAX_T
                    else "the spec's schedule is grid only"))
            return [c.extend(self.name, why) for c in cands]
        grid, twins = [], []
        for c in cands:
            cfg = c.config
            latency = cfg["v_per_warp"] in latency_vpws(spec, cfg["k_map"], bucket)  # few tiles: nothing to loop over
            ok = cfg["staging"] == "direct" and copy_run(cfg) >= 2 and not latency
            if "grid" in modes or not ok:
                grid.append(c.extend(self.name, f"T<={bucket}: one CTA per tile, grid (V/BV, HV, N)" + (
                    "" if ok else ("; no persistent form: " + ("a latency tile" if latency else
                                                                f"{cfg['staging']} staging"
                                                                if cfg["staging"] != "direct" else
                                                                "a bf16 state piece would be 2 bytes")))))
            if not ok:
                continue
            p = {**cfg, "persistent": True}
            occ = occupancy(Resources(min(registers_estimate(p), register_cap(p, hw)), smem_estimate(p), 0,
                                      32 * p["warps"], "estimate"), hw)
            slots = hw.sm_count * max(occ.ctas_per_sm, 1)
            per_head = p["v"] // (p["v_per_warp"] * p["warps"])
            classes = []
            for w in workloads("recurrent", bucket):
                tiles = w.N * w.H * per_head
                classes.append(f"{w.name}: {tiles} tiles = {tiles / slots:.1f} waves of one-tile CTAs -> "
                               f"{min(tiles, slots)} CTAs of {-(-tiles // min(tiles, slots))} tile(s)")
            twins.append(c.extend(self.name, f"T<={bucket}: persistent, grid = min(tiles, {slots} resident CTA slots "
                                  f"at ~{occ.ctas_per_sm} CTA/SM by {occ.limiter}); " + "; ".join(classes)
                                  + "; the next tile's state copied to shared memory "
                                  f"({smem_estimate(p) - smem_estimate(cfg)} B) while this one computes and stores: "
                                  "state loads stay in flight across tiles instead of each CTA's load -> compute "
                                  "-> store -> exit, no CTA starts after the first ones, tiles per CTA differ by one "
                                  "at most "
                                  f"({hw.cite('sm_count', 'registers_per_sm', 'smem_per_sm_bytes')})",
                                  persistent=True))
        return grid + twins


class BudgetAgent:
    """Drops candidates that cannot fit the budget or this GPU, then keeps the best-ranked `max_candidates`.

    Limits are the tighter of the spec's budget and the profile's (registers per thread, shared memory per
    block); each kept candidate's reason records its estimated occupancy on the profile's SMs and the static
    model's time at the bucket's routing workload (kda2.plan.model), so a plan says what it assumed of
    the hardware. The agents' order is kept (the tune record, not the estimate, decides the route). The cap holds
    per state layout and kind: preload candidates (PreloadAgent), persistent ones (ScheduleAgent) and bulk-staged
    ones (StagingAgent) are ranked among their own kind, so they are measured beside a bucket's per-token grid
    candidates rather than push them
    (and their tuning records) out of it.
    """
    name = "budget"

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        b = spec.budget
        reg_limit = min(b.max_registers, hw.registers_per_thread_max)
        w = workloads("recurrent", bucket)[0]
        kept: dict[str, list[Candidate]] = {}
        for c in cands:
            cfg = c.config
            est = min(registers_estimate(cfg), register_cap(cfg, hw))
            if est > reg_limit:
                continue
            smem = smem_estimate(cfg)
            if smem > smem_budget(cfg, b.max_smem_bytes, hw.smem_per_block_bytes):
                continue
            if smem - bulk_tile_bytes(cfg) > STATIC_SMEM_PER_BLOCK:
                continue  # static buffers past CUDA's limit (only the bulk tile is dynamic)
            res = Resources(est, smem, 0, 32 * cfg["warps"], "estimate")
            occ = occupancy(res, hw)
            if occ.ctas_per_sm < 1:
                continue
            model = estimate(cfg, res, hw, w)
            kind = " ".join(k for k, on in (("preload", cfg.get("preload")), ("persistent", cfg.get("persistent")),
                                             ("bulk", cfg["staging"] == "bulk"),
                                             ("latency", cfg["v_per_warp"] in latency_vpws(spec, cfg["k_map"], bucket)))
                            if on)
            group = kept.setdefault((cfg["state_layout"], kind), [])
            if len(group) < b.max_candidates:
                group.append(c.extend(self.name, f"~{est} registers (budget {b.max_registers}; "
                                      f"{hw.cite('registers_per_thread_max')}), <= {smem} B smem (budget "
                                      f"{b.max_smem_bytes}; {hw.cite('smem_per_block_bytes')}); "
                                      f"{occ.ctas_per_sm} CTA/SM by {occ.limiter} on {hw.sm_count} SMs; model at "
                                      f"N={w.N} T={w.T} H={w.H}: ~{model.us:.0f} us ({model.bound}-bound, "
                                      f"{hw.cite('copy_bandwidth_bytes_per_s', 'launch_latency_us')}); "
                                      f"rank {len(group) + 1} of max {b.max_candidates}"
                                      + (" preload candidates" if cfg.get("preload") else "")
                                      + (f" (bulk staging; its {bulk_tile_bytes(cfg)} B tile in dynamic shared memory, the rest static, "
                                         f"<= {STATIC_SMEM_PER_BLOCK} B)" if cfg["staging"] == "bulk" else "")
                                      + (" (persistent)" if cfg.get("persistent") else "")))
        return [c for group in kept.values() for c in group]


RECURRENT_AGENTS = (
    LayoutAgent(k_first="states [N,HV,K,V]: FLA's default layout",
                v_first="states [N,HV,V,K]: the layout FLA's KDA layer keeps (state_v_first=True); "
                        "each value column is 512 contiguous bytes along K"),
    PipelineAgent(), StagingAgent(), TileAgent(), ReduceAgent(), PreloadAgent(), ScheduleAgent(), OccupancyAgent(),
    BudgetAgent())
