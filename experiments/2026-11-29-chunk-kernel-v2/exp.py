"""Driver: many harness libs in one process. usage: exp.py bench SHAPES lib1 lib2 ... | check lib..."""
import sys, os
# the first session's harness module (bench/results/h200-2026-11-29-chunk/harness/gpu_smoke.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'h200-2026-11-29-chunk', 'harness'))
import gpu_smoke as G
mode, rest = sys.argv[1], sys.argv[2:]
shapes = {'P1': ('P1', 1, 8192, 64, None), 'P2': ('P2', 1, 16384, 32, None), 'P3': ('P3', 8, 2048, 32, None),
          'P4': ('P4', 1, 8192, 64, [0, 1300, 1847, 3895, 4858, 5129, 8192]), 'P5': ('P5', 1, 65536, 32, None),
          'P6': ('P6', 2, 2048, 8, None)}
if mode in ('bench', 'benchlb'):   # benchlb: the lower-bound gate
    want = rest[0].split(',')
    for L in rest[1:]:
        for nm in want:
            G.bench(L, None, shapes[nm], gate='lower_bound' if mode == 'benchlb' else 'softplus')
else:
    for L in rest:
        vf = 'k_first' not in L
        G.check(L, 2, 200, 2, 4, 'softplus', 2, v_first=vf)
        G.check(L, 1, 1000, 2, 2, 'softplus', 3, cu=[0, 15, 100, 300, 1000], v_first=vf)
        G.check(L, 1, 500, 2, 2, 'lower_bound', 4, v_first=vf)
        G.check(L, 1, 300, 1, 2, 'precomputed', 5, strong=True, v_first=vf)
        G.check(L, 1, 300, 1, 2, 'softplus', 6, strong=True, v_first=vf, use_h0=False)
        G.check(L, 1, 64, 1, 1, 'precomputed', 1, use_h0=False, v_first=vf)
        G.check(L, 1, 160, 1, 1, 'precomputed', 7, beta_mode=0.999, v_first=vf)
        G.check(L, 3, 129, 1, 1, 'softplus', 8, v_first=vf)
