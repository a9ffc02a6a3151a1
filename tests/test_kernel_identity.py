"""Kernel identity = what changes the code (docs/DESIGN.md §2.2): across everything built under build/, no two
kernels with different ids hold the same machine code (names stripped). Reads the tree the README's first
command (`scons`) produced, so it runs after the build in CI; cuobjdump comes from the test extras."""
from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kda2.compile.sass import find_tool

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.compile


def machine_code(cubin: Path, vid: str) -> str:
    import subprocess

    cuobjdump = find_tool("cuobjdump")
    assert cuobjdump, "cuobjdump missing: pip install -e '.[test]'"
    out = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    # the kernel's symbol carries its id; everything else is the code
    return re.sub(r"kda2_\w+?_" + vid, "KERNEL", out.replace(vid, "ID"))


def test_no_two_kernels_share_machine_code():
    manifests = sorted((REPO / "build").glob("*/*/manifest.json"))
    if not manifests:
        pytest.fail(f"nothing built under {REPO / 'build'}: run `scons` first (the README's first command)")
    kernels: dict[str, Path] = {}
    for path in manifests:
        for v in json.loads(path.read_text())["variants"]:
            kernels.setdefault(v["id"], path.parent / v["cubin"])
    by_code: dict[str, list[str]] = defaultdict(list)
    items = sorted(kernels.items())
    # one cuobjdump per cubin, as many at once as there are CPUs (a CANDIDATES=all build holds some 300)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        codes = list(pool.map(lambda item: machine_code(item[1], item[0]), items))
    for (vid, cubin), code in zip(items, codes):
        by_code[code].append(f"{cubin.parent.parent.name}/{cubin.name}")
    dupes = [names for names in by_code.values() if len(names) > 1]
    print(f"\n[kernel identity] {len(kernels)} kernels in {len(manifests)} libraries, "
          f"{len(by_code)} distinct machine codes")
    assert dupes == [], f"kernels with different ids but the same machine code: {dupes}"
