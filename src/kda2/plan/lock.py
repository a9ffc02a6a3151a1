"""Tune locks, `kernel_specs/<spec>.lock.json`: which kernel `kda2 tune` found fastest per dispatch row
and arch, and what it measured. The planner routes by them; the manifest carries the measured latency."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LOCK_SCHEMA = 1


def lock_path_for(spec_name: str, specs_dir: str | os.PathLike = "kernel_specs") -> Path:
    return Path(specs_dir) / f"{spec_name}.lock.json"


def read_baselines(path: str | os.PathLike) -> dict[str, dict[str, dict[str, Any]]]:
    """Each route's winner and what the lock measured for it, per arch: {arch: {"v_first:1": {"variant",
    "us", "gpu", "date", "shape"}}} (empty if there is no lock): the planner routes by "variant", the
    manifest carries the rest as the runtime monitor's baseline."""
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text())
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for arch, entry in data["archs"].items():
            for key, r in entry["routes"].items():
                cand = r.get("candidates", {}).get(r["variant"], {})
                out.setdefault(arch, {})[key] = {"variant": r["variant"], "us": cand.get("us"),
                                                 "gpu": entry.get("gpu"), "date": entry.get("date"),
                                                 "shape": r.get("shape")}
        return out
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{p}: unreadable tune lock ({e}); delete it or re-run `kda2 tune`") from None


def routes(baselines: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, str]]:
    """{arch: {"k_first:1": variant_id}}: what the planner routes by."""
    return {arch: {key: b["variant"] for key, b in rows.items()} for arch, rows in baselines.items()}


def read_lock(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """The lock's routes per arch: {arch: {"k_first:1": variant_id, ...}} (empty if there is no lock)."""
    return routes(read_baselines(path))
