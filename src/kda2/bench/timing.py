"""GPU timing primitives (torch CUDA events), shared by every benchmark.

Kernel time: each timed call is preceded by a GPU spin (`torch.cuda._sleep`) long enough for the CPU
to enqueue the call behind it, so the events bracket the GPU work alone and not Python's launch cost;
inputs rotate over several sets so that repeats are not served from L2. Graph time: the same calls
captured in one CUDA graph and replayed. Wall time: what a Python caller sees per call.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class Stats:
    median_ms: float
    p10_ms: float
    p90_ms: float
    n: int

    @classmethod
    def of(cls, samples_ms: list[float]) -> "Stats":
        s = sorted(samples_ms)
        pick = lambda f: s[min(len(s) - 1, int(f * len(s)))]  # noqa: E731
        return cls(statistics.median(s), pick(0.1), pick(0.9), len(s))


class Timer:
    """Holds the calibration (GPU spin rate) for one device."""

    def __init__(self, torch):
        self.torch = torch
        self.has_sleep = hasattr(torch.cuda, "_sleep")
        self.cycles_per_us = self._calibrate() if self.has_sleep else 0.0

    def _calibrate(self) -> float:
        torch = self.torch
        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # first launch pays module load
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        torch.cuda.synchronize()
        return cycles / (s.elapsed_time(e) * 1e3)

    def launch_cost_us(self, fn: Callable[[int], object], n_sets: int, calls: int = 30) -> float:
        """CPU time to enqueue one call (no sync inside the loop; the queue absorbs `calls` launches)."""
        torch = self.torch
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(calls):
            fn(i % n_sets)
        dt = (time.perf_counter() - t0) / calls * 1e6
        torch.cuda.synchronize()
        return dt

    def kernel(self, fn: Callable[[int], object], n_sets: int, reps: int, warmup: int = 5) -> Stats:
        """GPU time per call, median over `reps` calls cycling through `n_sets` input sets."""
        torch = self.torch
        for i in range(warmup):
            fn(i % n_sets)
        spin = 0
        if self.has_sleep:
            spin = int((3 * self.launch_cost_us(fn, n_sets) + 20) * self.cycles_per_us)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        torch.cuda.synchronize()
        for i in range(reps):
            if spin:
                torch.cuda._sleep(spin)
            starts[i].record()
            fn(i % n_sets)
            ends[i].record()
        torch.cuda.synchronize()
        return Stats.of([s.elapsed_time(e) for s, e in zip(starts, ends)])

    def graph(self, fn: Callable[[int], object], n_sets: int, replays: int = 20) -> Stats:
        """Per-call time of `n_sets` calls captured in one CUDA graph, median over replays."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(n_sets):
                fn(i)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(n_sets):
                fn(i)
        g.replay()
        torch.cuda.synchronize()
        samples = []
        for _ in range(replays):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            torch.cuda.synchronize()
            samples.append(s.elapsed_time(e) / n_sets)
        del g
        return Stats.of(samples)

    def wall_us(self, fn: Callable[[int], object], n_sets: int, calls: int = 2000, rounds: int = 5) -> float:
        """Wall time per call from Python, synchronising only at the end of a round; median of rounds
        (the host CPU is shared, so single rounds swing by several µs)."""
        torch = self.torch
        for i in range(50):
            fn(i % n_sets)
        torch.cuda.synchronize()
        samples = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for i in range(calls):
                fn(i % n_sets)
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) / calls * 1e6)
        return sorted(samples)[len(samples) // 2]

    def floor_us(self, reps: int = 200) -> float:
        """What this timing charges any kernel: the median event time of a one-element kernel (an in-place add on
        one of eight 4-byte tensors), timed as `kernel` times a call. A call's time includes it; a µs figure of a
        small call is best read against it (3.9 µs on the H200: experiments/2026-12-04-evict, call 3)."""
        torch = self.torch
        xs = [torch.zeros(1, device="cuda") for _ in range(8)]
        return self.kernel(lambda i: xs[i].add_(1), len(xs), reps).median_ms * 1e3

    def copy_bandwidth(self, nbytes: int = 1 << 30, reps: int = 10) -> dict:
        """Device-to-device copy (bytes read + written per second): the practical HBM ceiling."""
        torch = self.torch
        src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
        dst = torch.empty_like(src)
        st = self.kernel(lambda i: dst.copy_(src), 1, reps, warmup=3)
        return {"bytes": 2 * nbytes, "ms_median": st.median_ms, "TBps": 2 * nbytes / (st.median_ms * 1e-3) / 1e12}
