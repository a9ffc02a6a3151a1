"""The kernel spec: `kernel_specs/*.yaml`, validated into a frozen pydantic model.

A bad spec must fail with ONE line naming the file, the field and what is allowed (docs/DESIGN.md §2.1), so
pydantic's multi-line errors are rewritten here. `rules.py` reuses the YAML reader and the error
formatter so specs and rules fail the same way.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator,
                      model_validator)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from kda2.artifact.canonical import canonical_json
from kda2.plan.hardware import ARCHS, BULK_ARCHS, MAX_SMEM_PER_BLOCK
from kda2.spec.knobs import (CHUNK_FIELDS, CHUNK_HEAD_DIMS, DECODE_MAX_T, FUSED_HEAD_DIM, INPUT_DTYPES,
                             RECURRENT_FIELDS, SPEC_STAGING, SPEC_V_PER_WARP)

__all__ = ["Agents", "Budget", "ChunkAgents", "ChunkSpec", "ChunkTile", "Features", "HeadDims", "SPEC_CLASSES",
           "Spec", "SpecError", "Staging", "Tile", "field_problem", "format_validation_error", "load_spec",
           "load_specs", "read_yaml_mapping", "show", "spec_class", "validate_spec"]

T = TypeVar("T")
_NO_VALUE = object()

Arch = Literal[ARCHS]  # type: ignore[valid-type]  (plan/hardware.py is the one list)
# What a spec may ask the agents to try is what the knob allows (spec/knobs.py is the one list of each).
Layout = Literal[RECURRENT_FIELDS["state_layout"]]  # type: ignore[valid-type]
KFirstStaging = Literal[SPEC_STAGING["k_first"]]  # type: ignore[valid-type]
VFirstStaging = Literal[SPEC_STAGING["v_first"]]  # type: ignore[valid-type]
HeadDim = Literal[RECURRENT_FIELDS["k"]]  # type: ignore[valid-type]
VPerWarp = Literal[SPEC_V_PER_WARP]  # type: ignore[valid-type]
MAX_SEQ_LEN = 1 << 20
MAX_SMEM_BYTES = MAX_SMEM_PER_BLOCK  # the largest opt-in of any arch (plan/hardware.py); per arch in the planner


class SpecError(Exception):
    """A spec that cannot be used; str() is one line: `<file>: <field.path>: <problem>; allowed: ...`."""


# --- shared by spec.py and rules.py ------------------------------------------------------------

def field_problem(message: str, *, at: tuple[str | int, ...] = (), allowed: str | None = None,
                  got: Any = _NO_VALUE) -> PydanticCustomError:
    """An error to raise inside a validator that `format_validation_error` renders verbatim.

    `at` extends pydantic's location (model validators report at the model, not the field);
    `allowed=None` derives the allowed values from the annotation, `""` leaves them out.
    """
    ctx: dict[str, Any] = {"at": tuple(at), "allowed": allowed}
    if got is not _NO_VALUE:
        ctx["got"] = got
    return PydanticCustomError("kda2", message, ctx)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (safe_load silently keeps the last, a hidden override) and reads
    only true/false as booleans: YAML 1.1's yes/no/on/off stay text, so the strict models refuse them by field
    (`varlen: yes` must not pass while `varlen: 'yes'` fails)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable key: let the base class report it
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep)


_BOOL_TAG = "tag:yaml.org,2002:bool"
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_UniqueKeyLoader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                       list("tTfF"))  # YAML 1.2's booleans
#: YAML 1.1 booleans that _UniqueKeyLoader reads as text (named when a boolean field gets one).
_YAML11_BOOLS = {"yes", "no", "on", "off"}


def read_yaml_mapping(path: str | os.PathLike[str], error: type[Exception],
                      expected: str) -> dict[str, Any]:
    """Parse a YAML file whose top level must be a mapping; every failure is a one-line `error`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {_one_line(str(exc))}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{path}"
        problem = _one_line(exc.problem or exc.context or "cannot parse")
        raise error(f"{where}: malformed YAML: {_tab_problem(text, mark, problem) or problem}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: malformed YAML: {_one_line(str(exc))}") from None
    if data is None:
        raise error(f"{path}: empty file; allowed: {expected}")
    if not isinstance(data, dict):
        raise error(f"{path}: top level must be a mapping; allowed: {expected} "
                    f"(got {type(data).__name__})")
    return data


