"""Warm FLA's Triton cache for the chunk benchmark's P1-P6 softplus sets at K = V = 128 (one process each)."""
import concurrent.futures as cf
import multiprocessing as mp

from kda2.bench import fla_warm

if __name__ == "__main__":
    todo = [t for t in fla_warm.tasks("bench", (128,)) if t[2] == "softplus"]
    with cf.ProcessPoolExecutor(max_workers=len(todo), mp_context=mp.get_context("spawn")) as pool:
        for f in cf.as_completed([pool.submit(fla_warm.run_task, t) for t in todo]):
            print(*f.result(), flush=True)
