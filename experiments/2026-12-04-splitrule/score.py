"""Score kda2.plan.smem.split_segments (the library's rule) against grid.py results: per shape the rule's segments,
its time against the fastest forced split and against unsplit. An unmeasured count takes the nearest measured one
below. Usage: python score.py WAVE FOLD_PER_CHAIN GRID.json [...]   (H200, K = V = 128, block_v 64: 132 4)"""
import json
import math
import sys

from kda2.plan.smem import split_segments

wave, per_chain = int(sys.argv[1]), int(sys.argv[2])
logs, worst, n_slow = [], (0.0, ""), 0
for path in sys.argv[3:]:
    for r in json.load(open(path))["rows"]:
        ms = {int(k): v for k, v in r["ms"].items() if k != "None" and isinstance(v, float)}
        s = split_segments(r["chains"] * per_chain, wave, r["chunks"])
        su = s
        while su not in ms:
            su -= 1
        t, best = ms[su], min(ms.values())
        sb = min(ms, key=ms.get)
        logs.append(math.log(t / best))
        worst = max(worst, (t / best, r["shape"]))
        n_slow += t > 1.01 * ms[1]
        lib = r["ms"].get("None")
        print(f"{r['shape']:28s} chains {r['chains']:2d} chunks {r['chunks']:3d} | rule s={s:2d} {t:.4f} | best s={sb:2d} "
              f"{best:.4f} | unsplit {ms[1]:.4f} | library {lib} | rule/best {t / best:.3f} rule/unsplit {t / ms[1]:.3f}")
print(f"geomean rule/best {math.exp(sum(logs) / len(logs)):.4f}, worst {worst[0]:.3f} ({worst[1].split()[0]}), "
      f"{n_slow} of {len(logs)} shapes > 1 % slower than unsplit")
