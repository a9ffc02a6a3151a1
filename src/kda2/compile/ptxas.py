"""Resource usage of built kernels, read from ptxas's `-v` log (nvlink runs ptxas under -dlto)."""
from __future__ import annotations

import json
import re
from typing import Any

_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>sm_\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_EXTRA = re.compile(r"(\d+) bytes (smem|cmem\[\d+\]|cumulative stack size)|used (\d+) barriers")


def parse_ptxas(log: str) -> dict[str, dict[str, Any]]:
    """{kernel: {arch, registers, smem, barriers, stack, spill_stores, spill_loads}} per entry function."""
    out: dict[str, dict[str, Any]] = {}
    cur: dict[str, Any] | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            cur = out.setdefault(m["name"], {"arch": m["arch"], "registers": 0, "smem": 0, "barriers": 0,
                                             "stack": 0, "spill_stores": 0, "spill_loads": 0})
        elif cur is not None and (m := _FRAME.search(line)):
            cur["stack"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        elif cur is not None and (m := _USED.search(line)):
            cur["registers"] = int(m[1])
            for e in _EXTRA.finditer(m[2]):
                if e[3]:
                    cur["barriers"] = int(e[3])
                elif e[2] == "smem":
                    cur["smem"] = int(e[1])
                elif e[2].startswith("cmem"):
                    cur[e[2].replace("[", "").replace("]", "")] = int(e[1])
    return out


def check(res: dict[str, dict[str, Any]], *, allow_spills: bool, max_registers: int) -> list[str]:
    """Problems that make a variant unshippable (empty list: fine), each naming the entry function and its figures.

    Spills (or a stack frame: local memory per thread) are a problem when budget.allow_spills is false; registers
    when ptxas used more than budget.max_registers (the budget is a check, not a cap passed to ptxas)."""
    if not res:
        return ["ptxas reported no entry function (was -Xptxas -v passed to the LTO link?)"]
    problems = []
    for name, r in sorted(res.items()):
        if not allow_spills and (r["spill_stores"] or r["spill_loads"]):
            problems.append(f"{name} spills ({r['spill_stores']} B stores, {r['spill_loads']} B loads, "
                            f"{r['stack']} B stack frame) and budget.allow_spills is false")
        elif not allow_spills and r["stack"]:
            problems.append(f"{name} has a {r['stack']} B stack frame (local memory, no spill stores or loads) "
                            "and budget.allow_spills is false")
        if r["registers"] > max_registers:
            problems.append(f"{name} needs {r['registers']} registers per thread, more than budget.max_registers "
                            f"{max_registers}")
    return problems


def advice(kernel: str, res: dict[str, dict[str, Any]], *, allow_spills: bool, max_registers: int) -> str:
    """What the spec's author can do about `check`'s problems for variant `kernel` (empty when there are none).

    A register overrun is fixed by a budget of at least what ptxas used (lowering it only widens the gap), or by
    leaving the config out; spills by accepting them, or by a config that holds fewer registers."""
    knobs = ("narrow the agents' knobs (agents.chunk: block_v, stages, state_mma, prep_wu)"
             if kernel.startswith("kda2_chunk_") else "ask the agents for fewer value columns per warp (agents.tile.v_per_warp)")
    forbid = "add a rule that forbids this config (rules/NNNN-slug.yaml, action: forbid)"
    out = []
    need = max((r["registers"] for r in res.values()), default=0)
    if need > max_registers:
        out.append(f"Raise budget.max_registers to at least {need} in the spec; or {knobs} so the planner no longer "
                   f"proposes this config; or {forbid}.")
    if not allow_spills and any(r["spill_stores"] or r["spill_loads"] or r["stack"] for r in res.values()):
        out.append(f"Set budget.allow_spills: true in the spec to accept the local memory; or {knobs} (configs "
                   f"that hold fewer registers); or {forbid}, or one that passes ptxas options (action: flags).")
    return " ".join(out)


def to_json(res: dict[str, dict[str, Any]]) -> str:
    """The resources.json bytes (key-sorted, one spelling)."""
    return json.dumps(res, sort_keys=True, separators=(",", ":")) + "\n"
