"""Every variant of a chunk library, launched by index (plain and overlapped) on fixed random inputs; save the
outputs, or compare two saves bit for bit by variant id.

Why: the state pass's rewrite (descriptors by one add, o staged by stmatrix, v_new formed while O's products run)
keeps every operation and the order of every sum, so each variant's o and ht must equal the old build's bits.
usage: python same_bits_variants.py run LIBRARY OUT.pt | python same_bits_variants.py cmp A.pt B.pt
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "gpu"))
from test_chunk_overlap_gpu import CASES, _inputs, _launch  # noqa: E402

import kda2  # noqa: E402
from kda2.runtime import abi  # noqa: E402


def run(path, out):
    lib = kda2.load(path)
    res = {}
    for ci, (name, N, T, cu, H, HV) in enumerate(CASES):
        for v_first in (False, True):
            x = _inputs(torch, lib, N, T, cu, H, HV, v_first, 1234 + 10 * ci + v_first)
            for v in lib.manifest["variants"]:
                if (v["config"]["state_layout"] == "v_first") != v_first:
                    continue
                for fl, tag in ((abi.FLAG_CHUNK_NO_OVERLAP, "plain"), (abi.FLAG_CHUNK_OVERLAP, "overlap")):
                    o, ht = _launch(torch, lib, v["index"], x, fl)
                    res[f"{name}/{v['id']}/{tag}"] = (o.cpu(), ht.cpu())
    torch.save(res, out)
    print(f"{path}: {len(res)} launches saved")


def cmp(a, b):
    A, B = torch.load(a), torch.load(b)
    bad = 0
    for k in sorted(set(A) | set(B)):
        if k not in A or k not in B:
            print(f"MISSING {k}")
            bad += 1
            continue
        same = all(torch.equal(x.view(torch.int16) if x.dtype != torch.float32 else x.view(torch.int32),
                               y.view(torch.int16) if y.dtype != torch.float32 else y.view(torch.int32))
                   for x, y in zip(A[k], B[k]))
        print(f"{'identical' if same else 'DIFF'} {k}")
        bad += not same
    print(f"{len(A)} vs {len(B)} launches, {bad} differ or missing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(run(*sys.argv[2:]) if sys.argv[1] == "run" else cmp(*sys.argv[2:]))
