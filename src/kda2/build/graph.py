"""Declares the build graph as SCons nodes: spec -> plan -> TIR -> render -> nvcc -dc -> nvlink -dlto
-> library -> manifest. Imported only from inside SCons (site_scons/site_tools/kda2.py).

Every node's signature holds exactly what its output depends on: the variant's canonical config (as a
Value), the toolchain id (Value), the digest of only the rules that matched it (Value), and the
template files it renders (File). Absolute paths stay inside $( $) so that two checkouts share cache
entries. Python actions write through a temp file + os.replace, so a killed build never leaves a
half-written target that looks finished.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from SCons.Action import Action  # not env.Action: that substitutes $TARGET before there is one

from kda2 import manifest as manifest_mod
from kda2.atomic import write_text as _atomic_write
from kda2 import resources as resources_mod
from kda2.agents.chunk import ARCH_SMEM_LIMIT
from kda2.build.plan_cache import load_plans
from kda2.render import FAMILY_TEMPLATES, LIBRARY_TEMPLATES, TEMPLATE_DIR
from kda2.toolchain import Toolchain, find_toolchain, gencode
from kda2.runtime.abi import ABI_VERSION
from kda2.variant import canonical_json


STABLE_SRC_DIR = "/tmp/kda2-src"  # see the nvcc -dc action


def _value_json(source: Any) -> Any:
    return json.loads(source.read())


# ---- Python actions (their bytecode is part of each node's signature) ---------------------------

def tir_action(target, source, env):
    from kda2.tir import write_plan  # TVM is imported only when a plan is really (re)built

    d = _value_json(source[0])
    write_plan(d["config"], d["smem_budget"], str(target[0]), str(target[1]), str(target[2]))
    return 0


def render_action(target, source, env):
    from kda2.render import render_variant

    d = _value_json(source[1])
    plan = json.loads(Path(str(source[0])).read_text())
    _atomic_write(str(target[0]), render_variant(d["config"], d["reasons"], plan, d["spec"]))
    return 0


def resources_action(target, source, env):
    d = _value_json(source[1])
    log = Path(str(source[0])).read_text()
    res = resources_mod.parse_ptxas(log)
    problems = resources_mod.check(res, allow_spills=d["allow_spills"], max_registers=d["max_registers"])
    if problems:
        sys.stderr.write(f"kda2: error: variant {d['variant']} ({d['spec']}/{d['arch']}): {'; '.join(problems)}. "
                         f"Lower budget.max_registers / v_per_warp in the spec, or add a rule that forbids "
                         f"this config (rules/NNNN-slug.yaml, action: forbid).\n")
        return 1
    _atomic_write(str(target[0]), canonical_json(res) + "\n")
    return 0


def library_render_action(target, source, env):
    from kda2.render import CHUNK_LAUNCH_KEYS, render_library

    d = _value_json(source[0])
    variants = []
    for v in d["variants"]:
        if "plan_path" in v:  # chunk: launch shapes and shared memory come from the TIR plan (a source)
            plan = json.loads(Path(v["plan_path"]).read_text())
            v = dict(v, plan={k: plan[k] for k in CHUNK_LAUNCH_KEYS})
        variants.append(v)
    _atomic_write(str(target[0]), render_library(d["spec"], d["arch"], variants, d["dispatch"],
                                                 json.dumps(d["library_json"])))
    return 0


def manifest_action(target, source, env):
    d = _value_json(source[0])
    files = [str(s) for s in source[1:]]
    _atomic_write(str(target[0]), manifest_mod.build_manifest(d, files, os.path.dirname(str(target[0]))))
    return 0


def _action(env, cmd, kind: str, verbose: bool):
    """A command action that prints one progress line (or, with VERBOSE=1, the full command)."""
    return Action(cmd) if verbose else Action(cmd, _progress(kind))


def _progress(kind: str):
    def show(target, source, env):
        return f"kda2 {kind:<9} {os.path.dirname(str(target[0]))}"
    return show


# ---- graph ---------------------------------------------------------------------------------------

def tir_code_digest() -> str:
    """sha256 of the TIR stage's code (kda2/tir/*.py and the chunk smem formulas).

    A plan is a function of that code as much as of the config: a new pass or formula must re-plan
    (a plan.json that comes out byte-identical then rebuilds nothing downstream).
    """
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted((root / "tir").glob("*.py")) + [root / "chunk_smem.py"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _variant_nodes(env, tc: Toolchain, tc_value, tir_value, link_dirs: str, plan, pv, out: Path, verbose: bool):
    spec = plan.spec
    vdir = out / pv.id
    # the spec's budget, capped at what the arch can give one block (equal to the spec's for every
    # recurrent spec so far: their budgets are far below the caps)
    smem_budget = min(spec.budget.max_smem_bytes, ARCH_SMEM_LIMIT[plan.arch])
    cfg_value = env.Value(canonical_json({"config": pv.config, "smem_budget": smem_budget}))
    rules_value = env.Value(pv.rules_digest)

    tir = env.Command([str(vdir / "plan.json"), str(vdir / "tir_before.tir"), str(vdir / "tir_after.tir")],
                      [cfg_value, tc_value, tir_value, rules_value],
                      Action(tir_action, _progress("tir")))

    render_value = env.Value(canonical_json({"config": pv.config, "reasons": pv.reasons, "spec": spec.name}))
    templates = [env.File(str(TEMPLATE_DIR / t)) for t in FAMILY_TEMPLATES[pv.config["family"]]]
    cu = env.Command(str(vdir / "kernel.cu"), [tir[0], render_value, *templates],
                     Action(render_action, _progress("render")))

    flags = " ".join(pv.flags)
    obj = env.Command(
        str(vdir / "kernel.o"), [cu[0], tc_value, rules_value],
        # nvcc folds the source's absolute path and the working directory into kernel.o (module id,
        # preprocessor line markers), so it compiles a copy at a content-named path, from there: the
        # object is then the same bytes in every checkout that shares the cache. The per-process keep
        # dir and output name keep concurrent builds of the same content apart.
        _action(env, f"d={STABLE_SRC_DIR}/$$(sha256sum < ${{SOURCES[0]}} | cut -c1-32) && mkdir -p $$d && "
                   f"cp ${{SOURCES[0]}} $$d/kernel.cu.$$$$ && mv -f $$d/kernel.cu.$$$$ $$d/kernel.cu && "
                   f"(cd $$d && mkdir -p keep.$$$$ && $( {tc.nvcc} $) -std=c++17 -O3 -Xcompiler -fPIC -dc "
                   f"-gencode {gencode(pv.config['arch'], True)} -diag-suppress 177 $( -I{TEMPLATE_DIR} $) {flags} "
                   f"-keep -keep-dir keep.$$$$ -o {spec.name}.{plan.arch}.{pv.id}.o.$$$$ kernel.cu; rc=$$?; rm -rf keep.$$$$; "
                   f"exit $$rc) && mv -f $$d/{spec.name}.{plan.arch}.{pv.id}.o.$$$$ $TARGET", "nvcc -dc", verbose))
    env.Depends(obj, env.File(str(TEMPLATE_DIR / "kda2_abi.h")))

    link_flags = " ".join(f"-Xptxas {f.split('=', 1)[1]}" for f in pv.flags if f.startswith("-Xptxas="))
    cubin = env.Command(
        [str(vdir / "kernel.cubin"), str(vdir / "ptxas.log")], [obj[0]],
        _action(env, f"$( {tc.nvlink} $) -m64 --arch={pv.config['arch']} -dlto "
                   f"$( {link_dirs} $) "
                   f"-Xptxas -v {link_flags} -lcudadevrt ${{SOURCES[0]}} -o ${{TARGETS[0]}} > ${{TARGETS[1]}}.raw 2>&1; "
                   # ptxas prints its wall time; drop it so the log (an artifact) is reproducible
                   f"rc=$$?; sed '/Compile time/d' ${{TARGETS[1]}}.raw > ${{TARGETS[1]}}; rm -f ${{TARGETS[1]}}.raw; "
                   f"if [ $$rc -ne 0 ]; then cat ${{TARGETS[1]}}; rm -f ${{TARGETS[0]}}; exit $$rc; fi", "nvlink", verbose))

    res_value = env.Value(canonical_json({"allow_spills": spec.budget.allow_spills,
                                          "max_registers": spec.budget.max_registers, "variant": pv.id,
                                          "spec": spec.name, "arch": plan.arch}))
    res = env.Command(str(vdir / "resources.json"), [cubin[1], res_value],
                      Action(resources_action, _progress("resources")))
    return {"plan": tir[0], "tir": tir[1:], "cu": cu[0], "obj": obj[0], "cubin": cubin[0], "log": cubin[1],
            "resources": res[0]}


def _library_nodes(env, tc: Toolchain, tc_value, plan, nodes: dict[str, dict], out: Path, verbose: bool):
    spec, arch = plan.spec, plan.arch
    lib_name = f"lib{spec.name}.{arch}.so"
    chunk = spec.family == "chunk"
    variants = [{"id": pv.id, "config": pv.config, "cubin_path": str(out / pv.id / "kernel.cubin"),
                 **({"plan_path": str(nodes[pv.id]["plan"])} if chunk else {})}
                for pv in plan.variants]
    library_json = {"abi_version": ABI_VERSION, "spec": spec.name, "arch": arch, "family": spec.family,
                    "variants": [pv.id for pv in plan.variants],
                    "dispatch": [dict(d) for d in plan.dispatch]}
    desc = env.Value(canonical_json({"spec": spec.name, "arch": arch, "variants": variants,
                                     "dispatch": [dict(d) for d in plan.dispatch],
                                     "library_json": canonical_json(library_json)}))
    templates = [env.File(str(TEMPLATE_DIR / t)) for t in LIBRARY_TEMPLATES]
    plans = [nodes[pv.id]["plan"] for pv in plan.variants] if chunk else []
    cpp = env.Command(str(out / "library.cpp"), [desc, *templates, *plans],
                      Action(library_render_action, _progress("render")))
    lib_obj = env.Command(
        str(out / "library.o"), [cpp[0], tc_value],
        _action(env, f"$( {tc.cxx} $) -std=c++17 -O2 -fPIC $( -I{TEMPLATE_DIR} -I{tc.include_dir()} $) "
                   f"-c ${{SOURCES[0]}} -o $TARGET", "c++", verbose))
    env.Depends(lib_obj, [n["cubin"] for n in nodes.values()])  # embedded with .incbin
    so = env.Command(str(out / lib_name), [lib_obj[0]],
                     _action(env, f"$( {tc.cxx} $) -shared -Wl,--build-id=none -o $TARGET ${{SOURCES[0]}} -ldl", "link", verbose))

    base = {"schema": manifest_mod.SCHEMA, "spec": spec.name, "arch": arch, "family": spec.family,
            "abi_version": ABI_VERSION, "toolchain": tc.ident(), "k": spec.head_dims.k, "v": spec.head_dims.v,
            "features": spec.features, "buckets": list(spec.seq_len_buckets),
            "spec_digest": spec.digest, "library": lib_name,
            "dispatch": [dict(d) for d in plan.dispatch],
            "variants": [{"id": pv.id, "index": i, "name": pv.name, "config": pv.config, "reasons": pv.reasons,
                          "rules": pv.rules, "flags": pv.flags} for i, pv in enumerate(plan.variants)]}
    files = [so[0]]
    for pv in plan.variants:
        n = nodes[pv.id]
        files += [n["cubin"], n["resources"], n["plan"], n["cu"], n["log"], *n["tir"]]
    man = env.Command(str(out / "manifest.json"), [env.Value(canonical_json(base)), *files],
                      Action(manifest_action, _progress("manifest")))
    return so[0], man[0]


def declare(env, specs_dir: str = "kernel_specs", rules_dir: str = "rules", build_dir: str = "build",
            only: list[str] | None = None, verbose: bool = False) -> list:
    """Declare every node for the specs in `specs_dir`; returns the manifests (the default targets)."""
    plans, warnings = load_plans(specs_dir, rules_dir, build_dir, only)
    for w in warnings:
        print(f"kda2: warning: {w}", file=sys.stderr)
    tc = find_toolchain()
    tc_value = env.Value(canonical_json(tc.ident()))
    tir_value = env.Value(tir_code_digest())
    # Resolved once per build, not per variant (they touch the file system); outside the signatures.
    link_dirs = f"-nvvmpath={tc.nvvm_dir(Path(env.Dir('#build').abspath) / '.toolchain')} -L{tc.lib_dir()}"
    manifests = []
    for plan in plans:
        out = Path(build_dir) / plan.spec.name / plan.arch
        nodes = {pv.id: _variant_nodes(env, tc, tc_value, tir_value, link_dirs, plan, pv, out, verbose)
                 for pv in plan.variants}
        _, man = _library_nodes(env, tc, tc_value, plan, nodes, out, verbose)
        manifests.append(man)
    return manifests
