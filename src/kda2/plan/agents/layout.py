"""The state-layout agent both families share: one candidate per layout the spec lists, each with the
family's reason (what that layout means for its kernels)."""
from __future__ import annotations

from typing import Any, Sequence

from kda2.plan.agents import Candidate


class LayoutAgent:
    name = "layout"

    def __init__(self, k_first: str, v_first: str):
        self.why = {"k_first": k_first, "v_first": v_first}

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]:
        return [c.extend(self.name, self.why[layout], state_layout=layout)
                for c in cands for layout in spec.features.state_layouts]
