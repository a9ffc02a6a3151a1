"""The README's calls as a user makes them: no `library=`, the default build tree (the default specs build one
library per head-dim pair of each family side by side), so each call finds the library built for its own K and V.
Checked against the fp64 reference in a fresh process (the default libraries are cached per process)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import kda2
    from kda2.reference import recurrent_kda_ref, relative_l2
    from kda2.runtime import loader
    family, seed = sys.argv[1], int(sys.argv[2])
    gen = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, device="cuda")
    f = lambda t: t.double().cpu().numpy()
    found = loader.discover(family=family)
    print(f"BUILT {len(found)}")
    for path in found:
        lib = loader.load(path)
        feats = lib.features
        K, V, H, T = lib.k, lib.v, 2, 100
        q, k, v = r(1, T, H, K).bfloat16(), r(1, T, H, K).bfloat16(), r(1, T, H, V).bfloat16()
        g, beta, A_log, dt = r(1, T, H, K), r(1, T, H), r(H) * 0.5, r(H * K)
        gate = {} if "softplus" in feats.gate_modes else dict(lower_bound=-5.0)
        v_first = "v_first" in feats.state_layouts
        h0 = r(1, H, *((V, K) if v_first else (K, V))) * 0.1
        kw = dict(A_log=A_log, dt_bias=dt, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True,
                  use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, state_v_first=v_first, **gate)
        call = kda2.chunk_kda if family == "chunk" else kda2.fused_recurrent_kda
        o, ht = call(q, k, v, g, beta, **kw)   # no library=: the default for K, V
        torch.cuda.synchronize()
        o_ref, ht_ref = recurrent_kda_ref(f(q), f(k), f(v), f(g), f(beta), **{
            n: (f(x) if isinstance(x, torch.Tensor) else x) for n, x in kw.items()})
        err = max(relative_l2(f(o), o_ref), relative_l2(f(ht), ht_ref))
        print(f"DEFAULT {family} {path.parent.parent.name} K={K} V={V} rel_l2={err:.3e}")
        assert err <= 5e-3, (path, err)
""")


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["chunk", "recurrent"])
def test_calls_without_library_take_the_build_for_their_head_dims(family, torch_cuda, seed):
    env = dict(os.environ, KDA2_BUILD_DIR=os.environ.get("KDA2_BUILD_DIR", str(ROOT / "build")),
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    env.pop("KDA2_LIBRARY", None)  # it would win over the search this test is about
    r = subprocess.run([sys.executable, "-c", SCRIPT, family, str(seed)], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    built = int(r.stdout.split("BUILT ")[1].split()[0])  # one library or several: each call finds its own
    assert built >= 1 and r.stdout.count(f"DEFAULT {family}") == built, r.stdout
