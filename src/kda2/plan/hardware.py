"""Hardware facts the planner and the build read, one table (docs/DESIGN.md §2.2).

Largest dynamic shared memory one block may opt in to, per arch (CUDA programming guide, compute
capability table): 227 KB on Hopper, 163 KB on A100, 99 KB on the 8.6 / 8.9 parts.
"""
from __future__ import annotations

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")

SMEM_PER_BLOCK_OPTIN = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90": 232448, "sm_90a": 232448}

#: The largest of them: what a spec's budget may ask for at most.
MAX_SMEM_PER_BLOCK = max(SMEM_PER_BLOCK_OPTIN.values())
