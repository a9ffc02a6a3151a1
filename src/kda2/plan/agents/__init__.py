"""Planner agents: each takes a set of candidate configs and returns a set, with a reason per decision.

The interface (issue 2, hardware profile since issue 11): an agent is a callable `(spec, hw, bucket,
candidates) -> candidates`, where `hw` is the target's hardware profile (kda2.plan.profile.Profile: `hw.arch`
is the arch; every hardware fact an agent uses comes from it and is cited in its reason), and where every candidate carries its config and the reasons that shaped it. Agents run in
a fixed order per family (`RECURRENT_AGENTS`, `CHUNK_AGENTS`); each one only adds knobs or removes candidates, so the reasons
read top to bottom like a design review, and end up in the generated .cu's header comment.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence


@dataclass(frozen=True)
class Candidate:
    config: dict[str, Any]
    reasons: tuple[tuple[str, str], ...] = field(default=())

    def extend(self, agent: str, reason: str, **knobs: Any) -> "Candidate":
        return replace(self, config={**self.config, **knobs}, reasons=self.reasons + ((agent, reason),))


class Agent(Protocol):
    name: str

    def __call__(self, spec: Any, hw: Any, bucket: int, cands: Sequence[Candidate]) -> list[Candidate]: ...


from kda2.plan.agents.chunk import CHUNK_AGENTS  # noqa: E402  (agents need Candidate above)
from kda2.plan.agents.recurrent import RECURRENT_AGENTS  # noqa: E402

FAMILY_AGENTS: dict[str, Sequence[Callable[..., list[Candidate]]]] = {"recurrent": RECURRENT_AGENTS,
                                                                      "chunk": CHUNK_AGENTS}

__all__ = ["Agent", "CHUNK_AGENTS", "Candidate", "FAMILY_AGENTS", "RECURRENT_AGENTS"]
