"""`kda2 inspect`: what a built library holds — per kernel registers, shared memory and spills (ptxas),
the SASS check (kda2.compile.sass), the buckets that route to it, for a chunk variant on sm_90+ whether its
state CTA fits on an SM beside a prep CTA (the overlapped launch's condition, by the arch's default hardware
profile), and on request the agents' and rules' reasons from its `.why.json` sidecar.

Every file the manifest lists is checked against its sha256 first (as `kda2 verify` checks a bundle's): a report
on files that are not the build's would blame the kernel for what a stale copy or a mix of two builds holds. A
variant whose cubin fails that check gets no SASS verdict; each bad file is one FAIL line naming it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Collection, Sequence

from kda2.artifact.bundle import file_problem
from kda2.compile import sass
from kda2.plan.hardware import PDL_ARCHS


def _fail(msg: str) -> int:
    print(f"kda2: error: {msg}", file=sys.stderr)
    return 2


class _Unusable(Exception):
    """A variant's sidecar (its .plan.json or .why.json) that inspect cannot read: str() names the file."""


def _sidecar(root: Path, v: dict, key: str, need: Sequence[str]) -> dict:
    """The JSON sidecar v[key] (`plan`, `why`) of a variant, holding the fields `need`; else _Unusable."""
    path = root / v[key]
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise _Unusable(f"missing file {path} (the {key} file of variant {v['id']})") from None
    except (OSError, ValueError) as e:
        raise _Unusable(f"{path}: unreadable {key} file of variant {v['id']} ({type(e).__name__}: {e})") from None
    lacking = [f for f in need if not isinstance(data, dict) or f not in data]
    if lacking:
        raise _Unusable(f"{path}: the {key} file of variant {v['id']} has no {', '.join(map(repr, lacking))}")
    return data


def _unshown(what: str, rel: str, e: _Unusable, bad: Collection[str], problems: list[str], rebuild: str) -> str:
    """The report line in place of what an unreadable sidecar `rel` would have shown; its problem goes to `problems`
    unless check_files found the file missing or changed (then that FAIL line names it already)."""
    if rel not in bad:
        problems.append(f"{e}; rebuild it ({rebuild})")
    return f"{what}: not shown ({rel}: see its FAIL line)"


def check_files(root: Path, manifest: Path, files: dict) -> dict[str, str]:
    """{listed file: what is wrong with it} for each file of the manifest's `files` that is missing or whose
    sha256 differs."""
    if not isinstance(files, dict):
        raise TypeError("'files' is not a table of file names and sha256s")
    return {rel: problem for rel, sha in sorted(files.items()) if (problem := file_problem(root / rel, sha, manifest))}


def _profile(arch: str):
    """The arch's default hardware profile (profiles/, KDA2_PROFILES_DIR), or None where there is none."""
    from kda2.plan.profile import ProfileError, default_profile, load_profiles

    try:
        return default_profile(load_profiles(), arch)
    except ProfileError:
        return None


def _routes(m: dict, vid: str) -> str:
    classes: dict[str, list[str]] = {}  # "<layout> T<=<bucket>" -> the batch classes routed here
    for d in m["dispatch"]:
        if d["variant"] == vid:
            classes.setdefault(f"{d['state_layout']} T<={d['bucket']}", []).append(d.get("class", ""))
    rows = [f"{k} ({', '.join(c)})" if any(c) else k for k, c in classes.items()]
    return ", ".join(rows) if rows else "tuning candidate only"


#: the chunk kernels of a variant in launch order (codegen/render.py chunk_symbols); the combine serves every dtype
_CHUNK_STAGES = ("prep", "state", "fold", "combine", "fused")   # fused: the fused twin's kernel


def entry_of(kernel: str, vid: str, family: str) -> tuple[str | None, str, str]:
    """(chunk stage or None, input dtype, state dtype) of a kernel entry named kda2_<family>_[<stage>_][f16_][s16_]<id>
    (codegen/render.py kernel_symbols: no infix is bf16 inputs and fp32 states)."""
    middle = kernel.removeprefix(f"kda2_{family}_").removesuffix(vid).strip("_")
    words = middle.split("_") if middle else []
    stage = words.pop(0) if family == "chunk" and words and words[0] in _CHUNK_STAGES else None
    return stage, "fp16" if "f16" in words else "bf16", "bf16" if "s16" in words else "fp32"


