"""The split rule's fewest chunks per segment at K = 64, fitted on a grid of forced splits (call 3's grid64_new.json;
run here, no GPU): for each candidate minimum, the library's choice by kda2.plan.smem's arithmetic with that minimum,
its time read as the grid's forced split of that size (or the library's own where the choice is unchanged), and how
far that is from each shape's fastest split. The wave (3 state CTAs a SM) and the fold's 2 CTAs a chain are the ones
that reproduce every choice the library made in the grid.
Usage: python fit_split.py GRID.json"""
import json
import math
import re
import sys

from kda2.plan.smem import SPLIT_MAX_SEGMENTS, SPLIT_MIN_SEGMENTS, SPLIT_SEGMENT_STEPS, SPLIT_SPILL_MIN_CHUNKS

WAVE, FOLD_PER_CHAIN = 3 * 132, 2


def choice(fold: int, chunks: int, min_chunks: int) -> int:
    s = min(-(-WAVE // fold), math.isqrt(2 * chunks // SPLIT_SEGMENT_STEPS), chunks // min_chunks, SPLIT_MAX_SEGMENTS)
    if fold * s > WAVE and chunks // s < SPLIT_SPILL_MIN_CHUNKS:
        s = min(s, WAVE // fold)
    return s if s >= SPLIT_MIN_SEGMENTS else 1


rows = json.load(open(sys.argv[1]))["rows"]
for mc in (4, 6, 8, 10, 12):
    offs, slower, unknown = [], 0, 0
    for r in rows:
        B, T, H = map(int, re.match(r"B(\d+)T(\d+)H(\d+)", r["shape"]).groups())
        ms = r["ms"]
        s = choice(B * H * FOLD_PER_CHAIN, T // 64, mc)
        t = ms["None"] if s == r["chosen"] else ms.get(str(s))
        if t is None:
            unknown += 1
            continue
        offs.append(t / min(v for k, v in ms.items() if k != "None") - 1)
        slower += t > ms["1"] * 1.005
    print(f"min chunks {mc:2d}: {100 * sum(offs) / len(offs):.1f} % off the fastest on average, at most "
          f"{100 * max(offs):.1f} %, {slower} slower than unsplit, {unknown} not timed ({len(offs)} shapes)")
