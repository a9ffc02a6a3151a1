"""Decode and multi-token decode at more sequences than the benchmark's rows (N = 64, 128, 256, 512; T = 1 and 4):
how much of a call is a fixed cost (launch, ramp, last wave) rather than bytes. The benchmark's own timing and byte
count (kda2.bench.recurrent), its shape list extended. Usage: python scale.py OUT LIBRARY"""
import sys
from pathlib import Path

from kda2.bench import recurrent as rb

extra = [rb.Shape(f"X{t}n{n}", "decode", n, t) for t in (1, 4) for n in (128, 512)] + [rb.Shape("M3", "decode", 256, 4)]
rb.SHAPES.extend(extra)
ids = ["D2", "X1n128", "D3", "X1n512", "M1", "X4n128", "M3", "X4n512"]
sys.exit(rb.run(Path(sys.argv[1]), sys.argv[2], None, ids, False, False, ["scale.py", *sys.argv[1:]]))
