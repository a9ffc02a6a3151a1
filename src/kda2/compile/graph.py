"""Declares the build graph as SCons nodes (docs/DESIGN.md §4):

    plan ─▶ TIR (plan.json) ─▶ render (.cu) ─▶ nvcc -dc (.o) ─▶ nvlink -dlto (.cubin, ptxas.log) ─▶ resources
                                                   per spec and arch: library.cpp ─▶ .o ─▶ .so ─▶ manifest.json

A node's signature is exactly what its output depends on: its input files' content, a Value with the
inputs that are data (the kernel config for TIR/render, arch and flags for the tools), the toolchain
identity where a tool runs, and the code digest of its action (`kda2.compile.signature`): the source
of every kda2 module the action can import, and the versions of third-party packages it uses. Rule
and agent prose is in no signature: it goes to a `<kernel>.why.json` sidecar. The content decider
stops a rebuild at the first output that comes out unchanged.

Absolute paths never enter a signature, so checkouts share cache entries; every action writes
through a temporary name and `os.replace`, so a killed build leaves no finished-looking partial file.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import SCons.Scanner.C
from SCons.Action import Action  # not env.Action: that substitutes $TARGET before there is one

from kda2.artifact.abi import ABI_VERSION
from kda2.artifact.canonical import canonical_json
from kda2.artifact.manifest import MANIFEST_ONLY_ROW_FIELDS, SCHEMA as MANIFEST_SCHEMA, check_candidates, sha256_file
from kda2.codegen.render import FAMILY_TEMPLATES, INCLUDE_DIR, LIBRARY_TEMPLATES, TEMPLATE_DIR, launch_keys
from kda2.compile.nvcc import uses_arch_features
from kda2.compile import actions, signature
from kda2.compile.toolchain import Toolchain, find_toolchain
from kda2.plan.cache import load_plans
from kda2.plan.model import smem_budget as variant_smem_budget
from kda2.plan.planner import built
from kda2.spec.knobs import RUNTIME_FEATURES

#: Headers are found by SCons' C scanner, so a kernel is rebuilt when a header it includes changes, and only
#: then. It scans the template a source is rendered from (its #include lines are the rendered file's, and it
#: exists when the graph is declared) and the headers are declared as the object's dependencies: scanning the
#: rendered file itself, a parallel build that re-rendered it recorded the object without its headers, so the
#: next `scons -q` found them "new" and reported the tree out of date after a successful build.
_C_SCANNER = SCons.Scanner.C.CScanner()


def _headers(env, template: Path) -> list:
    """Every kda2 header a file rendered from `template` includes, directly or not (_Nodes.headers: once per build)."""
    scan_env = env.Clone(CPPPATH=[str(INCLUDE_DIR)])
    return env.File(str(template)).get_implicit_deps(scan_env, _C_SCANNER, lambda scanner: scanner.path(scan_env))


def _progress(kind: str):
    def show(target, source, env):
        return f"kda2 {kind:<9} {target[0]}"
    return show


class _Nodes:
    """The per-build constants every node declaration needs."""

    def __init__(self, env, tc: Toolchain, verbose: bool):
        self.env = env
        self.tc_ident = tc.ident()
        self.tc_value = env.Value(canonical_json(self.tc_ident))
        self.code = {fn: env.Value(signature.action_digest(fn)) for fn in (
            actions.tir_action, actions.render_action, actions.why_action, actions.nvcc_action,
            actions.nvlink_action, actions.resources_action, actions.library_render_action,
            actions.cxx_action, actions.link_action, actions.manifest_action)}
        self.verbose = verbose
        self._headers: dict[str, list] = {}
        self.targets: list = []   # every output declared, for drop_changed_outputs

    def headers(self, template: str) -> list:
        """The headers of a template (TEMPLATE_DIR), scanned once however many objects are rendered from it."""
        if template not in self._headers:
            self._headers[template] = _headers(self.env, TEMPLATE_DIR / template)
        return self._headers[template]

    def command(self, kind: str, fn, targets, sources, **kw):
        """A node running `fn`, its code digest appended as the last source."""
        nodes = self.env.Command(targets, [*sources, self.code[fn]], Action(fn, _progress(kind)), **kw)
        self.targets.extend(nodes)
        return nodes


def drop_changed_outputs(env, targets) -> list[str]:
    """Remove every output whose content is no longer what this build tree recorded when it made it (under -n / -q
    only mark it out of date), and return their paths. SCons decides from its inputs' signatures alone, so an
    output changed in place (a flipped byte, a copy from another tree) would stay, and the manifest — whose
    sources are the outputs' contents — would sign it;
    removed, the output is made again (from the cache, which verifies its entries, or by its tool). The recorded
    content is each output's sha256 in the tree's .sconsign, there once a later node has read the output (so not for
    the manifest itself: the loaders and `kda2 verify` check it). The database is read directly: SCons fixes its
    name at first use, and during the SConscripts the hash format set there is not in effect yet."""
    import pickle

    import SCons.dblite

    fmt = env.GetOption("hash_format")
    db_path = os.path.join(env.Dir("#").abspath, f".sconsign_{fmt}")
    if not fmt or not os.path.exists(db_path + SCons.dblite.DBLITE_SUFFIX):
        return []
    db, entries, removed = SCons.dblite.open(db_path, "r"), {}, []
    for node in targets:
        path = node.get_abspath()
        if not os.path.isfile(path):
            continue
        key = os.path.normcase(node.dir.get_tpath())
        if key not in entries:
            try:
                entries[key] = pickle.loads(db[key])
            except Exception:   # no entry for the directory, or one SCons itself would ignore as corrupt
                entries[key] = {}
        recorded = getattr(getattr(entries[key].get(node.name), "ninfo", None), "csig", None)
        actual = sha256_file(path) if recorded else None
        if recorded and actual != recorded:
            asking = env.GetOption("no_exec") or env.GetOption("question")   # -n / -q change nothing
            print(f"kda2: warning: {node} changed since this tree built it (sha256 {actual[:16]}… "
                  f"!= {recorded[:16]}… recorded): {'out of date' if asking else 'removed, it is made again'}",
                  file=sys.stderr)
            if asking:
                env.AlwaysBuild(node)
            else:
                os.remove(path)
            removed.append(str(node))
    return removed


def _variant_nodes(n: _Nodes, plan, pv, out: Path) -> dict:
    env, spec = n.env, plan.spec
    base = out / pv.name
    smem_budget = variant_smem_budget(pv.config, spec.budget.max_smem_bytes, plan.profile.smem_per_block_bytes)
    tir = n.command("tir", actions.tir_action,
                    [f"{base}.plan.json", f"{base}.tir_before.tir", f"{base}.tir_after.tir"],
                    [env.Value(canonical_json({"config": pv.config, "smem_budget": smem_budget}))])
    templates = [env.File(str(TEMPLATE_DIR / t)) for t in FAMILY_TEMPLATES[pv.config["family"]]]
    cu = n.command("render", actions.render_action, f"{base}.cu",
                   [tir[0], env.Value(canonical_json({"config": pv.config})), *templates])
    why = n.command("why", actions.why_action, f"{base}.why.json",
                    [env.Value(canonical_json({"kernel": pv.name, "reasons": [list(r) for r in pv.reasons],
                                               "rules": list(pv.rules), "flags": list(pv.flags)}))])
    # variants using their arch's own features skip the LTO link (compile/nvcc.py uses_arch_features)
    tool = env.Value(canonical_json({"arch": pv.config["arch"], "flags": list(pv.flags),
                                     **({"lto": False} if uses_arch_features(pv.config) else {})}))
    obj = n.command("nvcc -dc", actions.nvcc_action, f"{base}.o", [cu[0], tool, n.tc_value])
    env.Depends(obj, n.headers(FAMILY_TEMPLATES[pv.config["family"]][0]))
    cubin = n.command("nvlink", actions.nvlink_action, [f"{base}.cubin", f"{base}.ptxas.log"],
                      [obj[0], tool, n.tc_value])
    limits = env.Value(canonical_json({"allow_spills": spec.budget.allow_spills, "kernel": pv.name,
                                       "max_registers": spec.budget.max_registers}))
    res = n.command("resources", actions.resources_action, f"{base}.resources.json", [cubin[1], limits])
    return {"plan": tir[0], "tir": list(tir[1:]), "cu": cu[0], "why": why[0], "cubin": cubin[0],
            "log": cubin[1], "resources": res[0]}


def _library_nodes(n: _Nodes, plan, nodes: dict[str, dict], out: Path, candidates: str):
    env, spec, arch = n.env, plan.spec, plan.arch
    lib_name = f"lib{spec.name}.{arch}.so"
    with_plan = [pv for pv in plan.variants if launch_keys(pv.config)]   # launches that need their plan
    plan_paths = {pv.id: str(nodes[pv.id]["plan"]) for pv in with_plan}
    variants = [{"id": pv.id, "name": pv.name, "config": pv.config, "cubin_path": str(nodes[pv.id]["cubin"]),
                 **({"plan_path": plan_paths[pv.id]} if pv.id in plan_paths else {})} for pv in plan.variants]
    # the library's table is routing only (kda2.artifact.manifest MANIFEST_ONLY_ROW_FIELDS stay in the manifest)
    dispatch = [{k: v for k, v in d.items() if k not in MANIFEST_ONLY_ROW_FIELDS} for d in plan.dispatch]
    library_json = {"abi_version": ABI_VERSION, "spec": spec.name, "arch": arch, "family": spec.family,
                    "k": spec.head_dims.k, "v": spec.head_dims.v,  # a C/C++ caller sizes its tensors from these
                    "variants": [pv.id for pv in plan.variants], "dispatch": dispatch}
    desc = env.Value(canonical_json({"spec": spec.name, "arch": arch, "variants": variants, "dispatch": dispatch,
                                     "library_json": canonical_json(library_json),
                                     "features": {f: spec.features[f] for f in RUNTIME_FEATURES}}))
    templates = [env.File(str(TEMPLATE_DIR / t)) for t in LIBRARY_TEMPLATES]
    plans = [nodes[pv.id]["plan"] for pv in with_plan]
    cpp = n.command("render", actions.library_render_action, str(out / "library.cpp"), [desc, *templates, *plans])
    lib_obj = n.command("c++", actions.cxx_action, str(out / "library.o"), [cpp[0], n.tc_value])
    env.Depends(lib_obj, [v["cubin"] for v in nodes.values()])  # embedded with .incbin
    env.Depends(lib_obj, n.headers(LIBRARY_TEMPLATES[0]))
    so = n.command("link", actions.link_action, str(out / lib_name), [lib_obj[0], n.tc_value])

    def rel(node) -> str:
        return os.path.relpath(str(node), str(out))

    base = {"schema": MANIFEST_SCHEMA, "spec": spec.name, "arch": arch, "family": spec.family,
            "abi_version": ABI_VERSION, "toolchain": n.tc_ident,
            "k": spec.head_dims.k, "v": spec.head_dims.v, "features": spec.features,
            "buckets": list(spec.seq_len_buckets), "spec_digest": spec.digest, "library": lib_name,
            "candidates": candidates, "planned": plan.planned,
            "dispatch": [dict(d) for d in plan.dispatch],
            "variants": [{"id": pv.id, "index": i, "name": pv.name, "config": pv.config, "rules": list(pv.rules),
                          "flags": list(pv.flags), "cubin": rel(nodes[pv.id]["cubin"]),
                          "resources": rel(nodes[pv.id]["resources"]), "plan": rel(nodes[pv.id]["plan"]),
                          "why": rel(nodes[pv.id]["why"])}
                         for i, pv in enumerate(plan.variants)]}
    files = [so[0]]
    for pv in plan.variants:
        v = nodes[pv.id]
        files += [v["cubin"], v["resources"], v["plan"], v["cu"], v["log"], v["why"], *v["tir"]]
    man = n.command("manifest", actions.manifest_action, str(out / "manifest.json"),
                    [env.Value(canonical_json(base)), *files])
    return so[0], man[0]


def declare(env, specs_dir: str = "kernel_specs", rules_dir: str = "rules", build_dir: str = "build",
            only: list[str] | None = None, verbose: bool = False, profiles_dir: str | None = None,
            tuning_dir: str = "tuning", candidates: str = "routed") -> list:
    """Declare every node for the specs in `specs_dir`; returns the manifests (the default targets).

    The tuning records reach the nodes through the plan: a changed winner changes the dispatch rows, which
    are in the library render's and the manifest's signatures (docs/DESIGN.md §4). `candidates`: what of each plan
    is compiled (kda2.artifact.manifest.CANDIDATE_SETS): the routed variants, or every candidate (for `kda2 tune`)."""
    check_candidates(candidates)   # before planning: a bad value fails at once
    plans, warnings = load_plans(specs_dir, rules_dir, build_dir, only, profiles_dir, tuning_dir)
    plans = [built(p, candidates) for p in plans]
    for w in warnings:
        print(f"kda2: warning: {w}", file=sys.stderr)
    tc = find_toolchain()
    if not tc.launcher:
        print("kda2: warning: address-space randomisation cannot be turned off here (`setarch -R` missing or "
              "refused): now and then a kernel may compile to other bytes than on another build "
              "(docs/DESIGN.md §4, \"Reproducible kernels\")", file=sys.stderr)
    # Locations, resolved once per build; outside the signatures (they differ between machines).
    env["KDA2_CTX"] = {"toolchain": tc, "verbose": verbose, "include_dirs": [INCLUDE_DIR],
                       "host_include_dirs": [INCLUDE_DIR, tc.include_dir()],
                       "nvvm_dir": tc.nvvm_dir(Path(env.Dir("#build").abspath) / ".toolchain")}
    cache = env.get_CacheDir()
    if hasattr(cache, "tree"):   # the VerifiedCacheDir keys nodes by their path inside the build tree
        cache.tree = env.Dir(build_dir).get_internal_path()
        # $KDA2_REMOTE_CACHE read now (no request is made): a malformed one is said on every run, an up-to-date
        # one included, not first on a build's first local miss
        from kda2.compile import remote
        remote.get()
    n = _Nodes(env, tc, verbose)
    manifests = []
    for plan in plans:
        out = Path(build_dir) / plan.spec.name / plan.arch
        nodes = {pv.id: _variant_nodes(n, plan, pv, out) for pv in plan.variants}
        _, man = _library_nodes(n, plan, nodes, out, candidates)
        manifests.append(man)
    drop_changed_outputs(env, n.targets)
    return manifests