def entry_label(kernel: str, vid: str, family: str) -> str:
    """What one inspect line is: `bf16 in, fp32 state` (recurrent), `prep fp16` / `combine (any dtype)` (chunk);
    the kernel's own name where it does not follow the naming."""
    stage, dtype, state = entry_of(kernel, vid, family)
    if not kernel.startswith(f"kda2_{family}_") or not kernel.endswith(vid) or (family == "chunk" and stage is None):
        return kernel
    if family != "chunk":
        return f"{dtype} in, {state} state"
    return "combine (any dtype)" if stage == "combine" else f"{stage} {dtype}"


def _entry_order(kernel: str, vid: str, family: str) -> tuple:
    stage, dtype, state = entry_of(kernel, vid, family)
    return (_CHUNK_STAGES.index(stage) if stage in _CHUNK_STAGES else -1, state != "fp32", dtype != "bf16", kernel)


def _describe(root: Path, v: dict, family: str, kernel: str, bad: Collection[str] = ()) -> str:
    """The config words of an inspect line (and, for chunk, the kernel's dynamic shared memory, unless its plan
    file is in `bad`: not the build's)."""
    c = v["config"]
    if family != "chunk":
        bounds = f" launch bounds {c['min_ctas']} CTA/SM" if c.get("min_ctas", 1) > 1 else ""
        bounds += f" preload {c['preload']} tokens" if c.get("preload") else ""
        bounds += " persistent" if c.get("persistent") else ""
        return f"{c['state_layout']} {c['staging']} {c['k_map']} v/warp {c['v_per_warp']} warps {c['warps']}{bounds}"
    text = f"{c['state_layout']} block_v {c['block_v']} stages {c['stages']}" + (" fused twin" if c.get("fused") else "")
    which = entry_of(kernel, v["id"], family)[0]
    # the plan sizes the prep, state and fused kernels only; one that fails its sha256 (a FAIL line of its own) sizes
    # nothing
    if which not in ("prep", "state", "fused") or v["plan"] in bad:
        return text
    try:  # an unreadable plan only drops these words here: its FAIL line comes from _beside (sm_90+)
        plan = _sidecar(root, v, "plan", (f"{which}_smem_bytes", f"{which}_threads"))
        text += f"  {which}: dynamic smem {plan[f'{which}_smem_bytes']} B, {plan[f'{which}_threads']} threads"
    except _Unusable:
        pass
    return text


def _beside(root: Path, v: dict, hw) -> str:
    """Chunk: whether a state CTA fits on an SM beside a prep CTA (the overlapped launch's condition), by the
    profile's figures and the built kernels' (first input dtype: the ones the library checks)."""
    from kda2.plan.model import Resources, spare_beside

    plan = _sidecar(root, v, "plan", ("prep_smem_bytes", "prep_threads", "state_smem_bytes", "state_threads"))
    res = {}
    for which in ("prep", "state"):
        r = v["resources"][f"kda2_chunk_{which}_{v['id']}"]
        res[which] = Resources(r["registers"], plan[f"{which}_smem_bytes"] + r["smem"], 0, plan[f"{which}_threads"],
                               "ptxas")
    spare = spare_beside(res["prep"], res["state"], hw)
    over = [f"{k} over by {-n}" for k, n in spare.items() if n < 0]
    verdict = ("fits (" + ", ".join(f"{n} {k} to spare" for k, n in spare.items()) + ")" if not over
               else "does not fit (" + ", ".join(over) + "): never overlapped")
    return f"    beside a prep CTA on {hw.name}: {verdict}"


def inspect_variant(root: Path, v: dict, family: str, arch: str,
                    bad: Collection[str] = ()) -> tuple[list[str], list[str]]:
    """(report lines, problems) for one variant of a manifest; `bad`: the listed files that are missing or not the
    build's (check_files), each already a problem of its own."""
    lines, problems = [f"  {v['name']}"], []
    kernels = sorted(v["resources"], key=lambda k: _entry_order(k, v["id"], family))
    labels = {k: entry_label(k, v["id"], family) for k in kernels}
    width = max(map(len, labels.values()), default=0)
    for kernel in kernels:
        r = v["resources"][kernel]
        lines.append(f"    {r['arch']}  {labels[kernel]:<{width}}  regs {r['registers']:>3}  smem {r['smem']:>6} B  "
                     f"stack {r['stack']} B  spills {r['spill_stores']}/{r['spill_loads']} B  "
                     f"{_describe(root, v, family, kernel, bad)}")
        if r["spill_stores"] or r["spill_loads"] or r["stack"]:
            problems.append(f"{v['id']}: {kernel} spills or uses a stack frame")
    if v["cubin"] in bad:  # its SASS is another kernel's, or none: a verdict would blame this variant for it
        lines.append(f"    SASS: not checked: {v['cubin']} is missing or not the build's (see its FAIL line)")
        return lines, problems
    ops = sass.sass_opcodes(root / v["cubin"])
    expected, missing, local = sass.check(ops, family, arch, v["config"])
    lines.append(f"    SASS: {sum(ops.values())} instructions; expected {' '.join(expected)}: "
                 f"{'all present' if not missing else 'MISSING ' + ' '.join(missing)}; local memory: "
                 f"{'none' if not local else ' '.join(local)}")
    if missing:
        problems.append(f"{v['id']}: expected SASS instructions missing: {' '.join(missing)}")
    if local:
        problems.append(f"{v['id']}: local-memory instructions {' '.join(local)}")
    return lines, problems