def _tab_problem(text: str, mark: Any, problem: str) -> str | None:
    """The parse error said the YAML way when a tab caused it: "found character '\\t'" hides that YAML indents
    (and, in most places, separates) with spaces only."""
    lines = text.splitlines()
    if mark is None or not 0 <= mark.line < len(lines):
        return None
    line = lines[mark.line]
    indent = line[:len(line) - len(line.lstrip(" \t"))]
    if "\t" in indent:
        return f"line {mark.line + 1} is indented with a tab; allowed: spaces only ({problem})"
    if line[mark.column:mark.column + 1] == "\t":
        return f"a tab at column {mark.column + 1}; allowed: spaces only ({problem})"
    return None


_PROBLEMS = {
    "int_type": "expected an integer", "int_parsing": "expected an integer",
    "bool_type": "expected true or false", "bool_parsing": "expected true or false",
    "string_type": "expected a string", "list_type": "expected a list",
    "dict_type": "expected a mapping", "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping", "literal_error": "not an allowed value",
    "too_short": "must not be empty", "string_pattern_mismatch": "does not match the pattern",
    "greater_than": "out of range", "greater_than_equal": "out of range",
    "less_than": "out of range", "less_than_equal": "out of range",
}


def format_validation_error(exc: ValidationError, model: type[BaseModel], file: str) -> str:
    """Render every error of `exc` on one line: `<file>: <path>: <problem>; allowed: <a> (got <v>)`, further errors
    after `; also ` as `<path>: <problem>; ...`. Unknown fields come first (a mistyped key also makes the field it
    meant "missing": the unknown one is the cause), and name the closest known field if one is close."""
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")  # stable
    texts = [_format_error(err, model) for err in errors]
    return _one_line(f"{file}: " + "; also ".join(texts))


def _format_error(err: Any, model: type[BaseModel]) -> str:
    """One pydantic error as `<path>: <problem>; allowed: <a> (got <v>)` (no file)."""
    loc = tuple(err["loc"])
    ctx = err.get("ctx") or {}
    allowed: str | None = None
    got: Any = err.get("input", _NO_VALUE)
    if err["type"] == "kda2":
        loc += tuple(ctx.get("at", ()))
        problem, allowed = err["msg"], ctx.get("allowed")
        got = ctx.get("got", _NO_VALUE)
    elif err["type"] == "extra_forbidden":
        parent = _resolve(model, loc[:-1])[0]
        problem, got = f"unknown field {loc[-1]!r}", _NO_VALUE
        if isinstance(parent, type) and issubclass(parent, BaseModel):
            allowed = ", ".join(parent.model_fields)
            close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1)
            if close:
                problem += f" (did you mean {close[0]!r}?)"
    elif err["type"] == "missing":
        problem, got = "required field is missing", _NO_VALUE
    else:
        problem = _PROBLEMS.get(err["type"], err["msg"])
        if err["type"] == "bool_type" and isinstance(got, str) and got.lower() in _YAML11_BOOLS:
            problem += " (yes/no/on/off are not booleans here)"
    if allowed is None:
        allowed = _describe(*_resolve(model, loc))
    text = (f"{_path(loc)}: " if loc else "") + problem
    if allowed:
        text += f"; allowed: {allowed}"
    if got is not _NO_VALUE:
        text += f" (got {show(got)})"
    return text


