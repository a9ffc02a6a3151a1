"""A validated hardware profile as plain data, for the tools that run where pydantic is not installed (the GPU
host runs `kda2 tune` from the build's plan cache). Both this view and kda2.plan.profile.Profile cite facts
through `cite`, so a reason reads the same whichever produced it."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping


def cite(profile: Any, fields: tuple[str, ...]) -> str:
    """`profile NAME (SOURCE): field=value, ...`: which facts of which profile a decision used."""
    def val(f: str) -> str:
        v = profile
        for part in f.split("."):
            v = getattr(v, part)
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    return f"profile {profile.name} ({profile.source}): " + ", ".join(f"{f}={val(f)}" for f in fields)


class ProfileView(SimpleNamespace):
    """Attribute access to a profile's dump (Profile.model_dump(mode="json")), nested mappings included."""

    def __init__(self, data: Mapping[str, Any]):
        super().__init__(**{k: SimpleNamespace(**v) if isinstance(v, Mapping) else v for k, v in data.items()})

    def cite(self, *fields: str) -> str:
        return cite(self, fields)
