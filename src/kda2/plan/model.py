"""Static cost model of a candidate: occupancy, bytes moved, roofline time and the serial-chain bound.

Inputs: a variant config, its resources (from ptxas's resources.json after a build, or the agents'
estimates before one), a hardware profile (kda2.plan.profile: every hardware number comes from it) and a
workload (the shape a seq_len bucket is judged at: `workloads()`, the one home of the tuning shapes).

    time ≈ launch latency + max(roofline, serial chain)
    roofline      = max(bytes moved / copy bandwidth, tensor FLOPs / tensor rate)
    serial chain  = waves × steps per chain × time per step
                    waves = ceil(chains / (SMs × CTAs per SM)); a chain is one (sequence, head, V-slice)
                    walking its tokens (recurrent) or chunks (chunk) in order; time per step from a tuning
                    record when one is given (`step_ns_from_record`), else the per-step roofline of one CTA
                    (its share of bandwidth and of its SM's tensor rate)

It ranks candidates (`rank`) and prunes those that cannot run well (`prune`: spills, register or shared
memory overflow, occupancy below a floor), each with a reason. `spearman` compares the model's order
with measured times (kda2 tune reports it per route).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from kda2.plan.hardware import STATIC_SMEM_PER_BLOCK
from kda2.plan.smem import CHUNK, expected_strides, state_smem_bytes, state_threads
from kda2.spec.knobs import DECODE_MAX_T, knob


#: FlashKDA's mixed batch (the benchmark's P4, docs/DESIGN.md §1.1): six prompts of uneven length, 8192 tokens packed.
MIXED_SEQLENS = (1300, 547, 2048, 963, 271, 3063)


@dataclass(frozen=True)
class Workload:
    """A shape a bucket is judged at: N sequences of T tokens, H = HV heads (DESIGN §1.1 shapes), or with `lengths`
    a varlen packing of N = len(lengths) sequences whose longest is T.

    graph: the tuner times it as a serving loop replays it, calls captured in one CUDA graph (kda2.bench.timing
    Timer.graph), not one call between events: a one-sequence decode step (D1) is a few microseconds, where the
    events' own cost and the launch path are as large as the differences between candidates (2026-12-01, H200: the
    event-timed pick for k_first N = 1 was 0.3 us slower per step under graph replay than the best candidate)."""
    N: int
    T: int
    H: int
    name: str = ""
    graph: bool = False
    lengths: tuple[int, ...] | None = None

    @property
    def chains(self) -> int:
        """Independent (sequence, head) states: what a batch class is told apart by (kda2_select's `chains`)."""
        return self.N * self.H

    @property
    def tokens(self) -> int:
        return sum(self.lengths) if self.lengths else self.N * self.T

    def chunks(self, size: int) -> int:
        """Chunks of `size` tokens over all sequences (each sequence's last one partial)."""
        return sum(-(-n // size) for n in self.lengths) if self.lengths else self.N * -(-self.T // size)

    def as_dict(self) -> dict[str, Any]:
        return {"N": self.N, "T": self.T, "H": self.H, **({"lengths": list(self.lengths)} if self.lengths else {}),
                **({"class": self.name} if self.name else {})}


def _w(kind: str, N: int, T: int, H: int = 32) -> Workload:
    return Workload(N, T, H, f"{kind}-n{N}" + ("" if H == 32 else f"h{H}"), graph=kind == "decode" and N == 1)


def _mixed(bucket: int, H: int) -> Workload:
    """MIXED_SEQLENS, scaled down where its longest prompt would not fit the bucket."""
    top = max(MIXED_SEQLENS)
    lengths = tuple(max(1, n * min(bucket, top) // top) for n in MIXED_SEQLENS)
    return Workload(len(lengths), max(lengths), H, f"prefill-mixed{len(lengths)}h{H}", lengths=lengths)


def workloads(family: str, bucket: int) -> list[Workload]:
    """The batch classes of a (family, bucket): each gets its own dispatch row and tuned winner
    (`class_rows` sets where one ends and the next begins); the first is the one the static model ranks by
    and the untuned row routes by. Recurrent decode: N = 256 (bandwidth, D3), N = 64 (D2), N = 1 (latency,
    D1), one token each, or 4 in a multi-token bucket (M1's speculative verify); recurrent prefill: 8
    sequences of min(bucket, 256). Chunk: the bucket's length, N so that N·T ≈ 16K tokens at H = 32 first
    (P3 at 2048, a P1-sized batch at 8192, one P5-like sequence at 65536), then the other end of the range of
    chains the P-shapes span: a thin shard at 2048 (P6: 16 chains) and half of P3's batch (cuDNN's K10: 128
    chains, which a fused kernel of two CTAs an SM half fills: docs/DESIGN.md §1, the fused twin), P4's mixed
    batch at 8192 (384 chains, its longest prompt within the bucket: packed as P4 is, since a twin runs so uneven a
    batch on its two kernels, kda2.plan.smem fused_takes), and at 65536 twice P5's chains (64, at a quarter of its length): where
    few chains leave SMs free the single-stage state pass runs beside the prep (docs/DESIGN.md §1 overlap), with
    more the library does not overlap and a two-stage pass is faster, so the two need their own winners."""
    if family == "recurrent":
        if bucket <= DECODE_MAX_T:  # T = 1, or 4 tokens per sequence for a multi-token bucket (M1)
            t = min(bucket, 4)
            return [_w("decode", 256, t), _w("decode", 64, t), _w("decode", 1, t)]
        return [_w("prefill", 8, min(bucket, 256))]
    n = max(1, min(8, 16384 // bucket))
    first = _w("prefill", n, bucket)
    if bucket <= 2048:   # and a half-filled batch: K10's 128 chains, where the fused twin loses and P3's 256 win
        return [first, _w("prefill", 2, bucket, 8), _w("prefill", n // 2, bucket)]
    if bucket <= 8192:
        return [first, _mixed(bucket, 64)]
    return [first, _w("prefill", 1, bucket // 4, 64)]


def class_rows(family: str, bucket: int) -> list[tuple[Workload, int]]:
    """(batch class, min_chains) in dispatch order: ascending chains, each class serving calls from its
    min_chains up to the next one's (the geometric midpoint between neighbouring classes; the first from 0)."""
    ws = sorted(workloads(family, bucket), key=lambda w: w.chains)
    return [(w, 0 if i == 0 else math.isqrt(ws[i - 1].chains * w.chains - 1) + 1) for i, w in enumerate(ws)]


@dataclass(frozen=True)
class Resources:
    """Per CTA of the kernel that bounds the variant (the state kernel for chunk)."""
    registers: int
    smem_bytes: int
    spill_bytes: int
    threads: int
    source: str  # "ptxas" (resources.json) or "estimate" (the agents')


def threads_of(config: Mapping[str, Any]) -> int:
    if config["family"] == "chunk":
        return state_threads(config["block_v"], knob(config, "state_mma"))
    return 32 * config["warps"]


def resources_from_ptxas(config: Mapping[str, Any], res: Mapping[str, Mapping[str, Any]],
                         dynamic_smem: int = 0) -> Resources:
    """From a resources.json ({kernel: {registers, smem, spill_stores, spill_loads, stack}}): the largest
    register count and shared memory of its entry functions (static + `dynamic_smem` from plan.json)."""
    regs = max((int(r.get("registers", 0)) for r in res.values()), default=0)
    smem = max((int(r.get("smem", 0)) for r in res.values()), default=0) + int(dynamic_smem)
    spill = sum(int(r.get("spill_stores", 0)) + int(r.get("spill_loads", 0)) for r in res.values())
    return Resources(regs, smem, spill, threads_of(config), "ptxas")


#: Registers a persistent recurrent kernel needs over its one-tile form: the tile loop, the next tile's
#: coordinates and pool rows, the copy addresses (ptxas, sm_90a, K=V=128: +0 to +32 without launch bounds).
PERSISTENT_REGISTERS = 24


#: Registers a k_map=all preload kernel holds for its in-loop refill of the token buffer (recurrent.cuh land_block,
#: a call longer than the bucket). Measured with the gate on CUDA cores (ptxas, sm_90a, K=V=128, 16x4 lanes, 4-CTA
#: launch bound: 116-122 registers with the refill taken out, 128 and a 4-byte spill with it) it was 10, which kept
#: the 16-column preload kernels at three CTAs per SM. With the gate on the SFU (kda2/gate.cuh) they fit the 4-CTA
#: bound with the refill (16x2 and 16x4, every entry, no spills), and the 4-CTA 16x2 bulk kernel runs M1 k_first in
#: 78.6 / 78.8 us against 86.9 / 86.3 for the route (H200, bench/results/h200-2026-12-02-ring/call7): no allowance.
PRELOAD_REFILL_REGISTERS = 0


def registers_estimate(cfg: Mapping[str, Any]) -> int:
    """Registers per thread a recurrent kernel needs, estimated before ptxas says (the agents' budget)."""
    kpl = cfg["k"] // 32
    loop = PERSISTENT_REGISTERS if cfg.get("persistent") else 0
    if cfg["k_map"] == "all":  # state share, one token's q/k/g rows, ~30 for addressing
        refill = PRELOAD_REFILL_REGISTERS if cfg.get("preload") else 0
        return cfg["k"] * cfg["v_per_warp"] // 32 + 3 * kpl + 30 + loop + refill  # = RPL * lane_cols + ...
    # the held part (_tile_registers), the reduction buffer and, without preload, the prefetched token's inputs (a
    # preload kernel reads one token's inputs from shared memory at a time; left as it was for the others, whose
    # occupancy variants were planned and measured with it)
    extra_token = 0 if cfg.get("preload") else _token_registers(cfg)
    return _tile_registers(cfg) + _butterfly_registers(cfg) + extra_token


def _token_registers(cfg: Mapping[str, Any]) -> int:
    """Blocked / strided tiles: one token's inputs (q, k, g of the lane's key rows, v of its columns, β)."""
    return 3 * (cfg["k"] // 32) + cfg["v_per_warp"] + 1


def _butterfly_registers(cfg: Mapping[str, Any]) -> int:
    """Blocked / strided tiles: the reduction's register buffer (every lane ends with every sum)."""
    return 2 * cfg["v_per_warp"] + 3


def _tile_registers(cfg: Mapping[str, Any]) -> int:
    """Blocked / strided tiles: what every such kernel holds — its state share, one token's inputs, addressing and
    the persistent loop."""
    loop = PERSISTENT_REGISTERS if cfg.get("persistent") else 0
    return (cfg["k"] // 32) * cfg["v_per_warp"] + _token_registers(cfg) + 24 + loop


def registers_floor(cfg: Mapping[str, Any]) -> int:
    """Registers a recurrent kernel cannot do without: what launch bounds may squeeze it to before ptxas spills
    (the occupancy agent's budget; `registers_estimate` is what it takes unbounded, for the occupancy model).
    k_map=all tiles: the estimate, which is that floor already. Blocked / strided tiles: the state share, one
    token's inputs, addressing and the persistent loop; the butterfly's register buffer only beside a prefetched
    next token. Measured (ptxas, sm_90a, K=V=128, 4 warps under a 4-CTA bound = 128 registers,
    experiments/2026-12-02-occ): the 16-column tiles fit without spills with the scatter reduction (preload or
    prefetch, grid or persistent) and with the butterfly in preload kernels (floor 117); the butterfly beside a
    prefetched token spills 1.2-1.7 KB (floor 152). The estimate (146-181 for these) held all of them at three."""
    if cfg["k_map"] == "all":
        return registers_estimate(cfg)
    buf = _butterfly_registers(cfg) if cfg.get("reduce") == "butterfly" and not cfg.get("preload") else 0
    return _tile_registers(cfg) + buf


def register_cap(cfg: Mapping[str, Any], hw: Any) -> int:
    """Registers per thread ptxas may use under the variant's launch bounds: min_ctas CTAs of 32·warps threads
    must fit the SM's register file (in whole 8-register steps), and never more than a thread can address."""
    per_thread = hw.registers_per_sm // (32 * cfg["warps"] * cfg.get("min_ctas", 1))
    return min(per_thread // 8 * 8, hw.registers_per_thread_max)


def _ksplit(cfg: Mapping[str, Any]) -> int:
    """k_map all: lane groups splitting K (kda2.tir.recurrent.all_k_geometry)."""
    return 32 * cfg.get("lane_cols", 1) // cfg["v_per_warp"]


def preload_bytes(cfg: Mapping[str, Any], stage_row: int | None = None) -> int:
    """What `preload` adds to a recurrent kernel's shared memory (recurrent.cuh PL_BYTES + TB_FLOATS): the copy
    buffer — per token q and k rows (16-bit), a g row (fp32), the CTA's value columns of v (16-bit), beta (fp32),
    regions 16-byte aligned — and the prepared-token table — per token, k_map all: q̂, k̂ and decay rows of KSPLIT x
    STAGE_ROW floats (`stage_row` from the TIR plan, else K / KSPLIT + 4 as the pass picks); other maps: a decay
    row of K floats — and 4 scalars. A k_map all preload kernel has no per-warp token stage (stage_bytes)."""
    t, k = cfg.get("preload", 0), cfg["k"]
    if cfg["k_map"] == "all":  # q̂, k̂ and decay rows
        rows = 3 * _ksplit(cfg) * (stage_row if stage_row is not None else k // _ksplit(cfg) + 4)
    else:
        rows = k
    buffer = t * (2 * k * 2 + k * 4) + -(-t * cfg["warps"] * cfg["v_per_warp"] * 2 // 16) * 16 + -(-t * 4 // 16) * 16
    return buffer + t * (rows + 4) * 4


def stage_bytes(cfg: Mapping[str, Any], stage_row: int | None = None) -> int:
    """The k_map all per-token kernels' per-warp token stage (recurrent.cuh stage_smem): WARPS x 3 rows of KSPLIT x
    STAGE_ROW floats (`stage_row` from the TIR plan, else K / KSPLIT + 4 as the pass picks); none otherwise, and none
    with preload (its prepared table serves the token steps)."""
    if cfg["k_map"] != "all" or cfg.get("preload"):
        return 0
    ks = _ksplit(cfg)
    return cfg["warps"] * 3 * ks * (stage_row if stage_row is not None else cfg["k"] // ks + 4) * 4


def bulk_tile_bytes(cfg: Mapping[str, Any]) -> int:
    """The bulk-staged state tile of a recurrent kernel (recurrent.cuh bulk_smem, dynamic shared memory), sized in
    fp32: the CTA's K x BV share of the state, unpadded — the TIR stage keeps these rows contiguous so that one bulk
    copy moves the tile (kda2.tir.plan._plan_bulk); 0 for other stagings."""
    return cfg["k"] * cfg["warps"] * cfg["v_per_warp"] * 4 if cfg.get("staging") == "bulk" else 0


def smem_estimate(cfg: Mapping[str, Any]) -> int:
    """Shared memory per CTA of a recurrent kernel: the staged state tile (smem or bulk staging) and / or the per-warp
    input rows (k_map all, per-token kernels), the preload buffer and table, and for a persistent kernel its copy of the next
    tile's state (the CTA's [K, warps*v_per_warp] fp32 tile, every thread's share side by side: no pad,
    kda2.tir.recurrent.prefetch_stage_func). Of that, bulk_tile_bytes is dynamic, the rest static."""
    copy = cfg["k"] * cfg["warps"] * cfg["v_per_warp"] * 4 if cfg.get("persistent") else 0
    tile = cfg["k"] * (cfg["warps"] * cfg["v_per_warp"] + 8) * 4 if cfg["staging"] == "smem" else stage_bytes(cfg)
    if cfg["staging"] == "bulk":  # the tile and its mbarrier
        tile += bulk_tile_bytes(cfg) + 8
    return tile + preload_bytes(cfg) + copy


def smem_budget(cfg: Mapping[str, Any], spec_max: int, per_block: int) -> int:
    """A variant's shared-memory budget (the TIR stage's and the BudgetAgent's): the spec's and the profile's per-block
    limit, and for recurrent kernels other than bulk-staged ones CUDA's static limit as well (their buffers are
    `__shared__` arrays; kda2.plan.hardware.STATIC_SMEM_PER_BLOCK). Chunk kernels and the bulk tile take dynamic
    shared memory, opted in at load."""
    limit = min(spec_max, per_block)
    if cfg["family"] == "recurrent" and cfg.get("staging") != "bulk":
        limit = min(limit, STATIC_SMEM_PER_BLOCK)
    return limit


#: Registers assumed for a chunk kernel before ptxas reports (its occupancy is bounded by shared memory).
_CHUNK_REGISTERS_GUESS = 128


def estimate_resources(config: Mapping[str, Any]) -> Resources:
    """Before a build: shared memory from the formulas the kernels use, registers as the agents estimate."""
    if config["family"] == "chunk":
        mma = knob(config, "state_mma")
        smem = state_smem_bytes(expected_strides(config["k"]), k=config["k"], block_v=config["block_v"],
                                stages=config["stages"], mma=mma)
        return Resources(_CHUNK_REGISTERS_GUESS, smem, 0, state_threads(config["block_v"], mma), "estimate")
    return Resources(registers_estimate(config), smem_estimate(config), 0, 32 * config["warps"], "estimate")


@dataclass(frozen=True)
class Occupancy:
    ctas_per_sm: int
    warps_per_sm: int
    limiter: str


def occupancy(res: Resources, hw: Any) -> Occupancy:
    """Resident CTAs per SM: the least of the thread, register, shared-memory and block limits."""
    warps = -(-res.threads // 32)
    unit = hw.register_alloc_unit
    regs_per_warp = -(-max(res.registers, 1) * 32 // unit) * unit
    limits = {"threads": hw.threads_per_sm_max // max(res.threads, 1),
              "registers": hw.registers_per_sm // (regs_per_warp * warps),
              "blocks": hw.blocks_per_sm_max}
    if res.smem_bytes:
        limits["smem"] = hw.smem_per_sm_bytes // (res.smem_bytes + hw.smem_reserved_per_block_bytes)
    limiter = min(limits, key=lambda k: limits[k])
    return Occupancy(limits[limiter], limits[limiter] * warps, limiter)


def spare_beside(a: Resources, b: Resources, hw: Any) -> dict[str, int]:
    """What one SM has left with one CTA of each of two kernels resident together (negative: over): shared memory
    (each block's bytes plus the driver's reservation), registers (per warp, in allocation units) and threads. The
    chunk family's overlap needs a prep and a state CTA to fit so (docs/DESIGN.md §1); the library checks the same
    sums at load from the driver's own figures (templates/library.cpp.j2 fit_beside)."""
    unit = hw.register_alloc_unit
    regs = sum(-(-max(r.registers, 1) * 32 // unit) * unit * -(-r.threads // 32) for r in (a, b))
    return {"smem": hw.smem_per_sm_bytes - sum(r.smem_bytes + hw.smem_reserved_per_block_bytes for r in (a, b)),
            "registers": hw.registers_per_sm - regs, "threads": hw.threads_per_sm_max - a.threads - b.threads}


def bytes_moved(config: Mapping[str, Any], w: Workload) -> float:
    """DRAM bytes of one call: inputs, outputs, state in and out; chunk adds its workspace round trip."""
    K, V, N, H = config["k"], config["v"], w.N, w.H
    tokens = w.tokens
    io = tokens * H * (2 * K * 2 + V * 2 + K * 4 + 4 + V * 2)  # q, k bf16; v bf16; g fp32; beta; o bf16
    state = 2 * N * H * K * V * 4
    if config["family"] != "chunk":
        return float(io + state)
    chunks = w.chunks(CHUNK)
    slices = V // config["block_v"]
    shared = 3 * CHUNK * K * 2 + CHUNK * CHUNK * 2  # w, qg, kg, Aqk: every V-slice reads them
    own = CHUNK * V * 2 + K * 4                     # uᵀ (split over slices) and the last gate row
    return float(io + state + chunks * H * (shared + own) + chunks * H * (slices * shared + own))


def tensor_flops(config: Mapping[str, Any], w: Workload) -> float:
    """Tensor-core FLOPs of one call (chunk only; the recurrent kernel runs on CUDA cores)."""
    if config["family"] != "chunk":
        return 0.0
    K, V, C = config["k"], config["v"], CHUNK
    per_chunk = 2 * (3 * C * K * V + 3 * C * C * K + C * C * V + C ** 3 / 3)
    return per_chunk * w.chunks(C) * w.H


def chains(config: Mapping[str, Any], w: Workload) -> tuple[int, int]:
    """(serial chains, steps per chain): (sequence, head, V-slice) CTAs walking tokens or chunks."""
    if config["family"] == "chunk":
        return w.N * w.H * (config["v"] // config["block_v"]), -(-w.T // CHUNK)
    return w.N * w.H * (config["v"] // (config["v_per_warp"] * config["warps"])), w.T


def step_roofline_ns(config: Mapping[str, Any], hw: Any, active: int, per_sm: int) -> float:
    """One step of one chain, its share of the GPU: bytes over bandwidth / active CTAs, FLOPs over its SM's
    tensor rate / CTAs sharing the SM."""
    K = config["k"]
    if config["family"] == "chunk":
        bv = config["block_v"]
        step_bytes = 3 * CHUNK * K * 2 + CHUNK * CHUNK * 2 + CHUNK * bv * 2 + CHUNK * bv * 2
        flops = 2 * (3 * CHUNK * K * bv + CHUNK * CHUNK * bv)
        t_flop = flops / (hw.tensor_flops_per_s.bf16 / hw.sm_count / max(per_sm, 1))
    else:
        step_bytes = 2 * K * 2 + config["v_per_warp"] * config["warps"] * 2 + K * 4 + 4
        t_flop = 0.0
    t_mem = step_bytes / (hw.copy_bandwidth_bytes_per_s / max(active, 1))
    return max(t_mem, t_flop) * 1e9


@dataclass(frozen=True)
class Estimate:
    us: float
    roofline_us: float
    serial_us: float
    bytes: float
    flops: float
    occupancy: Occupancy
    waves: int
    step_ns: float
    bound: str            # "bandwidth", "tensor", or "serial"

    def as_dict(self) -> dict[str, Any]:
        return {"us": round(self.us, 2), "roofline_us": round(self.roofline_us, 2),
                "serial_us": round(self.serial_us, 2), "bytes": self.bytes, "flops": self.flops,
                "ctas_per_sm": self.occupancy.ctas_per_sm, "warps_per_sm": self.occupancy.warps_per_sm,
                "occupancy_limiter": self.occupancy.limiter, "waves": self.waves,
                "step_ns": round(self.step_ns, 1), "bound": self.bound}


def estimate(config: Mapping[str, Any], res: Resources, hw: Any, w: Workload,
             step_ns: float | None = None) -> Estimate:
    occ = occupancy(res, hw)
    nbytes, flops = bytes_moved(config, w), tensor_flops(config, w)
    t_bw = nbytes / hw.copy_bandwidth_bytes_per_s * 1e6
    t_tc = flops / hw.tensor_flops_per_s.bf16 * 1e6
    n_chains, steps = chains(config, w)
    slots = hw.sm_count * max(occ.ctas_per_sm, 1)
    waves = -(-n_chains // slots)
    active = min(n_chains, slots)
    per_sm = min(max(occ.ctas_per_sm, 1), -(-active // hw.sm_count))
    step = step_ns if step_ns is not None else step_roofline_ns(config, hw, active, per_sm)
    serial = waves * steps * step / 1e3
    roof = max(t_bw, t_tc)
    bound = "serial" if serial >= roof else ("tensor" if t_tc > t_bw else "bandwidth")
    return Estimate(hw.launch_latency_us + max(roof, serial), roof, serial, nbytes, flops, occ, waves, step, bound)


def prune_reason(config: Mapping[str, Any], res: Resources, hw: Any, budget: Any,
                 floor_warps: int | None = None) -> str | None:
    """Why a candidate cannot be shipped or cannot run well on `hw`, or None. The occupancy floor is one
    resident warp per warp scheduler of the profile (fewer leave issue slots idle on every memory wait)."""
    floor_warps = hw.warp_schedulers_per_sm if floor_warps is None else floor_warps
    if res.spill_bytes and not getattr(budget, "allow_spills", False):
        return f"spills {res.spill_bytes} B ({res.source}) and budget.allow_spills is false"
    limit = min(getattr(budget, "max_registers", 255), hw.registers_per_thread_max)
    if res.registers > limit:
        return f"{res.registers} registers > {limit} ({hw.cite('registers_per_thread_max')}, budget)"
    if res.smem_bytes > hw.smem_per_block_bytes:
        return f"{res.smem_bytes} B smem > {hw.cite('smem_per_block_bytes')}"
    occ = occupancy(res, hw)
    if occ.ctas_per_sm < 1:
        return f"no CTA fits an SM ({occ.limiter}; {hw.cite('smem_per_sm_bytes', 'registers_per_sm')})"
    if occ.warps_per_sm < floor_warps:
        return (f"occupancy {occ.warps_per_sm} warps/SM < floor {floor_warps} ({occ.ctas_per_sm} CTA/SM, "
                f"limited by {occ.limiter})")
    return None


def rank(items: Sequence[tuple[str, Estimate]]) -> list[str]:
    """Ids by estimated time, fastest first (stable for ties: the agents' order decides)."""
    return [i for i, _ in sorted(items, key=lambda t: t[1].us)]


def step_ns_from_record(config: Mapping[str, Any], res: Resources, hw: Any, w: Workload, us: float) -> float:
    """The per-step time a measured call implies: (measured − launch latency) / (waves × steps)."""
    occ = occupancy(res, hw)
    n_chains, steps = chains(config, w)
    waves = -(-n_chains // (hw.sm_count * max(occ.ctas_per_sm, 1)))
    return max(us - hw.launch_latency_us, 0.0) * 1e3 / (waves * steps)


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties get their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(predicted: Sequence[float], measured: Sequence[float]) -> float | None:
    """Spearman rank correlation of two equally long sequences (Pearson on average ranks); None when
    fewer than two pairs or either side is constant (the correlation is undefined)."""
    if len(predicted) != len(measured):
        raise ValueError(f"spearman: {len(predicted)} predictions vs {len(measured)} measurements")
    if len(predicted) < 2:
        return None
    a, b = _ranks(predicted), _ranks(measured)
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va, vb = sum((x - ma) ** 2 for x in a), sum((y - mb) ** 2 for y in b)
    if va == 0 or vb == 0:
        return None
    return cov / math.sqrt(va * vb)


def spearman_of_record(record: Mapping[str, Any]) -> dict[str, float | None]:
    """Per route of a tuning record: Spearman between the model's estimate and the measured time of the
    candidates that have both."""
    out: dict[str, float | None] = {}
    for key, route in record.get("routes", {}).items():
        pairs = [(c["model_us"], c["us"]) for c in route.get("candidates", {}).values()
                 if c.get("us") is not None and c.get("model_us") is not None]
        out[key] = spearman([p for p, _ in pairs], [m for _, m in pairs])
    return out
