"""The fused 16-token chunk kernel (kda2/fused.cuh via tests/kernels/fused_check.cu) against the routed chunk library,
same inputs, same process, alternating: `kda2.bench.chunk`'s shapes, input sets and timer (bf16 q/k/v and raw gate,
gate / l2norm / β sigmoid in the kernel, fp32 V-first states); with the bounded gate also cuDNN-FE's fused Hopper
kernel where it is importable (`kda2.bench.chunk.bench_cudnn`); where the chains are fewer than two an SM, also the
exact split composed from the kernel (`Fused16.split_call`). Prints one line per (shape, gate) and writes JSON.

usage: python time_fused.py LIBRARY OUT.json [SHAPE ...]   (LIBRARY: a vendored chunk bundle's manifest or folder)
FUSED_FORMS="name=DIR ..." times other forms of the kernel beside it (and prints each one's o against the library's,
outputs poisoned first): DIR holds a kda2/fused.cuh that takes the working tree's place (the `-I` before the
repository's). FUSED_SPLIT=0 leaves the composed split out.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "gpu")]

from _check_kernels import Fused16  # noqa: E402

from kda2.bench import chunk as bc  # noqa: E402
from kda2.bench.timing import Timer  # noqa: E402
from kda2.runtime import load  # noqa: E402

lib_path, out_json = sys.argv[1], Path(sys.argv[2])
want = sys.argv[3:] or [s.id for s in bc.SHAPES]
shapes = bc.resolve_shapes(want)
fused = Fused16(torch, Path(tempfile.mkdtemp()))
forms = {}
for spec in os.environ.get("FUSED_FORMS", "").split():
    name, _, inc = spec.partition("=")
    forms[name] = Fused16(torch, Path(tempfile.mkdtemp()), (f"-I{inc}",))
lib = load(lib_path)
ours = bc.Ours(lib)
timer = Timer(torch)
try:
    from kda2.bench.cudnn_peer import Cudnn

    cudnn = Cudnn()
except Exception as exc:  # noqa: BLE001 - the peer is optional
    print(f"cuDNN-FE not timed: {type(exc).__name__}: {exc}", flush=True)
    cudnn = None
l2 = torch.cuda.get_device_properties(0).L2_cache_size
sms = torch.cuda.get_device_properties(0).multi_processor_count
rows = []
for s in shapes:
    R = bc.n_sets(s, l2)
    sets, shared = bc.make_sets(torch, s, R, True, seed=4321 + s.tokens + s.H)
    outs = [torch.empty_like(x["v"]) for x in sets]
    hts = [torch.empty_like(x["h0"]) for x in sets]
    fo = [torch.empty_like(x["v"]) for x in sets]
    fh = [torch.empty_like(x["h0"]) for x in sets]
    gates = bc.gates_for(s, None)
    for gate in gates:
        lb = bc.GATE_OPTIONS[gate]["lower_bound"]

        def run_fused(i, gate=gate, lb=lb, fused=fused):
            x = sets[i]
            fused(x["q"], x["k"], x["v"], x["g"], x["beta"], o=fo[i], h0=x["h0"], ht=fh[i], A_log=shared["A_log"],
                  dt_bias=shared["dt_bias"], cu_seqlens=shared["cu_seqlens"], gate=gate,
                  lower_bound=-5.0 if lb is None else lb, v_first=True)
        run_lib = ours.call(sets, shared, gate, True, outs, hts)
        run_fused(0)
        run_lib(0)
        torch.cuda.synchronize()
        agree = {"o": bc.rel_l2(torch, fo[0], outs[0]), "ht": bc.rel_l2(torch, fh[0], hts[0]),
                 "nonfinite": bc.nonfinite(torch, fo[0]) + bc.nonfinite(torch, fh[0])}
        # few chains: the exact split composed from the kernel (Fused16.split_call; host-side plan and combine
        # included), with enough segments for two CTAs on every SM
        chains = s.N * s.H
        split = min(16, -(-2 * sms // chains)) if os.environ.get("FUSED_SPLIT", "1") != "0" else 1

        def run_split(i, gate=gate, lb=lb):
            x = sets[i]
            fused.split_call(x["q"], x["k"], x["v"], x["g"], x["beta"], o=fo[i], h0=x["h0"], ht=fh[i],
                             A_log=shared["A_log"], dt_bias=shared["dt_bias"], cu_seqlens=shared["cu_seqlens"],
                             gate=gate, lower_bound=-5.0 if lb is None else lb, v_first=True, split=split)
        runs = [("library", run_lib), ("fused", run_fused)] + ([("split", run_split)] if split > 1 else [])
        for name, form in forms.items():
            runs.append((name, lambda i, f=form: run_fused(i, fused=f)))
            # each form's outputs against the library's too (a form is timed only where it computes the same)
            fo[0].fill_(float("nan"))
            fh[0].fill_(float("nan"))
            run_fused(0, fused=form)
            torch.cuda.synchronize()
            agree[f"{name}_o"] = bc.rel_l2(torch, fo[0], outs[0])
            agree[f"{name}_nonfinite"] = bc.nonfinite(torch, fo[0]) + bc.nonfinite(torch, fh[0])
        if split > 1:
            run_split(0)
            torch.cuda.synchronize()
            agree["split_vs_library_o"] = bc.rel_l2(torch, fo[0], outs[0])
            agree["split_vs_library_ht"] = bc.rel_l2(torch, fh[0], hts[0])
        t = {}
        for rnd in (1, 2):
            for name, fn in runs:
                st = timer.kernel(fn, R, 20, warmup=3)
                t.setdefault(name, []).append(st.median_ms)
        row = dict(id=s.id, label=s.label, gate=gate, library_ms=t["library"], fused_ms=t["fused"], agree=agree,
                   route=bc.route_of(lib, s, True), split=split, split_ms=t.get("split"),
                   forms={name: t[name] for name in forms})
        cud = ""
        if cudnn is not None and gate == "lower_bound":
            try:
                row["cudnn"], _ = bc.bench_cudnn(torch, timer, cudnn, s, sets, shared, gate, True, 20, 3,
                                                 {"kda2": (fo[0], fh[0])})
                if "ms_median" in row["cudnn"]:
                    cud = (f"   cuDNN {row['cudnn']['ms_median']:.3f} ms, fused/cuDNN "
                           f"{min(t['fused']) / row['cudnn']['ms_median']:.2f}")
            except Exception as exc:  # noqa: BLE001 - recorded, never fatal
                row["cudnn"] = {"error": f"{type(exc).__name__}: {exc}"}
                cud = f"   cuDNN error {exc}"
        rows.append(row)
        spl = (f"  split {split}: {t['split'][0]:.3f}/{t['split'][1]:.3f} ms "
               f"({min(t['split']) / min(t['library']):.2f} of library, o vs library "
               f"{agree['split_vs_library_o']:.1e})" if split > 1 else "")
        print(f"{s.label:<36} {gate:<11} library {t['library'][0]:.3f}/{t['library'][1]:.3f} ms  fused "
              f"{t['fused'][0]:.3f}/{t['fused'][1]:.3f}  fused/library {min(t['fused']) / min(t['library']):.2f}  "
              f"vs library o {agree['o']:.1e} ht {agree['ht']:.1e} nonfinite {agree['nonfinite']}{spl}{cud}"
              + "".join(f"  {name} {t[name][0]:.3f}/{t[name][1]:.3f} (o {agree[name + '_o']:.1e}, nonfinite "
                        f"{agree[name + '_nonfinite']})" for name in forms),
              flush=True)
    del sets, shared, outs, hts, fo, fh
    torch.cuda.empty_cache()
out_json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))
