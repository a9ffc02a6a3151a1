"""The static model (kda2.plan.model): occupancy, bytes, roofline, serial chains, pruning, Spearman."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kda2.plan.model import (Resources, Workload, bytes_moved, chains, class_rows, estimate, spare_beside,
                             occupancy, prune_reason, rank, resources_from_ptxas, spearman, spearman_of_record,
                             step_ns_from_record, tensor_flops, workloads)
from kda2.plan.profile import load_profiles

REPO = Path(__file__).resolve().parents[1]
HW = load_profiles(REPO / "profiles")
BUDGET = SimpleNamespace(allow_spills=False, max_registers=255)

CHUNK = {"family": "chunk", "arch": "sm_90a", "k": 128, "v": 128, "state_layout": "k_first", "chunk": 64,
         "block_v": 32, "stages": 2, "gate_modes": ["softplus"]}
REC = {"family": "recurrent", "arch": "sm_90a", "k": 128, "v": 128, "state_layout": "v_first", "prefetch": True,
       "staging": "direct", "k_map": "blocked", "v_per_warp": 8, "lane_cols": 1, "warps": 4, "reduce": "scatter"}


def test_occupancy_limits() -> None:
    h200 = HW["h200"]
    # 128 threads x 128 registers = 16384 per CTA -> 4 per SM by registers
    occ = occupancy(Resources(128, 0, 0, 128, "ptxas"), h200)
    assert (occ.ctas_per_sm, occ.warps_per_sm, occ.limiter) == (4, 16, "registers")
    # registers round up per warp to 256: 129 registers cost like 136
    assert occupancy(Resources(129, 0, 0, 128, "ptxas"), h200).ctas_per_sm == 3
    # the chunk state kernel's 155680 B smem: one CTA per SM on both GPUs (+1 KB reserved per block)
    for name in ("h200", "a100"):
        assert occupancy(Resources(100, 155680, 0, 128, "ptxas"), HW[name]) .ctas_per_sm == 1
    assert occupancy(Resources(32, 0, 0, 1024, "ptxas"), h200).limiter == "threads"


def test_spare_beside_is_the_overlaps_fit() -> None:
    """One prep and one state CTA on one SM (the overlap's condition): shared memory with both reservations, registers
    in 256-register units per warp, threads; the figures of the Kimi chunk build (prep 124 registers, 105728 + 16 B)."""
    h200 = HW["h200"]
    prep = Resources(124, 105728 + 16, 0, 256, "ptxas")
    # the 64-column two-stage wgmma pass (204 registers, 125472 B): 233472 - 105744 - 125472 - 2 * 1024 = 208 B left;
    # registers 8 warps x 4096 + 4 x 6656
    assert spare_beside(prep, Resources(204, 125472, 0, 128, "ptxas"), h200) == {
        "smem": 208, "registers": 65536 - 8 * 4096 - 4 * 6656, "threads": 2048 - 384}
    # the 128-column one (two warpgroups, 134688 B) does not fit: smem and registers over
    over = spare_beside(prep, Resources(204, 134688, 0, 256, "ptxas"), h200)
    assert over["smem"] == 233472 - 105744 - 134688 - 2048 < 0 and over["registers"] < 0 and over["threads"] > 0


def test_prune_reasons() -> None:
    h200, a100 = HW["h200"], HW["a100"]
    ok = Resources(128, 0, 0, 128, "ptxas")
    assert prune_reason(REC, ok, h200, BUDGET) is None
    assert "spills 64 B" in prune_reason(REC, Resources(128, 0, 64, 128, "ptxas"), h200, BUDGET)
    assert prune_reason(REC, Resources(128, 0, 64, 128, "ptxas"), h200,
                        SimpleNamespace(allow_spills=True, max_registers=255)) is None
    assert "200 registers > 128" in prune_reason(REC, Resources(200, 0, 0, 128, "ptxas"), h200,
                                                 SimpleNamespace(allow_spills=False, max_registers=128))
    why = prune_reason(CHUNK, Resources(100, 195616, 0, 256, "ptxas"), a100, BUDGET)
    assert "195616 B smem > profile a100" in why and "smem_per_block_bytes=166912" in why
    assert prune_reason(CHUNK, Resources(100, 195616, 0, 256, "ptxas"), h200, BUDGET) is None
    # one warp of 255 registers at 1 KB smem: 8 CTAs by registers... but a 1-warp CTA with a 200 KB tile
    # fits once per SM: 1 warp per SM is below the floor
    why = prune_reason(REC, Resources(64, 200000, 0, 32, "ptxas"), h200, BUDGET)
    assert f"floor {h200.warp_schedulers_per_sm}" in why and "limited by smem" in why


def test_bytes_and_chains() -> None:
    w = Workload(1, 1, 32)
    # decode: the fp32 state read and written dominates
    assert bytes_moved(REC, w) >= 2 * 32 * 128 * 128 * 4
    assert chains(REC, w) == (32 * 4, 1)                      # V / (8 x 4) = 4 tiles per head
    assert chains(CHUNK, Workload(1, 65536, 32)) == (128, 1024)
    assert bytes_moved({**CHUNK, "block_v": 32}, Workload(1, 8192, 32)) > bytes_moved({**CHUNK, "block_v": 64},
                                                                                     Workload(1, 8192, 32))


def test_estimate_bounds_and_waves() -> None:
    h200, a100 = HW["h200"], HW["a100"]
    res = Resources(100, 155680, 0, 128, "ptxas")
    long = Workload(1, 65536, 32)
    e200, e100 = estimate(CHUNK, res, h200, long, step_ns=4000), estimate(CHUNK, res, a100, long, step_ns=4000)
    # 128 chains: one wave on 132 SMs, two on 108: the serial chain doubles
    assert (e200.waves, e100.waves) == (1, 2) and e200.bound == e100.bound == "serial"
    assert e100.serial_us == pytest.approx(2 * e200.serial_us)
    assert e200.us == pytest.approx(h200.launch_latency_us + 1024 * 4.0)
    decode = estimate(REC, Resources(100, 0, 0, 128, "ptxas"), h200, Workload(256, 1, 32))
    assert decode.bound == "bandwidth" and decode.us > decode.roofline_us
    assert rank([("slow", e100), ("fast", e200)]) == ["fast", "slow"]


def test_step_from_a_record_reproduces_the_measurement() -> None:
    res, w = Resources(100, 155680, 0, 128, "ptxas"), Workload(1, 65536, 32)
    step = step_ns_from_record(CHUNK, res, HW["a100"], w, us=9000.0)
    assert estimate(CHUNK, res, HW["a100"], w, step_ns=step).us == pytest.approx(9000.0)


def test_resources_from_ptxas_takes_the_largest_kernel() -> None:
    res = resources_from_ptxas(CHUNK, {"prep": {"registers": 90, "smem": 0, "spill_stores": 0, "spill_loads": 0},
                                       "state": {"registers": 168, "smem": 16, "spill_stores": 8, "spill_loads": 8}},
                               dynamic_smem=155680)
    assert (res.registers, res.smem_bytes, res.spill_bytes, res.threads) == (168, 155696, 16, 128)


def test_workloads_first_class_ranks_the_bucket() -> None:
    assert [w.name for w in workloads("recurrent", 1)] == ["decode-n256", "decode-n64", "decode-n1"]
    assert workloads("recurrent", 1024)[0].as_dict() == {"N": 8, "T": 256, "H": 32, "class": "prefill-n8"}
    assert [(w.N, w.T) for w in (workloads("chunk", b)[0] for b in (2048, 8192, 65536))] == \
        [(8, 2048), (2, 8192), (1, 65536)]


@pytest.mark.parametrize("bucket", [4096, 8192])
def test_the_wide_class_is_p4s_uneven_packing(bucket: int) -> None:
    """P4's class is P4's packing (so a twin is timed on the two kernels the library runs P4 on), within the bucket;
    the model sizes it by its own tokens and chunks, not N × its longest."""
    from kda2.bench.chunk import SHAPES
    from kda2.plan.smem import fused_takes

    w = workloads("chunk", bucket)[-1]
    p4 = next(s for s in SHAPES if s.id == "P4")
    assert w.lengths == p4.seqlens and w.H == p4.H and w.T == max(w.lengths) <= bucket
    assert not fused_takes(w.T, w.N, w.tokens, varlen=True)
    assert fused_takes(workloads("chunk", 2048)[0].T, 8, 8 * 2048, varlen=False)
    assert w.tokens == sum(p4.seqlens) < w.N * w.T
    assert w.chunks(64) == sum(-(-n // 64) for n in p4.seqlens)
    assert tensor_flops(CHUNK, w) < tensor_flops(CHUNK, Workload(w.N, w.T, w.H))
    assert bytes_moved(CHUNK, w) < bytes_moved(CHUNK, Workload(w.N, w.T, w.H))
    small = workloads("chunk", 3000)[-1]     # a bucket shorter than P4's longest prompt: scaled to fit
    assert small.T <= 3000 and small.N == len(p4.seqlens)


@pytest.mark.parametrize("family,bucket", [("recurrent", 1), ("recurrent", 8), ("recurrent", 1024),
                                           ("chunk", 2048), ("chunk", 8192), ("chunk", 65536)])
def test_class_rows_partition_the_chains(family: str, bucket: int) -> None:
    rows = class_rows(family, bucket)
    assert rows[0][1] == 0  # every call has a row
    assert {w.name for w, _ in rows} == {w.name for w in workloads(family, bucket)}
    for (lo, m_lo), (hi, m_hi) in zip(rows, rows[1:]):
        # each class's own shape routes to its own row, and the boundary lies between neighbours
        assert lo.chains < m_hi <= hi.chains and m_lo < m_hi
    for w, _ in rows:
        assert max((r for r in rows if r[1] <= w.chains), key=lambda r: r[1])[0] == w


def test_class_rows_split_the_p_shapes() -> None:
    """P3 and P6 share the 2048 bucket but not a class; P1 and P4 likewise at 8192 (DESIGN §1.1)."""
    def klass(bucket: int, chains: int) -> str:
        return max((r for r in class_rows("chunk", bucket) if r[1] <= chains), key=lambda r: r[1])[0].name

    assert klass(2048, 8 * 32) != klass(2048, 2 * 8)
    assert klass(8192, 1 * 64) != klass(8192, 6 * 64)
    assert klass(65536, 32) == workloads("chunk", 65536)[0].name


def test_spearman() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    # ties take their average rank: ranks (1.5, 1.5, 3) vs (1, 2, 3) -> 0.866
    assert spearman([5, 5, 9], [1, 2, 3]) == pytest.approx(0.8660254, rel=1e-6)
    assert spearman([1], [2]) is None and spearman([1, 1], [2, 3]) is None
    with pytest.raises(ValueError, match="2 predictions vs 3"):
        spearman([1, 2], [1, 2, 3])
    record = {"routes": {"k_first:1": {"candidates": {
        "a": {"model_us": 1.0, "us": 5.0}, "b": {"model_us": 2.0, "us": 4.0}, "c": {"model_us": 3.0, "us": 3.0},
        "d": {"model_us": 0.5, "us": None, "pruned": "spills"}}}}}
    assert spearman_of_record(record)["k_first:1"] == pytest.approx(-1.0)


def test_register_floor_is_below_the_estimate_and_keeps_the_butterfly_buffer_beside_a_prefetch() -> None:
    """The occupancy agent's floor (what launch bounds may squeeze a kernel to) never exceeds the estimate of
    its unbounded use; for k_map=all tiles they are one number. Blocked / strided tiles: the butterfly's
    register buffer counts only beside a prefetched token, the persistent loop always."""
    from kda2.plan.model import PERSISTENT_REGISTERS, registers_estimate, registers_floor

    all_k = {**REC, "state_layout": "k_first", "k_map": "all", "v_per_warp": 16, "lane_cols": 4, "prefetch": False}
    assert registers_floor(all_k) == registers_estimate(all_k)
    for vpw in (4, 8, 16):
        for extra in ({}, {"preload": 8}, {"persistent": True}, {"preload": 8, "persistent": True}):
            cfg = {**REC, "v_per_warp": vpw, **extra}
            scatter, butterfly = ({**cfg, "reduce": r} for r in ("scatter", "butterfly"))
            for c in (scatter, butterfly):
                assert registers_floor(c) <= registers_estimate(c), c
            gap = registers_floor(butterfly) - registers_floor(scatter)
            assert gap == (0 if extra.get("preload") else 2 * vpw + 3), cfg
            if extra.get("persistent"):
                plain = {k: v for k, v in scatter.items() if k != "persistent"}
                assert registers_floor(scatter) == registers_floor(plain) + PERSISTENT_REGISTERS


def test_persistent_estimates_add_the_copy_buffer_and_loop_registers() -> None:
    """A persistent recurrent config (ScheduleAgent) costs its CTA's fp32 state tile of shared memory on top of the
    grid form's, and PERSISTENT_REGISTERS more registers (the tile loop and the copies' addresses); absent is
    false, so the grid form's estimates are unchanged."""
    from kda2.plan.model import PERSISTENT_REGISTERS, registers_estimate, smem_estimate

    all_k = {**REC, "state_layout": "k_first", "k_map": "all", "v_per_warp": 16, "lane_cols": 4, "prefetch": False}
    for grid in (REC, all_k):
        pers = {**grid, "persistent": True}
        assert registers_estimate(pers) == registers_estimate(grid) + PERSISTENT_REGISTERS
        assert smem_estimate(pers) == smem_estimate(grid) + 128 * 4 * grid["v_per_warp"] * 4
        assert registers_estimate({**grid, "persistent": False}) == registers_estimate(grid)
    assert smem_estimate({**REC, "persistent": True}) == 16384 and smem_estimate(REC) == 0
