"""The deployment promise, on the GPU: a process that cannot import SCons, TVM, Jinja, pydantic or
PyYAML (only numpy, cuda-python and torch) loads a built library and computes the right answer."""
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
    BLOCKED = {"SCons", "tvm", "tvm_ffi", "jinja2", "pydantic", "yaml"}
    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked: the runtime must not need it")
    sys.meta_path.insert(0, Blocker())
    import numpy as np, torch
    import kda2
    from kda2.reference import recurrent_kda_ref, relative_l2
    lib = kda2.load(sys.argv[1])
    gen = torch.Generator(device="cuda").manual_seed(int(sys.argv[2]))
    N, H, K, V = 4, 2, lib.k, lib.v
    r = lambda *s: torch.randn(*s, generator=gen, device="cuda")
    q, k, v = r(N, 1, H, K).bfloat16(), r(N, 1, H, K).bfloat16(), r(N, 1, H, V).bfloat16()
    g, beta, A_log, dt = r(N, 1, H, K), r(N, 1, H), r(H) * 0.5, r(H * K)
    v_first = "v_first" in lib.features.state_layouts
    pool = r(N + 2, H, *((V, K) if v_first else (K, V))) * 0.1
    idx = torch.tensor([5, 0, 2, 3], dtype=torch.int32, device="cuda")
    before = pool.double().cpu().numpy()
    mode = dict(lower_bound=-5.0) if "softplus" not in lib.features.gate_modes else {}
    o = kda2.fused_recurrent_kda_pool(q, k, v, g, beta, pool, idx, A_log=A_log, dt_bias=dt,
        use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
        state_v_first=v_first, library=lib, **mode)
    torch.cuda.synchronize()
    f = lambda t: t.double().cpu().numpy()
    o_ref, pool_ref = recurrent_kda_ref(f(q), f(k), f(v), f(g), f(beta), A_log=f(A_log), dt_bias=f(dt),
        initial_state=before, output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
        use_beta_sigmoid_in_kernel=True, state_v_first=v_first, ssm_state_indices=idx.cpu().numpy(), **mode)
    err = max(relative_l2(f(o), o_ref), relative_l2(f(pool), pool_ref))
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(f"ISOLATED rel_l2={err:.3e} loaded_blocked={loaded}")
    assert err <= 5e-3 and not loaded
""")


@pytest.mark.gpu
def test_runtime_runs_without_build_stack(lib, torch_cuda, seed):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(lib.manifest_path), str(seed)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ISOLATED" in r.stdout and "loaded_blocked=[]" in r.stdout, r.stdout