def show(value: Any) -> str:
    """A value as the user wrote it in YAML (true/false, not True/False), shortened to one line."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _unwrap(ann: Any) -> tuple[Any, list[Any]]:
    """Strip Annotated (collecting its constraints) and Optional from an annotation."""
    meta: list[Any] = []
    while True:
        origin = typing.get_origin(ann)
        if origin is Annotated:
            ann, *extra = typing.get_args(ann)
            for item in extra:
                meta.extend(item.metadata if isinstance(item, FieldInfo) else [item])
        elif origin in (Union, types.UnionType):
            rest = [a for a in typing.get_args(ann) if a is not type(None)]
            if len(rest) != 1:
                return ann, meta
            ann = rest[0]
        else:
            return ann, meta


def _resolve(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """The annotation (and constraints) that validated `loc`, or (None, []) if it has none."""
    ann: Any = model
    meta: list[Any] = []
    for part in loc:
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            field = ann.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None, []
            ann, extra = _unwrap(field.annotation)
            meta = list(field.metadata) + extra
        elif typing.get_origin(ann) is list and isinstance(part, int):
            ann, meta = _unwrap(typing.get_args(ann)[0])
        elif typing.get_origin(ann) is dict:
            ann, meta = _unwrap(typing.get_args(ann)[1])
        else:
            return None, []
    return ann, meta


def _describe(ann: Any, meta: list[Any], nested: bool = False) -> str:
    """What a field accepts, in words, derived from its annotation so it cannot drift from it."""
    if typing.get_origin(ann) is Literal:
        values = ", ".join(v if isinstance(v, str) else show(v) for v in typing.get_args(ann))
        return "{" + values + "}" if nested else values
    if ann is bool:
        return "true, false"
    bounds = {k: getattr(m, k) for m in meta for k in ("ge", "gt", "le", "lt", "min_length", "pattern")
              if getattr(m, k, None) is not None}
    if ann is int:
        lo = bounds["ge"] if "ge" in bounds else bounds["gt"] + 1 if "gt" in bounds else None
        hi = bounds["le"] if "le" in bounds else bounds["lt"] - 1 if "lt" in bounds else None
        if lo is not None and hi is not None:
            return f"int in [{lo}, {hi}]"
        return f"int >= {lo}" if lo is not None else f"int <= {hi}" if hi is not None else "int"
    if ann is str:
        return f"string matching {bounds['pattern']}" if "pattern" in bounds else "string"
    if typing.get_origin(ann) is list:
        item = _describe(*_unwrap(typing.get_args(ann)[0]), nested=True)
        return ("non-empty list" if bounds.get("min_length") else "list") + (f" of {item}" if item else "")
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return "mapping with keys " + ", ".join(ann.model_fields)
    if typing.get_origin(ann) is dict:
        return "mapping"
    return ""


def _unique(values: list[T]) -> list[T]:
    seen: list[T] = []
    for value in values:
        if value in seen:
            raise field_problem(f"duplicate value {show(value)}", got=values)
        seen.append(value)
    return values


def _increasing(values: list[int]) -> list[int]:
    for a, b in zip(values, values[1:]):
        if b <= a:
            raise field_problem(f"must be strictly increasing ({b} after {a})", got=values)
    return values


#: A non-empty list without repeats (the lists here are sets of choices, kept in the order given).
Choices = Annotated[list[T], Field(min_length=1), AfterValidator(_unique)]


# --- the spec ----------------------------------------------------------------------------------

class _Strict(BaseModel):
    # strict: YAML `"4"` or `true` must not quietly become 4 or 1; frozen: specs are inputs, not state.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class HeadDims(_Strict):
    """Key and value head dimensions (K, V); both required."""

    k: HeadDim
    v: HeadDim


class Features(_Strict):
    """What the kernels compute. All required except `input_dtypes`, `bf16_decode_state`, `gva_ratios`.

    gate_modes: gate activations compiled in; qk_l2norm / beta_sigmoid: done in the kernel;
    input_dtypes: q/k/v/o dtypes, each an entry of every kernel (default [bf16]; the chunk family's
    16-bit intermediates and MMA operands are in the input dtype, docs/DESIGN.md §1); bf16_decode_state: opt-in, the decode-like recurrent kernels (buckets <= 16) also read and
    write bf16 states (h0/ht/pool and per-token states, half the bytes; default false; recurrent only);
    gva_ratios: accepted for older specs and ignored (every kernel takes HV/H at run time: any ratio with
    HV % H == 0 runs); varlen: cu_seqlens support; state_layouts: k_first [K,V] and/or v_first [V,K].
    """

    gate_modes: Choices[Literal["precomputed", "softplus", "lower_bound"]]
    qk_l2norm: bool
    beta_sigmoid: bool
    input_dtypes: Choices[Literal[INPUT_DTYPES]] = ["bf16"]  # type: ignore[valid-type]  (spec/knobs.py)
    bf16_decode_state: bool = False
    gva_ratios: Choices[Annotated[int, Field(ge=1)]] = [1]
    varlen: bool
    state_dtype: Literal["fp32"]
    state_layouts: Choices[Layout]


class Tile(_Strict):
    """Tile shapes the planner may try. Defaults: v_per_warp [4, 8], warps [4], latency_v_per_warp [].

    latency_v_per_warp: narrower v_per_warp options proposed for the T = 1 bucket only, beside its usual shapes
    (plan/agents/recurrent.py TileAgent): a one-sequence decode step is one latency chain per warp, which a
    narrower tile splits over more warps; the tuner routes them by batch class (decode-n1) if they win there.
    """

    v_per_warp: Choices[VPerWarp] = [4, 8]
    warps: Choices[Literal[RECURRENT_FIELDS["warps"]]] = [4]  # type: ignore[valid-type]
    latency_v_per_warp: list[VPerWarp] = []


class Staging(_Strict):
    """State staging per layout. Defaults: k_first [smem, direct], v_first [direct]. `bulk` (decode buckets, archs
    with bulk copies): the state tile in and out of shared memory by the copy engine. `smem` is k_first only
    (spec/knobs.py SPEC_STAGING)."""

    k_first: Choices[KFirstStaging] = ["smem", "direct"]
    v_first: Choices[VFirstStaging] = ["direct"]

    @field_validator("v_first", mode="before")
    @classmethod
    def _k_first_only(cls, values: Any) -> Any:
        # refused by name: the planner would drop the mode silently and then find no v_first variant
        for i, value in enumerate(values if isinstance(values, list) else []):
            if value in SPEC_STAGING["k_first"] and value not in SPEC_STAGING["v_first"]:
                raise field_problem(f"{value} staging is built for k_first tiles only (include/kda2/recurrent.cuh; "
                                    f"k_first takes {', '.join(SPEC_STAGING['k_first'])})", at=(i,),
                                    allowed=", ".join(SPEC_STAGING["v_first"]), got=value)
        return values


def _no_keys_of(other_family: str, keys: tuple[str, ...], allowed: str):
    """A before-validator refusing agent keys that belong to the other family, by name."""

    def check(data: Any) -> Any:
        if isinstance(data, dict):
            for key in keys:
                if key in data:
                    raise field_problem(f"agents key {key!r} is for family {other_family} specs",
                                        at=(key,), allowed=allowed)
        return data

    return check


class Agents(_Strict):
    """Planner settings of a recurrent spec; every key optional.

    Defaults: tile Tile(), staging Staging(), reduce [butterfly], occupancy [compiler], inputs [per_token],
    schedule [grid].
    occupancy (decode buckets): `compiler` leaves resident CTAs per SM to ptxas's register use; `raised`
    also proposes each shape with launch bounds asking for more CTAs per SM (plan/agents/recurrent.py
    OccupancyAgent), which caps its registers.
    inputs (decode buckets, T <= 16): `per_token` loads each token's q/k/g/v/beta in the token loop; `preload`
    also proposes each shape with every token's inputs copied to shared memory at CTA entry (PreloadAgent; at T = 1
    beside the per-token shapes whatever `inputs` lists, so a spec listing `preload` alone keeps them there). Prefill
    buckets always load per token.
    schedule (decode buckets, T <= 16): `grid` launches one CTA per tile; `persistent` also proposes each
    direct-staged shape as a persistent kernel (plan/agents/recurrent.py ScheduleAgent): min(tiles, resident
    CTA slots) CTAs, each looping over tiles with the next tile's state copied to shared memory meanwhile.
    """

    tile: Tile = Tile()
    staging: Staging = Staging()
    reduce: Choices[Literal[RECURRENT_FIELDS["reduce"]]] = ["butterfly"]  # type: ignore[valid-type]
    occupancy: Choices[Literal["compiler", "raised"]] = ["compiler"]
    inputs: Choices[Literal["per_token", "preload"]] = ["per_token"]
    schedule: Choices[Literal["grid", "persistent"]] = ["grid"]

    _refuse_chunk = model_validator(mode="before")(_no_keys_of("chunk", ("chunk",),
                                                               "tile, staging, reduce, occupancy, inputs, schedule"))


class ChunkTile(_Strict):
    """Chunk kernel shapes the planner may try. Defaults: block_v [32, 64], stages [2], state_mma [mma_sync],
    prep_wu [levels].

    block_v: value columns per CTA of the state kernel (mma_sync: warps = block_v / 8; wgmma: a warpgroup per 64);
    stages: load pipeline depth of the state kernel; state_mma: how the state kernel multiplies — mma_sync (every
    arch) or wgmma (sm_90a, K <= 128, block_v a multiple of 64; planned beside the mma_sync candidates); prep_wu: how
    the prep makes w and u — levels (every arch) or bfs, blocked substitution on warpgroup MMAs (sm_90a; planned
    beside the levels candidates; measured on an H100 only, not yet tuned: docs/DESIGN.md §1); fused: whether the
    fused 16-token kernel (sm_90a, K = V = 128) is planned as a twin of the first unpruned candidate of each layout and
    state_mma, running its unsplit calls in one pass (docs/DESIGN.md §1, "the fused twin"; false: none, [false, true]: the tuner picks).
    """

    block_v: Choices[Literal[CHUNK_FIELDS["block_v"]]] = [32, 64]  # type: ignore[valid-type]
    stages: Choices[Literal[CHUNK_FIELDS["stages"]]] = [2]  # type: ignore[valid-type]
    state_mma: Choices[Literal[CHUNK_FIELDS["state_mma"]]] = ["mma_sync"]  # type: ignore[valid-type]
    prep_wu: Choices[Literal[CHUNK_FIELDS["prep_wu"]]] = ["levels"]  # type: ignore[valid-type]
    fused: Choices[Literal[CHUNK_FIELDS["fused"]]] = [False]  # type: ignore[valid-type]


class ChunkAgents(_Strict):
    """Planner settings of a chunk spec; every key optional. Defaults: chunk ChunkTile()."""

    chunk: ChunkTile = ChunkTile()

    _refuse_recurrent = model_validator(mode="before")(
        _no_keys_of("recurrent", ("tile", "staging", "reduce", "occupancy", "inputs", "schedule"), "chunk"))


class Budget(_Strict):
    """Resource limits for candidates. All required except allow_spills (default false).

    max_candidates counts per seq_len bucket and state layout, and separately for the preload candidates of a
    multi-token decode bucket (agents.inputs: measured beside the per-token ones, not instead of them) and for the
    chunk family's wgmma state candidates (agents.chunk.state_mma) and for each prep_wu choice.
    """

    max_candidates: Annotated[int, Field(ge=1)]
    max_registers: Annotated[int, Field(ge=24, le=255)]
    max_smem_bytes: Annotated[int, Field(ge=0, le=MAX_SMEM_BYTES)]
    allow_spills: bool = False


class Spec(_Strict):
    """One kernel spec. Required: name, family, archs, head_dims, features, seq_len_buckets, budget.

    Defaults: agents Agents(), targets none (each arch's default hardware profile). `source` is the file it came from; it is not part of the content.
    This class validates family recurrent; `ChunkSpec` (same fields, chunk agents) family chunk;
    `load_spec` / `validate_spec` pick the class from the family.
    """

    _FAMILY: ClassVar[str] = "recurrent"

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,47}$")]
    family: Literal["recurrent", "chunk"]
    archs: Choices[Arch]
    #: Hardware profiles (profiles/<name>.yaml) the planner designs for, one per arch of `archs`; absent:
    #: each arch's `default_for_arch` profile (kda2.plan.profile.resolve_targets checks the names).
    targets: Choices[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,47}$")]] | None = None
    head_dims: HeadDims
    features: Features
    seq_len_buckets: Annotated[list[Annotated[int, Field(ge=1, le=MAX_SEQ_LEN)]],
                               Field(min_length=1), AfterValidator(_increasing)]
    agents: Agents = Agents()
    budget: Budget

    _source: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _family_matches_class(self) -> "Spec":
        if self.family != self._FAMILY:
            raise field_problem(f"family {self.family!r} is validated by {_SPEC_CLASS_NAMES[self.family]} "
                                f"(kda2.spec.validate_spec picks the class by family)", at=("family",),
                                allowed=self._FAMILY)
        return self

    @model_validator(mode="after")
    def _staging_serves_every_bucket(self) -> "Spec":
        # bulk alone: the planner (plan/agents/recurrent.py bulk_ok) proposes nothing for a prefill bucket or an arch
        # without bulk copies, and `plan` would fail with "no variant survives" naming no field
        if not isinstance(self.agents, Agents):
            return self
        lacking = ([f"bucket {b}" for b in self.seq_len_buckets if b > DECODE_MAX_T]
                   + [f"arch {a}" for a in self.archs if a not in BULK_ARCHS])
        for layout in self.features.state_layouts if lacking else ():
            modes = getattr(self.agents.staging, layout)
            if set(modes) == {"bulk"}:
                others = " or ".join(m for m in SPEC_STAGING[layout] if m != "bulk")
                raise field_problem(f"bulk staging is planned for decode buckets (<= {DECODE_MAX_T}) on "
                                    f"{', '.join(BULK_ARCHS)} only, so {lacking[0]} would get no {layout} variant",
                                    at=("agents", "staging", layout), allowed=f"a list with {others}", got=modes)
        return self

    @property
    def source(self) -> Path | None:
        return self._source

    def canonical(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field, defaults filled in, lists in the order given."""
        return self.model_dump(mode="json")

    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.canonical()).encode()).hexdigest()


