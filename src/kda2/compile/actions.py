"""SCons actions of the build graph: thin adapters from (target, source, env) to the stage functions.

Each action imports its stage lazily, inside the function, and `kda2.compile.signature` reads exactly
those imports to sign the node: what an action imports is what its signature covers (docs/DESIGN.md
§4). So keep module-level imports here to the standard library and kda2.artifact.atomic.
Sources are laid out by `kda2.compile.graph`: source[0] is the primary input file or Value, the rest
follow the order documented per action.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from kda2.artifact.atomic import write_text


def _json(node) -> dict:
    return json.loads(node.read())


def _ctx(env) -> dict:
    """Tool paths and options resolved once per build (outside the signatures: they are locations)."""
    return env["KDA2_CTX"]


def _fail(step: str, target, err: Exception) -> int:
    sys.stderr.write(f"kda2: error: {step} {target}: {err}\n")
    return 1


def tir_action(target, source, env):
    """source[0]: Value {"config", "smem_budget"}. Targets: plan.json, tir_before, tir_after."""
    from kda2.tir import TirError, write_plan  # TVM is imported only when a plan is really (re)built

    d = _json(source[0])
    try:
        write_plan(d["config"], d["smem_budget"], str(target[0]), str(target[1]), str(target[2]))
    except TirError as e:
        return _fail("tir", target[0], e)
    return 0


def render_action(target, source, env):
    """source[0]: plan.json, source[1]: Value {"config"}; templates follow as File sources."""
    from kda2.codegen.render import render_variant

    plan = json.loads(Path(str(source[0])).read_text())
    write_text(str(target[0]), render_variant(_json(source[1])["config"], plan))
    return 0


def why_action(target, source, env):
    """source[0]: Value with the agents' and rules' reasons: the sidecar beside the kernel."""
    write_text(str(target[0]), json.dumps(_json(source[0]), indent=1, sort_keys=True) + "\n")
    return 0


def nvcc_action(target, source, env):
    """source[0]: the .cu, source[1]: Value {"arch", "flags"}; headers arrive through the C scanner."""
    from kda2.compile.nvcc import ToolError, compile_device

    ctx, d = _ctx(env), _json(source[1])
    try:
        compile_device(ctx["toolchain"], Path(str(source[0])), Path(str(target[0])), arch=d["arch"],
                       flags=d["flags"], include_dirs=ctx["include_dirs"], verbose=ctx["verbose"],
                       lto=d.get("lto", True))
    except ToolError as e:
        return _fail("nvcc -dc", target[0], e)
    return 0


def nvlink_action(target, source, env):
    """source[0]: the LTO object (PTX where lto is false), source[1]: Value {"arch", "flags"[, "lto"]}. Targets:
    cubin, ptxas log."""
    from kda2.compile.nvcc import ToolError, device_link

    ctx, d = _ctx(env), _json(source[1])
    try:
        device_link(ctx["toolchain"], Path(str(source[0])), Path(str(target[0])), Path(str(target[1])),
                    arch=d["arch"], flags=d["flags"], nvvm_dir=ctx["nvvm_dir"], verbose=ctx["verbose"],
                    lto=d.get("lto", True))
    except ToolError as e:
        return _fail("nvlink", target[0], e)
    return 0


def resources_action(target, source, env):
    """source[0]: ptxas log, source[1]: Value {"allow_spills", "max_registers", "kernel"}."""
    from kda2.compile.ptxas import advice, check, parse_ptxas, to_json

    d = _json(source[1])
    res = parse_ptxas(Path(str(source[0])).read_text())
    limits = {"allow_spills": d["allow_spills"], "max_registers": d["max_registers"]}
    problems = check(res, **limits)
    if problems:
        todo = advice(d["kernel"], res, **limits)
        sys.stderr.write(f"kda2: error: {d['kernel']}: {'; '.join(problems)}." + (f" {todo}" if todo else "") + "\n")
        return 1
    write_text(str(target[0]), to_json(res))
    return 0


def library_render_action(target, source, env):
    """source[0]: Value {"spec", "arch", "variants", "dispatch", "library_json"}; variants whose launch needs their
    plan (chunk variants, bulk-staged recurrent ones: codegen.render.launch_keys) name its plan.json (a source too)."""
    from kda2.codegen.render import launch_keys, render_library

    d = _json(source[0])
    variants = []
    for v in d["variants"]:
        if "plan_path" in v:
            plan = json.loads(Path(v["plan_path"]).read_text())
            v = dict(v, plan={k: plan[k] for k in launch_keys(v["config"])})
        variants.append(v)
    write_text(str(target[0]), render_library(d["spec"], d["arch"], variants, d["dispatch"],
                                                  json.dumps(d["library_json"]), d["features"]))
    return 0


def cxx_action(target, source, env):
    """source[0]: library.cpp; the cubins it embeds and the ABI header are dependencies."""
    from kda2.compile.nvcc import ToolError, compile_host

    ctx = _ctx(env)
    try:
        compile_host(ctx["toolchain"], Path(str(source[0])), Path(str(target[0])),
                     include_dirs=ctx["host_include_dirs"], verbose=ctx["verbose"])
    except ToolError as e:
        return _fail("c++", target[0], e)
    return 0


def link_action(target, source, env):
    from kda2.compile.nvcc import ToolError, link_shared

    try:
        link_shared(_ctx(env)["toolchain"], Path(str(source[0])), Path(str(target[0])), verbose=_ctx(env)["verbose"])
    except ToolError as e:
        return _fail("link", target[0], e)
    return 0


def manifest_action(target, source, env):
    """source[0]: Value with the manifest's fixed part; the files it lists follow (the last source of
    every node is its code digest, see kda2.compile.graph)."""
    from kda2.artifact.manifest import build_manifest

    base = _json(source[0])
    write_text(str(target[0]), build_manifest(base, [str(s) for s in source[1:-1]], str(Path(str(target[0])).parent)))
    return 0
