"""A vendored bundle on a GPU: each built spec is vendored (`kda2 vendor`), verified (`kda2 verify`), then loaded
and called in a fresh process that cannot import any build-time package, and its outputs are compared with the
float64 reference (≤ 5e-3 relative L2 of o and the final state, the bar of every GPU test). The CPU side
(layout, tamper checks, runtime-only venv without a GPU) is tests/test_vendor.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 5e-3

pytestmark = pytest.mark.gpu

# Runs in the child: build packages are made unimportable before kda2 is imported.
CHILD = textwrap.dedent("""
    import json, sys
    for m in ("SCons", "jinja2", "tvm", "pydantic", "yaml"):
        sys.modules[m] = None
    import numpy as np, torch, kda2
    from kda2.reference import chunk_kda_ref, recurrent_kda_ref, relative_l2
    lib = kda2.load(sys.argv[1])
    seed, out = int(sys.argv[2]), {"spec": lib.spec, "arch": lib.arch, "family": lib.family, "cases": []}
    g = torch.Generator().manual_seed(seed)
    N, T, H = 2, (1 if lib.family == "recurrent" else 150), 2
    K, V = lib.k, lib.v
    for v_first in sorted({lay == "v_first" for lay in lib.features.state_layouts}):
        r = lambda *s: torch.randn(*s, generator=g)
        q, k, v = (r(N, T, H, K).bfloat16(), r(N, T, H, K).bfloat16(), r(N, T, H, V).bfloat16())
        graw = r(N, T, H, K).bfloat16()
        beta = r(N, T, H).bfloat16()
        A_log, dt_bias = (r(H) * 0.5).float(), r(H * K).float()
        h0 = r(N, H, *((V, K) if v_first else (K, V))).float()
        kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                  A_log=A_log, dt_bias=dt_bias, initial_state=h0, output_final_state=True, state_v_first=v_first)
        dev = {k2: (x.cuda() if torch.is_tensor(x) else x) for k2, x in kw.items()}
        fn = kda2.chunk_kda if lib.family == "chunk" else kda2.fused_recurrent_kda
        o, ht = fn(q.cuda(), k.cuda(), v.cuda(), graw.cuda(), beta.cuda(), library=lib, **dev)
        torch.cuda.synchronize()
        ref = chunk_kda_ref if lib.family == "chunk" else recurrent_kda_ref
        o_ref, ht_ref = ref(q.float().numpy(), k.float().numpy(), v.float().numpy(), graw.float().numpy(),
                            beta.float().numpy(), **{k2: (x.numpy() if torch.is_tensor(x) else x) for k2, x in kw.items()})
        out["cases"].append({"v_first": v_first, "o": relative_l2(o.float().cpu().numpy(), o_ref),
                             "state": relative_l2(ht.float().cpu().numpy(), ht_ref)})
    print(json.dumps(out))
""")


def _specs() -> list[str]:
    return sorted({p.parent.parent.name for p in (ROOT / "build").glob("*/*/manifest.json")})


@pytest.mark.parametrize("spec", _specs() or ["<no build>"])
def test_vendored_bundle_runs_and_matches_the_reference(spec, torch_cuda, tmp_path, seed, request):
    if spec == "<no build>":
        pytest.fail("nothing built under build/: carry the build to the GPU host")
    from kda2.runtime.device import arch_preference, current_capability
    from kda2.tools.vendor import vendor, verify_bundle

    built = sorted(p.parent.name for p in (ROOT / "build" / spec).glob("*/manifest.json"))
    usable = [a for a in arch_preference(current_capability()) if a in built]
    if not usable:
        pytest.fail(f"{spec}: built for {built}, nothing this GPU runs")
    bundle = tmp_path / "bundle"
    vendor(spec, bundle, archs=[usable[0]], build_dir=ROOT / "build", rules_dir=ROOT / "rules", log=lambda *a: None)
    print(verify_bundle(bundle))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, "-c", CHILD, str(bundle / spec), str(seed)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    print(json.dumps(res))
    assert res["cases"], res
    for c in res["cases"]:
        assert c["o"] <= TOLERANCE and c["state"] <= TOLERANCE, res
    out_dir = request.config.getoption("--results-dir", default=None)
    if out_dir:
        path = Path(out_dir) / "bundle_gpu.jsonl"
        with path.open("a") as f:
            f.write(json.dumps(res) + "\n")
