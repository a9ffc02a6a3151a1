"""TIR stage: model a variant's shared-memory staging as a tvm.tirx PrimFunc and pad it.

For ``staging: smem`` variants the recurrent kernel stages a per-CTA fp32 state tile [K, BV]
(BV = warps * v_per_warp) through shared memory. :func:`plan_variant` builds a PrimFunc of that
staging (``staging.py``), runs the real `kda2.bank_pad` PrimFunc pass over it (``bankpass.py``:
bank-conflict degree of every shared access, row padding that minimises the worst degree while
keeping vector accesses aligned, shared-memory budget), and returns a JSON-able plan whose
``smem_stride`` the CUDA render uses as ``SMEM_STRIDE``:

    {"schema": 1, "staging", "tile": [K, BV], "threads", "smem_budget",
     "smem_stride", "smem_pad", "smem_bytes", "vector_width", "coop_vector_width",
     "conflicts_before": {access: degree}, "conflicts_after": {access: degree},
     "pass": {"name": "kda2.bank_pad", "enabled", "candidates": {"pad": worst_degree}, ...},
     "tir_before": TVMScript, "tir_after": TVMScript}

Access names: ``fill`` (global->smem), ``read`` (smem->registers), ``write`` (registers->smem),
``drain`` (smem->global). ``staging: direct`` plans have stride/pad/bytes 0 and a trivial PrimFunc.

For the ``chunk`` family (``chunk.py``) the PrimFunc models the padded bf16 tensor-core tiles (the
prep kernel's q/k/v, the state kernel's u^T: cp.async fills, ldmatrix and mma-fragment reads); the same
pass picks their row strides ``lds_kv``, ``lds_u`` (fp32 tiles ``lds_g``, ``lds_t`` and the o staging tile
``lds_o`` are fixed), and the plan adds both kernels' threads and shared-memory bytes
(``kda2.plan.smem``), raising TirBudgetError above the budget.

This package imports TVM only inside the functions, so importing it is cheap.
"""
from kda2.tir.errors import BankModelError, TirBudgetError, TirConfigError, TirError
from kda2.tir.plan import PLAN_SCHEMA, check_config, plan_json_text, plan_variant, write_plan

__all__ = [
    "BankModelError", "PLAN_SCHEMA", "TirBudgetError", "TirConfigError", "TirError",
    "check_config", "plan_json_text", "plan_variant", "write_plan",
]