def inspect_manifest(artifact: str, variant: str | None = None, reasons: bool = False) -> int:
    path = Path(artifact)
    manifest = path / "manifest.json" if path.is_dir() else path
    if not manifest.is_file() or manifest.suffix != ".json":
        archs = sorted(p.parent.name for p in path.glob("*/manifest.json")) if path.is_dir() else []
        if archs:  # build/<spec>: say which arch directories to inspect (kda2.load picks one for the GPU there)
            return _fail(f"{artifact}: a spec's build; inspect one arch: "
                         + " or ".join(f"kda2 inspect {path / a}" for a in archs))
        return _fail(f"{artifact}: not a manifest.json or a build/<spec>/<arch> directory")
    root = manifest.parent
    all_problems: list[str] = []
    rebuild = "`kda2 build`"
    try:
        m = json.loads(manifest.read_text())
        if "bundle" in m:  # a vendored bundle carries the library only: its kernels' files stayed in the build
            return _fail(f"{manifest}: a vendored bundle (no cubins or ptxas reports travel); check it with "
                         f"`kda2 verify`, inspect the build it came from")
        variants = m["variants"]
        if variant and variant not in {v["id"] for v in variants}:
            return _fail(f"{manifest}: no variant {variant}; it has {', '.join(v['id'] for v in variants)}")
        rebuild = f"`kda2 build {'--candidates all ' if m.get('candidates') == 'all' else ''}{m['spec']}`"
        bad = check_files(root, manifest, m["files"])
        # (the build remakes an output changed in place: compile/graph.py drop_changed_outputs)
        all_problems += [f"{p}; rebuild it ({rebuild})" for p in bad.values()]
        # the overlapped launch needs a programmatic dependent launch (library.cpp.j2 kPdl)
        hw = _profile(m["arch"]) if m["family"] == "chunk" and m["arch"] in PDL_ARCHS else None
        print(f"{m['spec']} / {m['arch']}: {len(variants)} kernels for {len(m['dispatch'])} dispatch rows, "
              f"library {m['library']['path']}, toolchain {m['toolchain']['nvcc']}")
        for v in variants:
            if variant and v["id"] != variant:
                continue
            lines, problems = inspect_variant(root, v, m["family"], m["arch"], bad)
            lines.insert(1, f"    routes: {_routes(m, v['id'])}")
            if hw is not None:
                try:
                    lines.insert(2, _beside(root, v, hw))
                except _Unusable as e:
                    lines.insert(2, _unshown(f"    beside a prep CTA on {hw.name}", v["plan"], e, bad, problems,
                                             rebuild))
            if reasons:
                try:
                    why = _sidecar(root, v, "why", ("reasons",))
                    lines += [f"      [{who}] {text}" for who, text in why["reasons"]]
                except _Unusable as e:
                    lines.append(_unshown("      reasons", v["why"], e, bad, problems, rebuild))
            print("\n".join(lines))
            all_problems += problems
    except (FileNotFoundError, RuntimeError) as e:
        return _fail(f"{e.filename}: {e.strerror}; rebuild it ({rebuild})" if getattr(e, "filename", None)
                     else str(e))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, IndexError) as e:
        return _fail(f"{manifest}: unreadable manifest ({type(e).__name__}: {e}); rebuild it with {rebuild}")
    if all_problems:
        for p in all_problems:
            print(f"kda2 inspect: FAIL {p}", file=sys.stderr)
        return 1
    print("kda2 inspect: ok (no spills, expected instructions present)")
    return 0
