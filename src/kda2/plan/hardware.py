"""Arch-level compile facts (docs/DESIGN.md §3): the archs code is compiled for, and the bound a spec's
shared-memory budget is validated against. Every fact about a GPU model the planner designs for (SMs,
shared memory per block and per SM, registers, bandwidth, tensor rate...) is in its hardware profile,
`profiles/<gpu>.yaml` (kda2.plan.profile), never here.
"""
from __future__ import annotations

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")

#: Archs whose kernels take programmatic dependent launches (compute capability 9.0+: griddepcontrol, the
#: launch attribute CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION); the recurrent libraries built for them
#: launch that way (codegen/templates/library.cpp.j2 kPdl, include/kda2/recurrent.cuh Kernel::run).
PDL_ARCHS = ("sm_90", "sm_90a")

#: Archs with bulk copies (cp.async.bulk between global and shared memory, on an mbarrier): the recurrent decode
#: kernels' `staging: bulk` (include/kda2/recurrent.cuh Kernel::bulk_issue) is planned for these only.
BULK_ARCHS = ("sm_90", "sm_90a")

#: Statically declared shared memory per block (`__shared__` arrays), every arch: CUDA's fixed limit, beyond which a
#: kernel must take dynamic shared memory and opt in at load. The recurrent kernels' tiles and stages are static; the
#: bulk-staged state tile is dynamic (include/kda2/recurrent.cuh bulk_smem), so it alone may exceed this.
STATIC_SMEM_PER_BLOCK = 49152

#: The upper bound of a spec's `budget.max_smem_bytes` (the largest per-block opt-in of any arch above,
#: Hopper's 227 KB): a sanity bound on the input only; the planner's limit is the target profile's.
MAX_SMEM_PER_BLOCK = 232448