class ChunkSpec(Spec):
    """A family chunk spec: the chunkwise-parallel tensor-core prefill kernels.

    Same fields as `Spec`; `agents` holds the chunk planner's settings (ChunkAgents), and the head
    dimensions are those the chunk kernels build with (spec/knobs.py CHUNK_HEAD_DIMS, K = V).
    """

    _FAMILY: ClassVar[str] = "chunk"

    agents: ChunkAgents = ChunkAgents()

    @model_validator(mode="after")
    def _chunk_head_dims(self) -> "ChunkSpec":
        for dim in ("k", "v"):
            value = getattr(self.head_dims, dim)
            if value not in CHUNK_HEAD_DIMS:
                raise field_problem("not built by the chunk kernels (spec/knobs.py CHUNK_HEAD_DIMS; the "
                                    "recurrent family also builds 32)", at=("head_dims", dim),
                                    allowed=", ".join(map(str, CHUNK_HEAD_DIMS)), got=value)
        if self.head_dims.k != self.head_dims.v:
            raise field_problem(f"the chunk kernels need K = V (k is {self.head_dims.k}; the prep's q/k/v tiles "
                                "share one layout; the recurrent family builds K != V)", at=("head_dims", "v"),
                                allowed=str(self.head_dims.k), got=self.head_dims.v)
        if self.features.bf16_decode_state:
            raise field_problem("the chunk kernels keep fp32 states", at=("features", "bf16_decode_state"),
                                allowed="false", got=True)
        if True in self.agents.chunk.fused and self.head_dims.k != FUSED_HEAD_DIM:
            raise field_problem(f"the fused kernel is built for K = V = {FUSED_HEAD_DIM} only (kda2/fused.cuh)",
                                at=("agents", "chunk", "fused"), allowed=f"[false] at k = {self.head_dims.k}",
                                got=self.agents.chunk.fused)
        if self.agents.chunk.fused == [True]:
            raise field_problem("a fused twin is planned beside the two-kernel candidates (its split calls run on "
                                "them), never instead of them", at=("agents", "chunk", "fused"),
                                allowed="[false] or [false, true]", got=self.agents.chunk.fused)
        return self


