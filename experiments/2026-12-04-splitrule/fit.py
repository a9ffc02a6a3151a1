"""Score split rules against a grid.py result: for each shape the rule's segments, its time against the best forced
split and against unsplit. Usage: python fit.py GRID.json [GRID.json ...]"""
import itertools
import json
import math
import sys

WAVE, FOLD_PER_CHAIN = 132, 4   # H200, the routed bv64 wgmma pass: one state CTA per SM, (K + V) / 64 fold CTAs a chain


def rows():
    for f in sys.argv[1:]:
        for r in json.load(open(f))["rows"]:
            ms = {int(k): v for k, v in r["ms"].items() if k != "None" and isinstance(v, float)}
            yield r, ms


def time_at(ms, s):
    while s not in ms:   # an unmeasured count: the nearest measured one below
        s -= 1
    return ms[s], s


def rule(chains, nch, f, m, smin=3, smax=16):
    s = min(int(f * WAVE / (chains * FOLD_PER_CHAIN)), nch // m, smax)
    return s if s >= smin else 1


def score(f, m, verbose=False):
    logs, worst, losses = [], (0, ""), 0
    for r, ms in rows():
        s = rule(r["chains"], r["chunks"], f, m)
        t, s_used = time_at(ms, s)
        best = min(ms.values())
        logs.append(math.log(t / best))
        worst = max(worst, (t / best, r["shape"]))
        losses += t > ms[1] * 1.01
        if verbose:
            sb = min(ms, key=ms.get)
            print(f"{r['shape']:28s} ch {r['chains']:2d} nch {r['chunks']:3d}  rule s={s:2d} ({s_used}) {t:.4f}  "
                  f"best s={sb:2d} {best:.4f}  unsplit {ms[1]:.4f}  rule/best {t / best:.3f}  rule/unsplit {t / ms[1]:.3f}")
    return math.exp(sum(logs) / len(logs)), worst, losses


if __name__ == "__main__":
    print("f     m   geomean rule/best  worst  losses>1%")
    for f, m in itertools.product((1.0, 1.25, 1.5, 2.0), (8, 10, 12, 16, 24, 32)):
        g, w, l = score(f, m)
        print(f"{f:4.2f} {m:3d}  {g:.4f}  {w[0]:.3f} {w[1]:28s} {l}")
