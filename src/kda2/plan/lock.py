"""Tuning records, `tuning/<spec>.<profile>.json`: which kernel `kda2 tune` found fastest per dispatch row
on one GPU (a hardware profile, kda2.plan.profile), and what it measured. Kept apart from the specs: a spec
says what to build, a record says what one GPU measured. The planner routes by them (the plan cache key
holds their bytes, so a changed record re-routes the build); the manifest carries the measured latency.

Schema 2 (one profile per file):
    {"schema": 2, "spec", "profile", "arch", "gpu", "date", "torch", "library_sha256",
     "routes": {"<layout>:<bucket>": {"variant", "shape": {N, T, H, class}, "spearman",
                                      "candidates": {id: {"us", "error", "model_us", "classes", "rejected"}},
                                      "classes": {class: {"variant", "us", "shape", "split"?}}}}}
`variant`/`shape` are the row's first batch class (what the static model ranks by); `classes` holds each
class's winner (kda2.plan.model.workloads), which its own dispatch row routes to (a record without it routes
every class of the bucket to `variant`). `split` (chunk rows the agents would split): {"segments", "shape",
"us": {segments: us}}, the winner timed at the row's fewest chains split as the agents planned, at half that and
unsplit (kda2.plan.agents.chunk row_split); the fastest is the row's max_split.
Schema 1 (`kernel_specs/<spec>.lock.json`, {"archs": {arch: {gpu, date, routes}}}) is still read, so an old
lock passed by path keeps working; the committed ones were migrated to schema 2 with the same winners.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

LOCK_SCHEMA = 2
RECORD_SCHEMA = LOCK_SCHEMA
DEFAULT_TUNING_DIR = "tuning"


def record_path(spec_name: str, profile: str, tuning_dir: str | os.PathLike = DEFAULT_TUNING_DIR) -> Path:
    return Path(tuning_dir) / f"{spec_name}.{profile}.json"


def partial_path(spec_name: str, profile: str, tuning_dir: str | os.PathLike = DEFAULT_TUNING_DIR) -> Path:
    """Where an interrupted `kda2 tune` keeps what it measured so far (reused by the next run)."""
    return Path(tuning_dir) / f"{spec_name}.{profile}.partial.json"


def failures_path(spec_name: str, profile: str, tuning_dir: str | os.PathLike = DEFAULT_TUNING_DIR) -> Path:
    return Path(tuning_dir) / "failures" / f"{spec_name}.{profile}.jsonl"


def _entry_baselines(entry: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, r in entry["routes"].items():
        cand = r.get("candidates", {}).get(r["variant"], {})
        out[key] = {"variant": r["variant"], "us": cand.get("us"), "gpu": entry.get("gpu"),
                    "date": entry.get("date"), "shape": r.get("shape")}
        for name, c in r.get("classes", {}).items():  # each batch class's own winner
            out[f"{key}:{name}"] = {"variant": c["variant"], "us": c["us"], "gpu": entry.get("gpu"),
                                    "date": entry.get("date"), "shape": c["shape"],
                                    # every candidate's time at the class: the planner's pick of a twin's fallback
                                    "timed": {vid: x["classes"][name] for vid, x in r.get("candidates", {}).items()
                                              if isinstance(x.get("classes"), dict) and name in x["classes"]}}
            if isinstance(c.get("split"), dict):
                out[f"{key}:{name}"]["split"] = int(c["split"]["segments"])
    return out


def read_baselines(path: str | os.PathLike) -> dict[str, dict[str, dict[str, Any]]]:
    """Each route's winner and what the record measured for it, per arch: {arch: {"v_first:1": {"variant",
    "us", "gpu", "date", "shape"}, "v_first:1:decode-n64": {...}}} (empty if there is no file): the planner
    routes by "variant", the manifest carries the rest as the runtime monitor's baseline."""
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text())
        if data.get("schema") == 1:
            return {arch: _entry_baselines(entry) for arch, entry in data["archs"].items()}
        if data.get("schema") != RECORD_SCHEMA:
            raise KeyError(f"schema {data.get('schema')!r}, allowed 1 or {RECORD_SCHEMA}")
        return {data["arch"]: _entry_baselines(data)}
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{p}: unreadable tuning record ({e}); delete it or re-run `kda2 tune`") from None


def read_spec_baselines(spec_name: str, targets: Mapping[str, Any],
                        tuning_dir: str | os.PathLike = DEFAULT_TUNING_DIR) -> dict[str, dict[str, dict[str, Any]]]:
    """Baselines of every target of a spec ({arch: Profile}): tuning/<spec>.<profile>.json per arch."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for arch, prof in targets.items():
        got = read_baselines(record_path(spec_name, prof.name, tuning_dir))
        for rec_arch, rows in got.items():
            if rec_arch != arch:
                raise ValueError(f"{record_path(spec_name, prof.name, tuning_dir)}: arch {rec_arch} but profile "
                                 f"{prof.name} is {arch}; delete it or re-run `kda2 tune`")
            out[arch] = rows
    return out


def routes(baselines: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, str]]:
    """{arch: {"k_first:1": variant_id}}: what the planner routes by."""
    return {arch: {key: b["variant"] for key, b in rows.items()} for arch, rows in baselines.items()}


def tuned_splits(baselines: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, int]]:
    """{arch: {"k_first:8192:prefill-n2": segments}}: the split each class's winner was timed fastest with."""
    return {arch: {key: b["split"] for key, b in rows.items() if "split" in b} for arch, rows in baselines.items()}


def class_times(baselines: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, float]]]:
    """{arch: {"k_first:2048:prefill-n8": {variant id: us}}}: what the record timed every candidate at, per class."""
    return {arch: {key: b["timed"] for key, b in rows.items() if b.get("timed")} for arch, rows in baselines.items()}


def read_lock(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """A record's routes per arch: {arch: {"k_first:1": variant_id, ...}} (empty if there is no file)."""
    return routes(read_baselines(path))
