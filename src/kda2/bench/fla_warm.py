"""Fill the Triton cache with FLA 0.6's chunk_kda kernels for every option set the chunk GPU tests and the
chunk benchmark use, one process per option set, in parallel.

Why: FLA compiles (and autotunes) its Triton kernels on first use, measured at over 100 s per option set on
the H200 host. Serially that is most of a 30-minute device session; across processes the compiles overlap.
Run it on the GPU host before the tests and the benchmark, with TRITON_CACHE_DIR pointing at the cache they
will use (scripts/gpu_check.sh does that; its step `fla-warm`). Timings taken while it runs are meaningless.

    python -m kda2.bench.fla_warm [--jobs N] [--only cases|bench|k3|f] [--cases ID,ID] [--gates G,G]
                                  [--head-dims 64,128,256]
                                  (k3, f: the benchmark's optional K1-K10 and F1-F4 sets; --cases: a subset of the
                                   tests' cases, alone or beside --only bench|k3|f; --gates: the benchmark sets of
                                   these gates only;
                                   --head-dims: K = V of the option sets, default 128)

Exit status: 0 when every option set ran, 1 when any failed (each failure is printed; FLA rejecting an
option set is also printed and is what the accuracy table records as "rejected").
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import os
import sys
import time
import traceback
from pathlib import Path

def tasks(only: str | None, head_dims: tuple[int, ...] = (128,)) -> list[tuple]:
    from kda2.bench.cases import CASES

    from kda2.bench.chunk import FEW_CHAIN_SHAPES, GATES, K3_SHAPES, SHAPES, gates_for

    out: list[tuple] = []
    for k in head_dims:
        if only in (None, "cases"):
            out += [("case", c.id, k) for c in CASES]
        if only in (None, "bench"):
            out += [("bench", s.id, g, k) for s in SHAPES for g in GATES]
        if only == "k3":  # the benchmark's optional k3 set (cuDNN-FE's shapes), on request only
            out += [("bench", s.id, g, k) for s in K3_SHAPES for g in gates_for(s, None)]
        if only == "f":  # the optional few-chain set, on request only
            out += [("bench", s.id, g, k) for s in FEW_CHAIN_SHAPES for g in gates_for(s, None)]
    return out


def run_task(task: tuple) -> tuple[tuple, str, float]:
    """One option set through FLA (in a fresh worker process). Returns (task, status, seconds)."""
    os.environ.setdefault("FLA_FLASH_KDA", "0")
    t0 = time.perf_counter()
    try:
        import torch
        from fla.ops.kda import chunk_kda as fla

        with torch.no_grad():
            if task[0] == "case":
                from kda2.bench.cases import CASES, draw, options, to_torch

                c = next(c for c in CASES if c.id == task[1])
                x = to_torch(torch, draw(c, 0, task[2], task[2]), c)
                fla(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["initial_state"],
                    cu_seqlens=x["cu_seqlens"], cu_seqlens_cpu=x["cu_seqlens_cpu"], A_log=x["A_log"],
                    dt_bias=x["dt_bias"], output_final_state=c.final, **options(c))
            else:
                from kda2.bench.chunk import ALL_SHAPES, FLA, at_head_dim, make_sets

                k = task[3]
                s = at_head_dim(next(s for s in ALL_SHAPES if s.id == task[1]), k)
                sets, shared = make_sets(torch, s, 1, True, 0, K=k, V=k)
                FLA().call(sets, shared, task[2], True)(0)
            torch.cuda.synchronize()
        status = "ok"
    except Exception as exc:  # noqa: BLE001 - reported per option set, the others go on
        status = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
        traceback.print_exc()
    return task, status, time.perf_counter() - t0


def select(only: str | None, cases: str | None, gates: str | None, head_dims: str) -> list[tuple]:
    """The option sets a command line asks for (ValueError naming what is wrong and what is allowed)."""
    try:
        dims = tuple(int(k) for k in head_dims.split(","))
    except ValueError:
        raise ValueError(f"--head-dims: expected a comma list of integers, got {head_dims!r}") from None
    if not dims or set(dims) - {64, 128, 256}:
        raise ValueError(f"--head-dims: allowed 64, 128, 256, got {head_dims}")
    from kda2.bench.chunk import GATES

    keep = set(gates.split(",")) if gates else None
    if keep is not None and keep - set(GATES):
        raise ValueError(f"--gates: allowed {', '.join(GATES)}, got {gates}")
    # named cases beside the benchmark's sets: one wave of processes for a device call that needs both
    beside = tasks(only, dims) if cases and only in ("bench", "k3", "f") else []
    todo = tasks("cases" if cases else only, dims)
    if cases:
        want = cases.split(",")
        known = {t[1] for t in todo}
        unknown = [c for c in want if c not in known]
        if unknown:
            raise ValueError(f"--cases: unknown case id(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        todo = [t for t in todo if t[1] in want]
    todo += beside
    if keep is not None:
        todo = [t for t in todo if t[0] != "bench" or t[2] in keep]
    return todo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2),
                    help="worker processes (default: CPUs - 2)")
    ap.add_argument("--only", choices=("cases", "bench", "k3", "f"),
                    help="warm only the tests' or only the benchmark's P1-P6 sets, or only its k3 or f set")
    ap.add_argument("--cases", metavar="ID,ID",
                    help="only these accuracy cases (the ids the GPU tests' --fla-cases takes); alone it implies "
                         "--only cases, with --only bench|k3|f it warms those sets too")
    ap.add_argument("--gates", metavar="G,G",
                    help="benchmark sets of these gates only (softplus, lower_bound; default: the sets' own)")
    ap.add_argument("--head-dims", default="128", metavar="K,K",
                    help="K = V of the option sets (comma list of 64, 128, 256; default 128)")
    ap.add_argument("--dry-run", action="store_true", help="list the option sets and exit (no FLA, no GPU)")
    args = ap.parse_args(argv)
    try:
        todo = select(args.only, args.cases, args.gates, args.head_dims)
    except ValueError as exc:
        ap.error(str(exc))
    if args.dry_run:
        for t in todo:
            print(" ".join(map(str, t)))
        print(f"fla_warm: {len(todo)} option sets (dry run)")
        return 0
    print(f"fla_warm: {len(todo)} option sets, {args.jobs} processes, TRITON_CACHE_DIR="
          f"{os.environ.get('TRITON_CACHE_DIR', '(Triton default)')}", flush=True)
    t0, failed = time.perf_counter(), 0
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for fut in cf.as_completed([pool.submit(run_task, t) for t in todo]):
            task, status, secs = fut.result()
            failed += status != "ok"
            print(f"  {' '.join(map(str, task)):60s} {secs:7.1f} s  {status}", flush=True)
    print(f"fla_warm: done in {time.perf_counter() - t0:.0f} s, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
