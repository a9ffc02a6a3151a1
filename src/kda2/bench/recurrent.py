"""Recurrent KDA benchmark: kda2 vs FLA 0.6 `fused_recurrent_kda`, same process, same inputs.

Kimi-Linear configuration for both: unbounded softplus gate in kernel (A_log, dt_bias), q/k l2norm
and beta sigmoid in kernel, fp32 states, K = V = 128, H = HV = 32.
- decode D1-D3: T = 1, N in {1, 64, 256}, states updated IN PLACE in a pool (our pool form; FLA's
  `fused_recurrent_kda_fwd(inplace_final_state=True, ssm_state_indices=...)` when it has them).
- multi-token decode M1: T = 4, N = 64 from the pool, each state read and written once per call.
- D2h, D3h: D2, D3 with the opt-in bf16 state pool (half the state bytes; kda2 only, where the spec builds it).
- prefill S1-S4: T in {64, 512} x N in {1, 8}, initial state in, final state out.
- any decode size from the command line: N<n>T<t> (bf16 pool: N<n>T<t>h), e.g. N128T4.
Reported per row: median GPU time (CUDA events, rotating input sets totalling > 2x L2), bytes moved,
achieved bandwidth as % of a device-to-device copy measured in the same run (1 GiB: the practical HBM ceiling);
for decode also as % of a copy of the call's own bytes (same timing: what a copy of that size reaches, with its own
ramp-up and tail), CUDA-graph replay time and Python wall time per call.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import inspect
import math
import platform
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kda2.bench import host
from kda2.bench.timing import Stats, Timer

H_DEFAULT = 32


@dataclass(frozen=True)
class Shape:
    id: str
    kind: str  # decode | prefill
    N: int
    T: int
    H: int = H_DEFAULT
    state: str = "fp32"  # fp32 | bf16 (the opt-in decode state: features.bf16_decode_state)


SHAPES = [
    Shape("D1", "decode", 1, 1), Shape("D2", "decode", 64, 1), Shape("D3", "decode", 256, 1),
    Shape("M1", "decode", 64, 4),  # multi-token decode (speculative verify): T = 4 per sequence, state in place
    Shape("D2h", "decode", 64, 1, state="bf16"), Shape("D3h", "decode", 256, 1, state="bf16"),  # bf16 states
    Shape("S1", "prefill", 1, 64), Shape("S2", "prefill", 1, 512),
    Shape("S3", "prefill", 8, 64), Shape("S4", "prefill", 8, 512),
]
OPTIONS = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)
#: A decode shape named on the command line: N sequences of T tokens from the state pool (in place), `h` for the
#: bf16 pool, e.g. N128T4 or N512T1h.
CUSTOM_FORM = "N<sequences>T<tokens>[h]"
_CUSTOM = re.compile(r"N(\d+)T(\d+)(h?)")


def resolve_shapes(ids: list[str] | None) -> list[Shape]:
    """Shape ids and decode shapes of the form N<n>T<t>[h] -> shapes: the named ones in SHAPES order, then the
    custom ones as given; default every named shape. ValueError on anything else."""
    if not ids:
        return list(SHAPES)
    by_id = {s.id: s for s in SHAPES}
    custom: list[Shape] = []
    for t in ids:
        if t in by_id:
            continue
        m = _CUSTOM.fullmatch(t)
        if not m:
            raise ValueError(f"unknown shape {t!r}; allowed: {list(by_id)} or {CUSTOM_FORM} (decode from the state "
                             f"pool, h: bf16 states; e.g. N128T4)")
        n, tok = int(m.group(1)), int(m.group(2))
        if n < 1 or tok < 1:
            raise ValueError(f"shape {t!r}: sequences and tokens must each be at least 1")
        if all(t != c.id for c in custom):
            custom.append(Shape(t, "decode", n, tok, state="bf16" if m.group(3) else "fp32"))
    return [s for s in SHAPES if s.id in ids] + custom


def call_bytes(s: Shape, K: int, V: int) -> dict[str, int]:
    """Bytes one call must move at least: inputs read, output written, state read + written."""
    tok, HV = s.N * s.T, s.H
    inputs = tok * s.H * K * 2 * 2 + tok * HV * V * 2 + tok * HV * K * 4 + tok * HV * 4 + HV * 4 + HV * K * 4
    state_bytes = 2 if s.state == "bf16" else 4
    return {"inputs": inputs, "output": tok * HV * V * 2, "state": 2 * s.N * HV * K * V * state_bytes}


def n_sets(s: Shape, K: int, V: int, l2_bytes: int) -> int:
    """Enough rotating input sets that their total footprint is over twice the L2 (min 2, max 128)."""
    per_set = sum(call_bytes(s, K, V).values())
    return max(2, min(128, math.ceil(2 * l2_bytes / per_set) + 1))


# ---- the two implementations ---------------------------------------------------------------------

class Ours:
    name = "kda2"

    def __init__(self, lib):
        from kda2.runtime import fused_recurrent_kda, fused_recurrent_kda_pool

        self.lib, self.dense, self.pool = lib, fused_recurrent_kda, fused_recurrent_kda_pool
        self.entry = "kda2.fused_recurrent_kda_pool (in place)"

    def decode(self, sets, pool, idx, outs, shared, v_first) -> Callable[[int], Any]:
        lib, fn = self.lib, self.pool

        def call(i):
            s = sets[i]
            return fn(s["q"], s["k"], s["v"], s["g"], s["beta"], pool, idx[i], A_log=shared["A_log"],
                      dt_bias=shared["dt_bias"], state_v_first=v_first, library=lib, out=outs[i], **OPTIONS)
        return call

    def prefill(self, sets, outs, shared, v_first) -> Callable[[int], Any]:
        lib, fn = self.lib, self.dense

        def call(i):
            s = sets[i]
            return fn(s["q"], s["k"], s["v"], s["g"], s["beta"], A_log=shared["A_log"], dt_bias=shared["dt_bias"],
                      initial_state=s["h0"], output_final_state=True, state_v_first=v_first, library=lib,
                      out=outs[i], **OPTIONS)[1]
        return call


class FLA:
    """FLA 0.6 through its lowest public entry that takes `out=` (no zero-fill kernel in the timing)."""

    name = "fla"

    def __init__(self):
        from fla.ops.kda import fused_recurrent_kda
        from fla.ops.kda import fused_recurrent as fr

        self.public = fused_recurrent_kda
        self.fwd = getattr(fr, "fused_recurrent_kda_fwd", None)
        params = set(inspect.signature(self.fwd).parameters) if self.fwd else set()
        self.inplace = {"inplace_final_state", "ssm_state_indices", "out"} <= params
        self.has_out = "out" in params
        self.entry = ("fla.ops.kda.fused_recurrent.fused_recurrent_kda_fwd(inplace_final_state=True, "
                      "ssm_state_indices=...)" if self.inplace else "fla.ops.kda.fused_recurrent_kda (out of place)")

    def decode(self, sets, pool, idx, outs, shared, v_first, rows) -> Callable[[int], Any]:
        if self.inplace:
            fwd = self.fwd

            def call(i):
                s = sets[i]
                return fwd(q=s["q"], k=s["k"], v=s["v"], g=s["g"], beta=s["beta"], A_log=shared["A_log"],
                           dt_bias=shared["dt_bias"], initial_state=pool, output_final_state=False,
                           inplace_final_state=True, state_v_first=v_first, ssm_state_indices=idx[i], out=outs[i],
                           **OPTIONS)
            return call
        public = self.public

        def call_oop(i):  # no in-place path in this FLA: read rows, write a fresh final state
            s = sets[i]
            return public(s["q"], s["k"], s["v"], s["g"], s["beta"], A_log=shared["A_log"], dt_bias=shared["dt_bias"],
                          initial_state=rows[i], output_final_state=True, state_v_first=v_first, **OPTIONS)
        return call_oop

    def prefill(self, sets, outs, shared, v_first) -> Callable[[int], Any]:
        if self.has_out:
            fwd = self.fwd

            def call(i):
                s = sets[i]
                return fwd(q=s["q"], k=s["k"], v=s["v"], g=s["g"], beta=s["beta"], A_log=shared["A_log"],
                           dt_bias=shared["dt_bias"], initial_state=s["h0"], output_final_state=True,
                           inplace_final_state=False, state_v_first=v_first, out=outs[i], **OPTIONS)[1]
            return call
        public = self.public

        def call_pub(i):
            s = sets[i]
            return public(s["q"], s["k"], s["v"], s["g"], s["beta"], A_log=shared["A_log"], dt_bias=shared["dt_bias"],
                          initial_state=s["h0"], output_final_state=True, state_v_first=v_first, **OPTIONS)[1]
        return call_pub


# ---- inputs --------------------------------------------------------------------------------------

def make_sets(torch, s: Shape, K: int, V: int, R: int, v_first: bool, seed: int,
              device: str = "cuda") -> tuple[list, dict]:
    """R input sets of one shape and the gate parameters they share, drawn on their own generator so the gate
    does not change with R (n_sets: the GPU's L2, the head dims)."""
    gens = [torch.Generator(device=device).manual_seed(seed + (i << 40)) for i in (0, 1)]
    HV = s.H

    def randn(*shape, dtype=torch.float32, gen=0):
        return torch.randn(*shape, generator=gens[gen], device=device, dtype=torch.float32).to(dtype)

    sshape = (s.N, HV, V, K) if v_first else (s.N, HV, K, V)
    shared = dict(A_log=randn(HV, gen=1) * 0.5, dt_bias=randn(HV * K, gen=1))
    sets = []
    for _ in range(R):
        d = dict(q=randn(s.N, s.T, s.H, K, dtype=torch.bfloat16), k=randn(s.N, s.T, s.H, K, dtype=torch.bfloat16),
                 v=randn(s.N, s.T, HV, V, dtype=torch.bfloat16), g=randn(s.N, s.T, HV, K), beta=randn(s.N, s.T, HV))
        if s.kind == "prefill":
            d["h0"] = randn(*sshape) * 0.1
        sets.append(d)
    return sets, shared


def _rel_l2(torch, x, ref) -> float:
    x, ref = x.double(), ref.double()
    den = torch.linalg.vector_norm(ref).item()
    return torch.linalg.vector_norm(x - ref).item() / (den or 1.0)


# ---- one shape ------------------------------------------------------------------------------------

def bench_shape(torch, timer: Timer, impl, s: Shape, K: int, V: int, layout: str, l2: int, copy_tbps: float,
                quick: bool, copies: dict[int, dict] | None = None) -> dict:
    v_first = layout == "v_first"
    R = n_sets(s, K, V, l2)
    sets, shared = make_sets(torch, s, K, V, R, v_first, seed=1234 + s.N * 7 + s.T)
    outs = [torch.empty_like(x["v"]) for x in sets]
    row: dict[str, Any] = dict(id=s.id, kind=s.kind, N=s.N, T=s.T, H=s.H, HV=s.H, K=K, V=V, layout=layout,
                               impl=impl.name, entry=impl.entry, sets=R, state=s.state)
    if s.kind == "decode":
        sshape = (V, K) if v_first else (K, V)
        pool = torch.randn(R * s.N, s.H, *sshape, device="cuda") * 0.1
        if s.state == "bf16":
            pool = pool.bfloat16()
        idx = [torch.arange(r * s.N, (r + 1) * s.N, dtype=torch.int32, device="cuda") for r in range(R)]
        rows = [pool[r * s.N:(r + 1) * s.N] for r in range(R)]
        fn = (impl.decode(sets, pool, idx, outs, shared, v_first, rows) if impl.name == "fla"
              else impl.decode(sets, pool, idx, outs, shared, v_first))
    else:
        fn = impl.prefill(sets, outs, shared, v_first)
    reps = (50 if quick else 200) if s.kind == "decode" else (10 if quick else 40)
    st: Stats = timer.kernel(fn, R, reps)
    nbytes = call_bytes(s, K, V)
    total = sum(nbytes.values())
    tbps = total / (st.median_ms * 1e-3) / 1e12
    row.update(ms_median=st.median_ms, ms_p10=st.p10_ms, ms_p90=st.p90_ms, reps=st.n, bytes=nbytes,
               bytes_total=total, TBps=tbps, pct_copy=100 * tbps / copy_tbps if copy_tbps else None)
    if s.kind == "decode" and total // 2 > 2 * l2:
        # the ceiling at this size: a copy reading and writing the call's bytes (half each way); smaller copies
        # would be served from L2
        # (measured once per size in a run: `copies`, shared by the layouts and implementations of a shape)
        copies = {} if copies is None else copies
        if total // 2 not in copies:
            copies[total // 2] = timer.copy_bandwidth(nbytes=total // 2, reps=20 if quick else 50)
        same = copies[total // 2]
        row.update(copy_same=same, pct_copy_same=100 * tbps / same["TBps"])
    if s.kind == "decode":
        row["graph_us"] = timer.graph(fn, R, replays=5 if quick else 20).median_ms * 1e3
        calls = (200 if quick else 2000) if s.N == 1 else (50 if quick else 300)
        row["wall_us"] = timer.wall_us(fn, R, calls=calls)
        if impl.name == "kda2":  # the serving hot path: validated once by prepare_pool, launched per step
            from kda2.runtime import prepare_pool

            s0 = sets[0]
            step = prepare_pool(s0["q"], s0["k"], s0["v"], s0["g"], s0["beta"], pool, idx[0], A_log=shared["A_log"],
                                dt_bias=shared["dt_bias"], state_v_first=v_first, library=impl.lib, **OPTIONS)

            def prepared(i):
                x = sets[i]
                return step(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx[i], out=outs[i])
            row["wall_prepared_us"] = timer.wall_us(prepared, R, calls=calls)
    del sets, outs
    torch.cuda.empty_cache()
    return row


# ---- correctness ---------------------------------------------------------------------------------

def correctness(torch, ours: Ours, fla: FLA | None, K: int, V: int, layout: str) -> dict:
    """D2 decode (in place) ours vs FLA, and S1 prefill ours / FLA vs the float64 reference."""
    v_first = layout == "v_first"
    res: dict[str, Any] = {"layout": layout}
    s = Shape("D2", "decode", 64, 1)
    sets, shared = make_sets(torch, s, K, V, 1, v_first, seed=99)
    sshape = (V, K) if v_first else (K, V)
    pool0 = torch.randn(s.N, s.H, *sshape, device="cuda") * 0.1
    idx = [torch.arange(s.N, dtype=torch.int32, device="cuda")]
    p_ours, o_ours = pool0.clone(), [torch.empty_like(sets[0]["v"])]
    ours.decode(sets, p_ours, idx, o_ours, shared, v_first)(0)
    if fla is not None:
        p_fla, o_fla = pool0.clone(), [torch.empty_like(sets[0]["v"])]
        out = fla.decode(sets, p_fla, idx, o_fla, shared, v_first, [p_fla])(0)
        if not fla.inplace:  # out-of-place FLA returns (o, final_state)
            o_fla, p_fla = [out[0]], out[1]
        torch.cuda.synchronize()
        res["D2_o_rel_l2_vs_fla"] = _rel_l2(torch, o_ours[0], o_fla[0])
        res["D2_state_rel_l2_vs_fla"] = _rel_l2(torch, p_ours, p_fla)

    s = Shape("S1", "prefill", 1, 64)
    sets, shared = make_sets(torch, s, K, V, 1, v_first, seed=7)
    x = sets[0]
    o1 = [torch.empty_like(x["v"])]
    ht1 = ours.prefill(sets, o1, shared, v_first)(0)
    results = {"kda2": (o1[0], ht1)}
    if fla is not None:
        o2 = [torch.empty_like(x["v"])]
        ht2 = fla.prefill(sets, o2, shared, v_first)(0)
        results["fla"] = (o2[0] if fla.has_out else None, ht2)
        if results["fla"][0] is not None:
            res["S1_o_rel_l2_kda2_vs_fla"] = _rel_l2(torch, o1[0], o2[0])
        res["S1_state_rel_l2_kda2_vs_fla"] = _rel_l2(torch, ht1, ht2)
    torch.cuda.synchronize()
    try:
        from kda2.reference import recurrent_kda_ref
    except ImportError as exc:
        res["reference"] = f"not importable: {exc}"
        return res
    o_ref, ht_ref = recurrent_kda_ref(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=shared["A_log"],
                                      dt_bias=shared["dt_bias"], initial_state=x["h0"], output_final_state=True,
                                      state_v_first=v_first, **OPTIONS)
    o_ref, ht_ref = torch.from_numpy(o_ref), torch.from_numpy(ht_ref)
    for name, (o, ht) in results.items():
        if o is not None:
            res[f"S1_o_rel_l2_{name}_vs_ref"] = _rel_l2(torch, o.cpu(), o_ref)
        res[f"S1_state_rel_l2_{name}_vs_ref"] = _rel_l2(torch, ht.cpu(), ht_ref)
    return res


# ---- the run --------------------------------------------------------------------------------------

def pick_library(library: str | None):
    """--library, else $KDA2_LIBRARY, else the one built spec that can run the Kimi-Linear config."""
    import os

    from kda2.runtime import default_library, discover, load

    if library:
        return load(library)
    if os.environ.get("KDA2_LIBRARY"):
        return default_library()
    libs = [load(p) for p in discover()]
    fit = [lib for lib in libs if lib.k == 128 and lib.v == 128 and "softplus" in lib.features.gate_modes
           and lib.features.qk_l2norm and lib.features.beta_sigmoid]
    if len(fit) != 1:
        raise RuntimeError(f"{len(fit)} built specs run the Kimi-Linear config (K=V=128, softplus gate, qk l2norm, "
                           f"beta sigmoid) among {[lib.spec for lib in libs]}; pass --library <manifest.json>")
    return fit[0]


def force_variants(lib, ids: list[str]) -> dict[str, str]:
    """Every call of a layout launches the variant named for it (kda2_launch by index) instead of the routed one;
    {layout: id}. Raises ValueError naming an unknown id, or two for one layout."""
    from kda2.runtime import abi

    by_id = {v["id"]: v for v in lib.variants}
    chosen: dict[bool, int] = {}
    named: dict[str, str] = {}
    for vid in ids:
        v = by_id.get(vid)
        if v is None:
            raise ValueError(f"--variant {vid}: no such variant in {lib.spec}/{lib.arch}; allowed: ids of its manifest "
                             f"({len(by_id)}, e.g. {', '.join(sorted(by_id)[:4])}; `kda2 plan` lists them)")
        layout = v["config"]["state_layout"]
        if layout in named:
            raise ValueError(f"--variant: {named[layout]} and {vid} are both {layout}; allowed: one per state layout")
        named[layout] = vid
        chosen[layout == "v_first"] = int(v["index"])
    routed = lib._fwd

    def fwd(args_ptr, max_seqlen, stream):
        v_first = bool(abi.KDA2RecurrentArgs.from_address(args_ptr).state_v_first)
        return lib._launch(chosen[v_first], args_ptr, stream) if v_first in chosen else routed(args_ptr, max_seqlen,
                                                                                              stream)

    lib._fwd = fwd  # (args_ptr: the address of the packed args, as the runtime passes it)
    return named


LAYOUTS = ("v_first", "k_first")
#: a variant id as manifests and `kda2 plan` name it (kda2.plan.variant.variant_id: 12 hex digits of a sha256)
VARIANT_ID = re.compile(r"[0-9a-f]{12}")
#: the files of a run, replaced as a set (host.open_out)
OUT_FILES = ("bench_recurrent.json", "bench_recurrent.png")


def check_arguments(layouts: list[str] | None, shapes: list[str] | None, variants: list[str] | None) -> list[str]:
    """What is wrong with the run's arguments, one item per option (option, value, what is allowed); [] if nothing.
    Whether a layout or a variant is in the library is known only once it is loaded (run)."""
    bad = [f"--layouts: unknown layout {lay!r} (allowed {list(LAYOUTS)})" for lay in layouts or []
           if lay not in LAYOUTS]
    try:
        resolve_shapes(shapes)
    except ValueError as exc:
        bad.append(f"--shapes: {exc}")
    variants = variants or []
    wrong = [vid for vid in variants if not VARIANT_ID.fullmatch(vid)]
    if wrong:
        bad.append(f"--variant: {wrong} not variant ids (allowed: 12 hex digits each, as the manifest and `kda2 plan` "
                   "name them)")
    if len(variants) > len(LAYOUTS):
        bad.append(f"--variant: {len(variants)} ids (allowed: at most one per state layout, {len(LAYOUTS)})")
    return bad


def run(out_dir: Path | None, library: str | None, layouts: list[str] | None, shapes: list[str] | None, quick: bool,
        use_fla: bool, argv: list[str], variants: list[str] | None = None) -> int:
    """The benchmark; writes bench_recurrent.json (+ .png) under out_dir (None: a new ./bench_out/recurrent-<date>-
    <time>) once the arguments, the GPU and the library are found good, replacing an earlier run's there
    (host.open_out); a run stopped before that writes nothing. Exit status: 0 ok, 1 no kda2 library or a kda2 row
    failed, 2 no GPU / bad arguments."""
    result: dict[str, Any] = {"schema": 1, "kind": "kda2-bench-recurrent",
                              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                              "command": " ".join([Path(sys.executable).name, "-m", "kda2.bench", *argv]),
                              "host": platform.node(), "notes": []}
    bad = check_arguments(layouts, shapes, variants)
    if bad:
        return host.fail("; ".join(bad), 2)
    chosen = resolve_shapes(shapes)
    try:
        import torch
    except ImportError as exc:
        return host.fail(f"torch is not importable ({exc}): the benchmark needs torch and a GPU", 2)
    if not torch.cuda.is_available():
        return host.fail("torch.cuda is not available: the benchmark needs a GPU", 2)
    result["device"], result["versions"] = host.device(torch), host.versions(torch)
    try:
        lib = pick_library(library)
    except Exception as exc:  # noqa: BLE001 - said, then fail the run
        return host.fail(f"kda2 library: {exc}", 1)
    built = list(lib.features.state_layouts)
    missing = [lay for lay in layouts or [] if lay not in built]
    if missing:
        return host.fail(f"--layouts: {missing} not built into {lib.spec} (allowed {built})", 2)
    if variants:
        try:
            result["forced_variants"] = force_variants(lib, variants)
        except ValueError as exc:
            return host.fail(str(exc), 2)
    out_dir = host.open_out(out_dir, "recurrent", OUT_FILES)
    json_path = out_dir / "bench_recurrent.json"
    if variants:
        print(f"forced variants (not the routes): {result['forced_variants']}", flush=True)
    so_sha = hashlib.sha256(lib.so_path.read_bytes()).hexdigest()
    result["library"] = {"manifest": str(lib.manifest_path), "spec": lib.spec, "arch": lib.arch, "so_sha256": so_sha,
                         "variants": [{"id": v["id"], "name": v.get("name")} for v in lib.variants]}
    K, V = lib.k, lib.v
    result["config"] = {"gate": "softplus (unbounded, in kernel)", "qk_l2norm": True, "beta_sigmoid": True,
                        "H": H_DEFAULT, "HV": H_DEFAULT, "K": K, "V": V, "state": "fp32", "g": "fp32 raw",
                        "beta": "fp32 raw"}
    layouts = list(dict.fromkeys(layouts)) if layouts else [lay for lay in LAYOUTS if lay in built]
    ours = Ours(lib)
    fla = host.start_fla(result, use_fla, FLA, lambda f: {"entry": f.entry, "inplace": f.inplace})

    timer = Timer(torch)
    result["timing"] = {"method": "median of CUDA-event times, GPU spin before each call so the CPU's launch cost is "
                                  "excluded (the GPU's own, the same for any kernel, is floor_us), "
                                  "rotating input sets > 2x L2", "spin_cycles_per_us": timer.cycles_per_us}
    result["copy"] = timer.copy_bandwidth()
    copy_tbps = result["copy"]["TBps"]
    result["timing"]["floor_us"] = floor = timer.floor_us()
    print(f"device {result['device']['name']}: copy {copy_tbps:.2f} TB/s; timing floor {floor:.2f} us (a one-element "
          f"kernel timed as a call is); library {lib.spec}/{lib.arch}", flush=True)
    l2 = result["device"]["l2_bytes"] or 60 * 2**20
    result["rows"] = rows = []
    copies: dict[int, dict] = {}   # equal-size copies, by bytes each way (bench_shape)
    for s in chosen:
        if s.T > lib.max_bucket:
            result["notes"].append(f"{s.id}: T={s.T} above the library's largest bucket {lib.max_bucket}; skipped")
            continue
        if s.state == "bf16" and not lib.features.bf16_decode_state:
            result["notes"].append(f"{s.id}: bf16 states not built into {lib.spec} (features.bf16_decode_state)")
            continue
        for layout in layouts:
            for impl in (ours, fla):
                if impl is None or (s.state == "bf16" and impl is fla):  # FLA keeps fp32 states
                    continue
                try:
                    row = bench_shape(torch, timer, impl, s, K, V, layout, l2, copy_tbps, quick, copies)
                except Exception as exc:  # noqa: BLE001 - one failing row must not lose the others
                    row = dict(id=s.id, kind=s.kind, N=s.N, T=s.T, H=s.H, layout=layout, impl=impl.name,
                               error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=4))
                    torch.cuda.synchronize()
                rows.append(row)
                _print_row(row)
                host.write_result(result, json_path)
    try:
        result["correctness"] = [correctness(torch, ours, fla, K, V, lay) for lay in layouts]
    except Exception as exc:  # noqa: BLE001
        result["correctness"] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=6)}
    host.write_result(result, json_path)
    from kda2.bench.report import chart

    note = chart(result, out_dir / "bench_recurrent.png")
    if note:
        result["notes"].append(note)
    host.write_result(result, json_path)
    print(f"wrote {json_path}")
    return 1 if any("error" in r and r["impl"] == "kda2" for r in rows) else 0


def _print_row(r: dict) -> None:
    if "error" in r:
        print(f"{r['id']:>3} {r['layout']:<8} {r['impl']:<5} ERROR {r['error']}", flush=True)
        return
    extra = ""
    if "graph_us" in r:
        extra = f"  graph {r['graph_us']:.2f} us  wall {r['wall_us']:.1f} us"
    pct = f"{r['pct_copy']:.0f}% of copy" if r.get("pct_copy") is not None else "-"
    if r.get("pct_copy_same") is not None:
        pct += f", {r['pct_copy_same']:.0f}% of an equal-size copy"
    print(f"{r['id']:>3} N={r['N']:<3} T={r['T']:<4} {r['layout']:<8} {r['impl']:<5} {r['ms_median'] * 1e3:9.2f} us "
          f"{r['TBps']:.2f} TB/s ({pct}){extra}", flush=True)


__all__ = ["SHAPES", "Shape", "call_bytes", "run"]
