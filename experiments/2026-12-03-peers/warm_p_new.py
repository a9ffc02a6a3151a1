"""FLA 0.6 Triton warm-up for call 3: P1-P6 with the softplus gate at K = 128, and the five chunk accuracy cases new
this session (GVA 4 / 8, bf16 A_log / dt_bias) at K = 128 and 256, one spawned process per option set. A file, not
stdin: spawned workers re-import the main module by path."""
import concurrent.futures as cf
import multiprocessing as mp
import sys

from kda2.bench import fla_warm

if __name__ == "__main__":
    new = [c for c in sys.argv[1].split(",") if c]   # "" (stage call 11): P1-P6 only
    todo = [t for t in fla_warm.tasks("bench") if t[2] == "softplus"]
    todo += [("case", c, k) for k in (128, 256) for c in new]
    with cf.ProcessPoolExecutor(max_workers=16, mp_context=mp.get_context("spawn")) as pool:
        for f in cf.as_completed([pool.submit(fla_warm.run_task, t) for t in todo]):
            print(*f.result(), flush=True)
