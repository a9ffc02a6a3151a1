"""Rewrite rules: `rules/NNNN-slug.yaml`, each derived from a failure and versioned.

A rule matches variant configs and forbids them, sets knobs, or adds nvcc flags. A variant's build
signature holds the digest of only the rules that matched it (docs/DESIGN.md §4), so one rule edit rebuilds
exactly its variants. `rules.lock.json` pins each rule's body digest: a body edit without a version
bump is caught by `check_lock` instead of silently changing artifacts under the same rule version.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Mapping

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, \
    ValidationInfo, model_validator

from kda2.artifact.atomic import write_text
from kda2.spec.model import MAX_SEQ_LEN, field_problem, format_validation_error, read_yaml_mapping, show
from kda2.artifact.canonical import canonical_json
from kda2.spec.knobs import ABSENT_KNOB_DEFAULTS, FAMILY_FIELDS

__all__ = ["MATCHER_VERSION", "LOCK_NAME", "FILE_PATTERN", "Applied", "Match", "Rule", "RuleError",
           "apply_rules", "check_lock", "load_rule", "load_rules", "rules_digest", "unmatched",
           "write_lock"]

#: Part of every digest: changing how rules match must invalidate what was built under the old meaning.
MATCHER_VERSION = 2  # 2: a knob a config leaves out matches its default (spec/knobs.py ABSENT_KNOB_DEFAULTS)
LOCK_NAME = "rules.lock.json"
FILE_PATTERN = r"^\d{4}-[a-z0-9-]+\.yaml$"
#: They place a variant in its library and dispatch table; a rule must not move it there.
_NOT_SETTABLE = ("family", "arch", "bucket", "profile")


class RuleError(Exception):
    """A rule that cannot be used; str() is one line: `<file>: <field.path>: <problem>; ...`."""


def _nonblank(text: str) -> str:
    if not text.strip():
        raise field_problem("must not be blank", allowed="non-empty text")
    return text


def _flag(flag: str) -> str:
    if not flag.startswith("-"):
        hint = f" (did you mean '-{flag}'?)" if re.fullmatch(r"\S+", flag) else ""
        raise field_problem(f"must start with '-', or nvcc takes it for an input file{hint}",
                            allowed="one nvcc option, e.g. -Xptxas=-O3", got=flag)
    # one argv item each: "-Xptxas -v" in one string would reach nvcc as a single bogus option
    if not re.fullmatch(r"-\S+", flag):
        raise field_problem("must be one nvcc option without spaces", allowed="e.g. -Xptxas=-O3",
                            got=flag)
    # every kda2 entry has __launch_bounds__, and ptxas then overrides a global register cap with the entry's own
    # ("Overriding global maxrregcount ..."): the rule would change nothing, unsaid
    if "maxrregcount" in flag:
        raise field_problem("is overridden by the kernels' __launch_bounds__ (ptxas sets each entry's cap itself), "
                            "so it would change nothing", allowed="`set: {min_ctas: N}` (recurrent: launch bounds "
                            "asking N CTAs per SM, which caps registers), or another nvcc option", got=flag)
    return flag


Text = Annotated[str, AfterValidator(_nonblank)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Match(_Strict):
    """Predicates, all of which must hold; an omitted one always holds.

    Each value is one value or a list of them (any of). For list-valued fields (`tuple` in
    kda2.plan.variant, e.g. gate_modes) a list is the value and a list of lists is any of them.
    Values are checked against kda2.plan.variant.FAMILY_FIELDS by `Rule`, which knows the family; a `bucket` must
    be a length a spec may bucket (1 to MAX_SEQ_LEN) and a `profile` a profile of the profiles directory (where
    there is one): a rule naming anything else could never match.
    """

    arch: Any = None
    family: Any = None
    bucket: Any = None
    profile: Any = None     # a hardware profile name (profiles/<name>.yaml): scope a rule to one GPU model
    config: dict[str, Any] | None = None

    def predicates(self) -> dict[str, Any]:
        """field -> value (or list of values) for every predicate listed."""
        preds = {k: v for k, v in (("arch", self.arch), ("family", self.family),
                                   ("bucket", self.bucket), ("profile", self.profile)) if v is not None}
        return {**preds, **(self.config or {})}


class Rule(_Strict):
    """One rule file. `set` is required iff action is set, `flags` iff action is flags."""

    id: Annotated[int, Field(ge=1, le=9999)]
    version: Annotated[int, Field(ge=1)]
    match: Match
    action: Literal["forbid", "set", "flags"]
    set: dict[str, Any] | None = None
    flags: Annotated[list[Annotated[str, AfterValidator(_flag)]], Field(min_length=1)] | None = None
    reason: Text
    evidence: Text

    _path: Path | None = PrivateAttr(default=None)

    @property
    def path(self) -> Path | None:
        return self._path

    @model_validator(mode="after")
    def check_fields(self, info: ValidationInfo) -> Rule:
        """Cross-field checks, and every named field and value against kda2.plan.variant.FAMILY_FIELDS;
        `match.profile` against the profiles of the validation context's `profiles_dir` (default: the planner's)."""
        for key in ("set", "flags"):
            value = getattr(self, key)
            if value is None and self.action == key:
                raise field_problem(f"required when action is {key!r}", at=(key,), allowed="")
            if value is not None and self.action != key:
                raise field_problem(f"only allowed when action is {key!r} (action is {self.action!r})",
                                    at=(key,), allowed="")
        if self.action == "set" and not self.set:
            raise field_problem("must not be empty", at=("set",), allowed="mapping of field: value")
        if self.match.family is not None:
            _check_value({"family": tuple(FAMILY_FIELDS)}, "family", self.match.family,
                         ("match", "family"), any_of=True)
        table = _table(self.match.family)
        profiles = (_profile_names((info.context or {}).get("profiles_dir"))
                    if self.match.profile is not None else None)
        for field, value in self.match.predicates().items():
            at = ("match", field) if field in ("arch", "family", "bucket", "profile") else ("match", "config", field)
            _check_value(table, field, value, at, any_of=True, profiles=profiles)
        for field, value in (self.set or {}).items():
            if field in _NOT_SETTABLE:
                knobs = ", ".join(k for k in table if k not in _NOT_SETTABLE)
                raise field_problem(f"field {field!r} cannot be set", at=("set", field), allowed=knobs)
            _check_value(table, field, value, ("set", field), any_of=False)
        return self

    def matches(self, config: Mapping[str, Any]) -> bool:
        """True if every predicate holds for `config` (a variant config: family, arch, bucket, knobs).

        A `set` rule also needs every field it sets to be a knob of the config's family: a rule that
        matches on arch alone must not graft recurrent knobs onto a chunk variant (or the reverse).
        """
        if self.set and any(f not in FAMILY_FIELDS.get(config.get("family"), {}) for f in self.set):
            return False
        absent = ABSENT_KNOB_DEFAULTS.get(config.get("family"), {})
        for field, value in self.match.predicates().items():
            if field not in config and field not in absent:
                return False
            have = config[field] if field in config else absent[field]
            if _norm(have) not in [_norm(v) for v in _alternatives(field, value, FAMILY_FIELDS)]:
                return False
        return True

    def body(self) -> dict[str, Any]:
        """Canonical content (everything but the path): what the lock and build digests cover. An absent
        `match.profile` is left out, so rules written before it existed keep their locked digests."""
        body = self.model_dump(mode="json")
        if body["match"].get("profile") is None:
            del body["match"]["profile"]
        return body

    def body_digest(self) -> str:
        return hashlib.sha256(canonical_json(self.body()).encode()).hexdigest()


def _table(family: Any) -> dict[str, Any]:
    """Fields a rule may name: those of the matched families, or of all families if none is given."""
    names = family if isinstance(family, list) else [family] if family is not None else list(FAMILY_FIELDS)
    table: dict[str, Any] = {}
    for name in names:  # already checked to be known families
        for field, allowed in FAMILY_FIELDS[name].items():
            have = table.get(field)
            if isinstance(have, tuple) and isinstance(allowed, tuple):  # a field of several families: any of them
                allowed = have + tuple(a for a in allowed if not any(type(a) is type(h) and a == h for h in have))
            table[field] = allowed
    return table


def _alternatives(field: str, value: Any, tables: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """The values a predicate accepts: a list means any of them, except for list-valued fields."""
    list_valued = any(t.get(field) is tuple for t in tables.values())
    if not isinstance(value, list):
        return [value]
    if list_valued and not any(isinstance(v, list) for v in value):
        return [value]
    return value


def _profile_names(profiles_dir: str | os.PathLike[str] | None) -> tuple[Path, list[str]] | None:
    """(directory, profile names) of the profiles directory the planner reads (kda2.plan.profile: `profiles_dir`,
    else $KDA2_PROFILES_DIR or the checkout's profiles/), or None where there is no such directory."""
    from kda2.plan.profile import default_profiles_dir  # the planner's one answer to where profiles are

    root = Path(profiles_dir) if profiles_dir is not None else default_profiles_dir()
    if not root.is_dir():
        return None
    return root, sorted(p.name[:-len(".yaml")] for p in root.glob("*.yaml"))  # load_profile: name = file name


def _check_value(table: Mapping[str, Any], field: str, value: Any, at: tuple[str, ...], *,
                 any_of: bool, profiles: tuple[Path, list[str]] | None = None) -> None:
    if field not in table:
        raise field_problem(f"unknown field {field!r}", at=at, allowed=", ".join(table))
    allowed = table[field]
    if any_of:
        values = _alternatives(field, value, {"_": table})
        if not values:
            raise field_problem("must not be empty", at=at, allowed="a value or a non-empty list", got=value)
    else:
        values = [value]
    for v in values:
        problem = "not an allowed value"
        if isinstance(allowed, tuple):
            ok = any(type(v) is type(a) and v == a for a in allowed)  # YAML true must not match 1
            text = ", ".join(show(a) if not isinstance(a, str) else a for a in allowed)
        elif allowed is int:  # a bucket: a spec's seq_len_buckets value
            ok, text = type(v) is int and 1 <= v <= MAX_SEQ_LEN, f"int in [1, {MAX_SEQ_LEN}]"
        elif allowed is tuple:
            ok, text = isinstance(v, list), "list"
        elif allowed is str and profiles is not None:  # a profile name (profiles/<name>.yaml)
            ok, text = type(v) is str and v in profiles[1], ", ".join(profiles[1]) or "(no profiles found)"
            problem = f"unknown profile (the profiles of {profiles[0]})"
        elif allowed is str:  # no profiles directory to check against: the name's shape
            ok, text = type(v) is str and re.fullmatch(r"[a-z][a-z0-9_-]{0,47}", v) is not None, "a profile name"
        else:
            ok, text = True, ""
        if not ok:
            raise field_problem(problem, at=at, allowed=text, got=v)


def _norm(value: Any) -> Any:
    """Lists and tuples compare equal (YAML gives lists, planners may give tuples)."""
    return tuple(_norm(v) for v in value) if isinstance(value, (list, tuple)) else value


# --- loading -----------------------------------------------------------------------------------

def load_rule(path: str | os.PathLike[str], profiles_dir: str | os.PathLike[str] | None = None) -> Rule:
    """Read and validate one rule file (name, schema, id = file number); errors are one-line. `match.profile` is
    checked against the profiles of `profiles_dir` (default: the planner's, kda2.plan.profile.default_profiles_dir)."""
    name = Path(path).name
    if not re.match(FILE_PATTERN, name):
        raise RuleError(f"{path}: file name must match {FILE_PATTERN} (NNNN-slug.yaml)")
    data = read_yaml_mapping(path, RuleError, "mapping with keys " + ", ".join(Rule.model_fields))
    try:
        rule = Rule.model_validate(data, context={"profiles_dir": profiles_dir})
    except ValidationError as exc:
        raise RuleError(format_validation_error(exc, Rule, str(path))) from None
    if rule.id != int(name[:4]):
        raise RuleError(f"{path}: id: must equal the number in the file name; "
                        f"allowed: {int(name[:4])} (got {rule.id})")
    rule._path = Path(path)
    return rule


def _rule_files(rules_dir: Path) -> list[Path]:
    if not rules_dir.is_dir():
        raise RuleError(f"{rules_dir}: no such directory")
    return sorted(p for p in rules_dir.iterdir()
                  if not p.name.startswith(".") and p.name != LOCK_NAME and not p.name.startswith("README"))


def load_rules(rules_dir: str | os.PathLike[str], profiles_dir: str | os.PathLike[str] | None = None) -> list[Rule]:
    """Every rule of a directory, sorted by id. Dotfiles, README* and the lock file are skipped. `profiles_dir`:
    as for load_rule."""
    rules: dict[int, Rule] = {}
    for path in _rule_files(Path(rules_dir)):
        rule = load_rule(path, profiles_dir)
        if rule.id in rules:
            raise RuleError(f"{path}: id: duplicate rule id {rule.id} (also {rules[rule.id].path})")
        rules[rule.id] = rule
    return [rules[i] for i in sorted(rules)]


# --- applying ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Applied:
    """The outcome of the rules for one config. `config` None: a rule forbids the variant."""

    config: dict[str, Any] | None
    flags: tuple[str, ...]
    matched: tuple[Rule, ...]
    digest: str


def rules_digest(matched: Iterable[Rule]) -> str:
    """Digest of the matched rules' bodies (in order) under this matcher version."""
    text = f"kda2-rules-matcher-{MATCHER_VERSION}:" + canonical_json([r.body() for r in matched])
    return hashlib.sha256(text.encode()).hexdigest()


def apply_rules(rules: Iterable[Rule], config: Mapping[str, Any]) -> Applied:
    """Apply rules in id order, each to the config as earlier rules left it; forbid stops."""
    current: dict[str, Any] | None = dict(config)
    flags: list[str] = []
    matched: list[Rule] = []
    for rule in sorted(rules, key=lambda r: r.id):
        assert current is not None
        if not rule.matches(current):
            continue
        matched.append(rule)
        if rule.action == "forbid":
            current = None
            break
        if rule.action == "set":
            current.update(rule.set or {})
        else:
            flags.extend(rule.flags or [])
    return Applied(current, tuple(flags), tuple(matched), rules_digest(matched))


def unmatched(rules: Iterable[Rule], configs: Iterable[Mapping[str, Any]]) -> list[Rule]:
    """Rules that match none of `configs`, as given or as earlier rules rewrite them (warnings)."""
    rules = list(rules)
    used: set[int] = set()
    for config in configs:
        used.update(r.id for r in rules if r.matches(config))
        used.update(r.id for r in apply_rules(rules, config).matched)
    return [r for r in sorted(rules, key=lambda r: r.id) if r.id not in used]


# --- lock --------------------------------------------------------------------------------------

def _read_lock(rules_dir: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    path = rules_dir / LOCK_NAME
    if not path.exists():
        return {}, []
    try:
        lock = json.loads(path.read_text(encoding="utf-8"))
        ok = isinstance(lock, dict) and all(
            re.fullmatch(r"\d{4}", k) and isinstance(v, dict) and type(v.get("version")) is int
            and isinstance(v.get("digest"), str) for k, v in lock.items())
    except (OSError, ValueError) as exc:
        return {}, [f"{path}: unreadable ({' '.join(str(exc).split())}); run `kda2 rules lock`"]
    if not ok:
        return {}, [f"{path}: not a mapping of NNNN to {{version, digest}}; run `kda2 rules lock`"]
    return lock, []


def _problems(rules: list[Rule], lock: Mapping[str, Mapping[str, Any]], lock_path: Path,
              ) -> tuple[list[str], list[str]]:
    """(problems only a version bump fixes, problems `kda2 rules lock` fixes)."""
    fatal: list[str] = []
    stale: list[str] = []
    for rule in rules:
        entry = lock.get(f"{rule.id:04d}")
        if entry is None:
            stale.append(f"{rule.path}: not in {lock_path}; run `kda2 rules lock`")
        elif rule.version < entry["version"]:
            fatal.append(f"{rule.path}: version {rule.version} is lower than the locked version "
                         f"{entry['version']}; versions only go up")
        elif rule.version == entry["version"] and rule.body_digest() != entry["digest"]:
            fatal.append(f"{rule.path}: body changed without a version bump (locked version "
                         f"{entry['version']}); bump `version` and run `kda2 rules lock`")
        elif rule.version > entry["version"]:
            stale.append(f"{rule.path}: version {rule.version} is not locked (locked version "
                         f"{entry['version']}); run `kda2 rules lock`")
    ids = {f"{r.id:04d}" for r in rules}
    stale += [f"{lock_path}: entry {key} has no rule file; run `kda2 rules lock`"
              for key in sorted(lock) if key not in ids]
    return fatal, stale


def check_lock(rules_dir: str | os.PathLike[str]) -> list[str]:
    """One-line problems between the rule files and `rules.lock.json`; empty means consistent."""
    root = Path(rules_dir)
    rules = load_rules(root)
    lock, unreadable = _read_lock(root)
    if unreadable:
        return unreadable
    if not lock and rules and not (root / LOCK_NAME).exists():
        return [f"{root / LOCK_NAME}: missing; run `kda2 rules lock`"]
    fatal, stale = _problems(rules, lock, root / LOCK_NAME)
    return fatal + stale


def write_lock(rules_dir: str | os.PathLike[str]) -> Path:
    """Record every rule's version and body digest; refuses to bless an edit made without a bump."""
    root = Path(rules_dir)
    rules = load_rules(root)
    lock, _ = _read_lock(root)  # an unreadable lock is replaced: it cannot protect anything
    fatal, _ = _problems(rules, lock, root / LOCK_NAME)
    if fatal:
        raise RuleError(fatal[0] + (f" (+{len(fatal) - 1} more)" if len(fatal) > 1 else ""))
    path = root / LOCK_NAME
    body = {f"{r.id:04d}": {"version": r.version, "digest": r.body_digest()} for r in rules}
    write_text(path, json.dumps(body, indent=2, sort_keys=True) + "\n")  # a crash never half-writes the lock
    return path
