"""Multi-token decode at N = 64 with T = 1, 2, 4, 8 tokens per sequence on the bucket-8 kernels (the M1 routes
forced for every call), so the slope says what each token step costs beside the state's read and write.
usage: python tokens.py OUT_DIR LIBRARY VARIANT_ID [VARIANT_ID]"""
import sys
from pathlib import Path

from kda2.bench import recurrent as rc

out, lib, ids = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
extra = [rc.Shape(f"M1t{t}", "decode", 64, t) for t in (1, 2, 8)]
rc.SHAPES.extend(extra)
sys.exit(rc.run(out, lib, None, ["M1t1", "M1t2", "M1", "M1t8"], False, False, ["tokens.py", *sys.argv[1:]], ids))
