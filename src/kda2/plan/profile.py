"""Hardware profiles, `profiles/<name>.yaml`: the one home of every hardware fact the planner uses.

A profile names one GPU model: its arch (what code is compiled for it), SM count, shared memory per SM
and per block, register file limits, L2 size, copy bandwidth, tensor-core rate per precision and launch
latency, and where the numbers come from (`source: published` with a citation, or `source: measured`
with the date and the `kda2 calibrate` command). Agents read hardware facts only from a profile and
record the ones they used in their reasons (docs/DESIGN.md §2.2).

A spec names the profiles it targets (`targets: [h200, a100]`); a spec without `targets` gets, per arch in
`archs`, the profile marked `default_for_arch: true` for that arch. A build makes one library per arch, so
a spec names at most one profile per arch.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kda2.artifact.canonical import canonical_json
from kda2.plan.hardware import ARCHS
from kda2.plan.profile_view import cite
from kda2.spec.model import field_problem, format_validation_error, read_yaml_mapping

__all__ = ["Profile", "ProfileError", "TensorRates", "default_profiles_dir", "load_profile", "load_profiles",
           "resolve_targets"]

NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,47}$"


class ProfileError(ValueError):
    """A profile that cannot be used, or a spec naming one that does not exist; str() is one line."""


Positive = Annotated[float, Field(gt=0)]
Count = Annotated[int, Field(ge=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TensorRates(_Strict):
    """Dense tensor-core rate, FLOP/s, per input precision (fp32 accumulation)."""

    bf16: Positive
    tf32: Positive


class Profile(_Strict):
    """One GPU model. Every field required except `default_for_arch` (false), `citation`, `date`, `command`."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    gpu: Annotated[str, Field(min_length=1)]
    arch: Literal[ARCHS]  # type: ignore[valid-type]
    default_for_arch: bool = False
    sm_count: Count
    smem_per_sm_bytes: Count
    smem_per_block_bytes: Count
    registers_per_sm: Count
    registers_per_thread_max: Annotated[int, Field(ge=16, le=255)]
    threads_per_sm_max: Count
    blocks_per_sm_max: Count
    smem_reserved_per_block_bytes: Annotated[int, Field(ge=0)]   # the driver's share of each block's smem
    register_alloc_unit: Count      # registers are allocated per warp in multiples of this
    warp_schedulers_per_sm: Count   # the occupancy floor: one resident warp per scheduler
    l2_bytes: Count
    copy_bandwidth_bytes_per_s: Positive
    tensor_flops_per_s: TensorRates
    launch_latency_us: Positive
    source: Literal["published", "measured"]
    citation: str | None = None   # published: where the numbers are from
    date: str | None = None       # measured: when (ISO date)
    command: str | None = None    # measured: the command that measured it

    @model_validator(mode="after")
    def _provenance(self) -> "Profile":
        if self.smem_per_block_bytes > self.smem_per_sm_bytes:
            raise field_problem("larger than smem_per_sm_bytes", at=("smem_per_block_bytes",),
                                allowed=f"<= {self.smem_per_sm_bytes}", got=self.smem_per_block_bytes)
        need = ("citation",) if self.source == "published" else ("date", "command")
        for key in need:
            if not (getattr(self, key) or "").strip():
                raise field_problem(f"required when source is {self.source!r}", at=(key,),
                                    allowed="non-empty text")
        return self

    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.model_dump(mode="json")).encode()).hexdigest()

    def cite(self, *fields: str) -> str:
        """`profile NAME (SOURCE): field=value, ...` for a reason: which facts of which profile a decision used."""
        return cite(self, fields)


def default_profiles_dir() -> Path:
    """`$KDA2_PROFILES_DIR`, else the checkout's `profiles/` (the build always runs from a checkout)."""
    env = os.environ.get("KDA2_PROFILES_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "profiles"


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate one profile; every problem is a one-line ProfileError naming file, field, allowed."""
    data = read_yaml_mapping(path, ProfileError, "mapping with keys " + ", ".join(Profile.model_fields))
    try:
        prof = Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(format_validation_error(exc, Profile, str(path))) from None
    stem = Path(path).name[:-len(".yaml")] if str(path).endswith(".yaml") else None
    if stem is not None and stem != prof.name:
        raise ProfileError(f"{path}: name: must equal the file name; allowed: {stem!r} (got {prof.name!r})")
    return prof


def load_profiles(directory: str | os.PathLike[str] | None = None) -> dict[str, Profile]:
    """Every `*.yaml` of the directory by name; two defaults for one arch is an error."""
    root = Path(directory) if directory is not None else default_profiles_dir()
    if not root.is_dir():
        raise ProfileError(f"{root}: no such profiles directory (set KDA2_PROFILES_DIR or pass --profiles)")
    out: dict[str, Profile] = {}
    for path in sorted(root.glob("*.yaml")):
        prof = load_profile(path)
        out[prof.name] = prof
    defaults: dict[str, str] = {}
    for prof in out.values():
        if prof.default_for_arch:
            if prof.arch in defaults:
                raise ProfileError(f"{root / (prof.name + '.yaml')}: default_for_arch: {prof.arch} already has a "
                                   f"default profile ({defaults[prof.arch]}); allowed: one per arch")
            defaults[prof.arch] = prof.name
    return out


def default_profile(profiles: dict[str, Profile], arch: str) -> Profile | None:
    """The arch's `default_for_arch` profile (load_profiles allows at most one), or None."""
    return next((p for p in profiles.values() if p.arch == arch and p.default_for_arch), None)


def resolve_targets(spec: Any, profiles: dict[str, Profile]) -> dict[str, Profile]:
    """{arch: Profile} for every arch of the spec: its `targets`, or each arch's default profile."""
    where = f"{spec.source or spec.name}"
    targets = getattr(spec, "targets", None)
    out: dict[str, Profile] = {}
    if targets:
        for name in targets:
            if name not in profiles:
                raise ProfileError(f"{where}: targets: unknown profile {name!r}; allowed: "
                                   f"{', '.join(sorted(profiles)) or '(no profiles found)'}")
            prof = profiles[name]
            if prof.arch in out:
                raise ProfileError(f"{where}: targets: {out[prof.arch].name} and {name} are both {prof.arch}; "
                                   f"allowed: one profile per arch (a build makes one library per arch)")
            out[prof.arch] = prof
        if set(out) != set(spec.archs):
            is_ = ", ".join(f"{p.name} is {a}" for a, p in out.items())
            raise ProfileError(f"{where}: targets: {is_} but archs is [{', '.join(spec.archs)}]; allowed: one target "
                               f"per arch of archs (archs: [{', '.join(sorted(out))}] for these targets)")
        return {arch: out[arch] for arch in spec.archs}
    for arch in spec.archs:
        default = default_profile(profiles, arch)
        if default is None:
            have = sorted(p.name for p in profiles.values() if p.arch == arch)
            if not have:
                planned = sorted({p.arch for p in profiles.values()})
                raise ProfileError(f"{where}: archs: no hardware profile is {arch}, so it cannot be planned; allowed: "
                                   f"an arch with a profile ({', '.join(planned) or 'none found'}), or write "
                                   f"profiles/<gpu>.yaml with arch: {arch}")
            raise ProfileError(f"{where}: archs: no default profile for {arch}; add `targets:` naming one of "
                               f"{', '.join(have)}")
        out[arch] = default
    return out


def profile_file_name(name: str) -> str:
    if not re.fullmatch(NAME_PATTERN, name):
        raise ProfileError(f"profile name {name!r}: allowed: {NAME_PATTERN}")
    return f"{name}.yaml"