SPEC_CLASSES: dict[str, type[Spec]] = {"recurrent": Spec, "chunk": ChunkSpec}
_SPEC_CLASS_NAMES = {family: cls.__name__ for family, cls in SPEC_CLASSES.items()}
_EXPECTED = "mapping with keys " + ", ".join(Spec.model_fields)


def spec_class(data: Any) -> type[Spec]:
    """The model that validates `data`: by its `family` (an unknown family gets Spec, which names the allowed)."""
    family = data.get("family") if isinstance(data, dict) else None
    return SPEC_CLASSES.get(family, Spec) if isinstance(family, str) else Spec


def validate_spec(data: Any) -> Spec:
    """Validate a spec mapping with the class of its family (raises pydantic's ValidationError)."""
    return spec_class(data).model_validate(data)


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and validate one spec file; any problem is a one-line SpecError."""
    data = read_yaml_mapping(path, SpecError, _EXPECTED)
    cls = spec_class(data)
    try:
        spec = cls.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, cls, str(path))) from None
    spec._source = Path(path)
    return spec


def load_specs(directory: str | os.PathLike[str]) -> list[Spec]:
    """All `*.yaml` specs of a directory, sorted by spec name; two files with one name is an error."""
    root = Path(directory)
    if not root.is_dir():
        raise SpecError(f"{directory}: no such directory")
    for stray in sorted(root.glob("*.yml")):  # silently skipping these would lose a spec
        raise SpecError(f"{stray}: spec files must end in .yaml")
    by_name: dict[str, Spec] = {}
    for path in sorted(root.glob("*.yaml")):
        spec = load_spec(path)
        if spec.name in by_name:
            raise SpecError(f"{path}: name: duplicate spec name {spec.name!r} "
                            f"(also in {by_name[spec.name].source})")
        by_name[spec.name] = spec
    return [by_name[name] for name in sorted(by_name)]
