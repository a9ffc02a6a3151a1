"""Warm FLA's Triton cache for the chunk benchmark's P1-P6 softplus sets at K = V = 64 and 256 (kda2.bench.fla_warm's
option sets, one process each; a file, not stdin, so the spawned workers can import it)."""
import concurrent.futures as cf
import multiprocessing as mp

from kda2.bench import fla_warm

if __name__ == "__main__":
    todo = [t for t in fla_warm.tasks("bench", (64, 256)) if t[2] == "softplus"]
    with cf.ProcessPoolExecutor(max_workers=len(todo), mp_context=mp.get_context("spawn")) as pool:
        for f in cf.as_completed([pool.submit(fla_warm.run_task, t) for t in todo]):
            print(*f.result(), flush=True)
