"""Turn a benchmark JSON into a README table or a PNG chart (matplotlib optional); the chunk benchmark's roofline.

    python -m kda2.bench.report --roofline bench_chunk.json out.png [--step-us US] [--copy-tbps TBPS]

Roofline of a chunk row (`row_bounds`, also stored in each row by `kda2 bench chunk`):
- HBM floor: the bytes a call must move at least — q, k, v, g, beta in (bf16, as the benchmark passes them), o
  out (bf16), initial + final state (fp32, N·H·K·V each) — over the device-copy bandwidth measured in the same run
  (`copy.TBps`: bytes read + written per second of a 1 GiB device-to-device copy) or --copy-tbps;
- serial chain: ceil(longest sequence / 64) state steps done one after another, times the time of one 64-token
  state step (--step-us, else the JSON's `serial_step_us`; left out when neither gives one). This is the bound of
  an unsplit chunked recurrence; a kernel that splits sequences (kda2's exact split, cuDNN-FE's P pieces) can run
  under it, so the chart shows it as a reference line, not a hard floor.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

STEP_TOKENS = 64
K_DIM = V_DIM = 128


def _ok_rows(result: dict) -> list[dict]:
    return [r for r in result.get("rows", []) if "error" not in r]


def _pairs(result: dict) -> list[tuple[str, dict | None, dict | None]]:
    """(label, kda2 row, fla row) per (shape, layout), in run order."""
    seen: dict[tuple, dict[str, dict]] = {}
    for r in _ok_rows(result):
        seen.setdefault((r["id"], r["N"], r["T"], r["layout"]), {})[r["impl"]] = r
    return [(f"{k[0]} N={k[1]} T={k[2]} {k[3]}", v.get("kda2"), v.get("fla")) for k, v in seen.items()]


def _us(row: dict | None, key: str = "ms_median", scale: float = 1e3) -> str:
    return "–" if row is None or row.get(key) is None else f"{row[key] * scale:.1f}"


def readme_table(result: dict) -> str:
    dev = result.get("device", {})
    ver = result.get("versions", {})
    copy = result.get("copy", {})
    lines = [
        f"Recurrent KDA on {dev.get('name', '?')} ({result.get('date', '?')}; torch {ver.get('torch', '?')}, "
        f"FLA {ver.get('fla-core', 'n/a')}; Kimi-Linear config: softplus gate, q/k l2norm and β-sigmoid in kernel, "
        f"fp32 state, H=HV=32, K=V=128). Median GPU time per call; bandwidth = bytes read+written / time, as % "
        f"of a device copy ({copy.get('TBps', float('nan')):.2f} TB/s) measured in the same run."
        + (f" Every time includes the timing's own {floor:.1f} µs (a one-element kernel timed the same way)."
           if (floor := result.get("timing", {}).get("floor_us")) is not None else ""),
        "",
        "| shape | kda2 µs | FLA 0.6 µs | speed-up | kda2 % of copy | FLA % of copy |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, ours, fla in _pairs(result):
        speed = (f"{fla['ms_median'] / ours['ms_median']:.2f}×" if ours and fla else "–")
        pct = lambda r: "–" if r is None or r.get("pct_copy") is None else f"{r['pct_copy']:.0f} %"  # noqa: E731
        lines.append(f"| {label} | {_us(ours)} | {_us(fla)} | {speed} | {pct(ours)} | {pct(fla)} |")
    decode = [(label, o, f) for label, o, f in _pairs(result) if (o or f or {}).get("graph_us") is not None]
    if decode:
        lines += ["", "| decode shape | kda2 graph-replay µs | FLA graph-replay µs | kda2 wall µs/call "
                      "(fused_recurrent_kda_pool) | kda2 wall µs/call (prepare_pool) | FLA wall µs/call |",
                  "|---|---:|---:|---:|---:|---:|"]
        for label, o, f in decode:
            lines.append(f"| {label} | {_us(o, 'graph_us', 1)} | {_us(f, 'graph_us', 1)} | {_us(o, 'wall_us', 1)} | "
                         f"{_us(o, 'wall_prepared_us', 1)} | {_us(f, 'wall_us', 1)} |")
    fla = result.get("fla", {})
    if not fla.get("available", False):
        lines += ["", f"FLA was not measured: {fla.get('error', 'unknown reason')}."]
    errors = [r for r in result.get("rows", []) if "error" in r]
    for r in errors:
        lines.append(f"- {r['id']} {r['layout']} {r['impl']}: ERROR {r['error']}")
    return "\n".join(lines)


def chart(result: dict, path: Path) -> str | None:
    """Write a PNG (time per call, log scale; % of copy bandwidth). Returns a note when it cannot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no PNG chart: matplotlib is not importable ({exc})"
    pairs = _pairs(result)
    if not pairs:
        return "no PNG chart: no successful rows"
    labels = [p[0].replace(" ", "\n", 1) for p in pairs]
    x = list(range(len(pairs)))
    w = 0.38
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(8, 1.3 * len(pairs)), 8), sharex=True)
    for off, idx, name, color in ((-w / 2, 1, "kda2", "#1f77b4"), (w / 2, 2, "FLA 0.6", "#ff7f0e")):
        t = [(p[idx]["ms_median"] * 1e3 if p[idx] else 0) for p in pairs]
        b = [(p[idx]["pct_copy"] or 0) if p[idx] else 0 for p in pairs]
        a1.bar([i + off for i in x], t, w, label=name, color=color)
        a2.bar([i + off for i in x], b, w, label=name, color=color)
    a1.set_yscale("log")
    a1.set_ylabel("µs per call (median)")
    a1.legend()
    a1.set_title(f"Recurrent KDA, {result.get('device', {}).get('name', '?')} — Kimi-Linear config")
    a2.set_ylabel("% of device-copy bandwidth")
    a2.axhline(100, color="grey", lw=0.8, ls="--")
    a2.set_xticks(x)
    a2.set_xticklabels(labels, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


#: the `kind` of each benchmark's result JSON, and the command that writes it
KINDS = {"kda2-bench-recurrent": "kda2 bench recurrent", "kda2-bench-chunk": "kda2 bench chunk"}
EXPECTED = "expected a bench_recurrent.json or bench_chunk.json written by `kda2 bench recurrent|chunk`"


def read_result(path: str | Path) -> dict[str, Any]:
    """A benchmark's result JSON, checked to be one (its `kind`) with something measured; ValueError naming the file,
    what is wrong with it and what was expected."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc}); {EXPECTED}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file; {EXPECTED}") from None
    try:
        result = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno}); {EXPECTED}") from None
    kind = result.get("kind") if isinstance(result, dict) else None
    if not isinstance(kind, str) or kind not in KINDS:
        names = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
        what = (f"a JSON {names.get(type(result), 'null')}" if not isinstance(result, dict)
                else f"its kind is {kind!r}" if "kind" in result else "it has no kind")
        raise ValueError(f"{path}: not a kda2 benchmark result: {what} (a result is an object whose kind is "
                         f"{' or '.join(map(repr, KINDS))}); {EXPECTED}")
    if "error" in result and not result.get("rows"):   # written by runs that stopped before measuring (older kda2)
        raise ValueError(f"{path}: its {KINDS[kind]} run stopped before measuring anything ({result['error']}); "
                         f"{EXPECTED} that measured")
    return result


# ---- roofline of the chunk benchmark -----------------------------------------------------------------

def floor_bytes(tokens: int, H: int, N: int, K: int = K_DIM, V: int = V_DIM) -> int:
    """Least bytes one chunk call moves: q, k (bf16, K), v (bf16, V), g (bf16, K), beta (bf16) per token and head,
    o (bf16, V) out, and the fp32 initial + final state (N·H·K·V each)."""
    return tokens * H * (2 * K * 2 + V * 2 + K * 2 + 2 + V * 2) + 2 * N * H * K * V * 4


def seqlens(row: dict) -> list[int]:
    cu = row.get("cu_seqlens")
    if cu:
        return [b - a for a, b in zip(cu, cu[1:])]
    return [int(row["T"])] * int(row.get("B", 1))


def serial_steps(longest: int, step_tokens: int = STEP_TOKENS) -> int:
    """State steps in sequence for the longest sequence of an unsplit chunked recurrence."""
    return math.ceil(longest / step_tokens)


def row_bounds(row: dict, copy_tbps: float | None = None, step_us: float | None = None) -> dict:
    lens = seqlens(row)
    n = row.get("N") or len(lens)
    b = floor_bytes(int(row.get("tokens") or sum(lens)), int(row["H"]), int(n), int(row.get("K", K_DIM)),
                    int(row.get("V", V_DIM)))
    steps = serial_steps(max(lens))
    return {"floor_bytes": b, "copy_TBps": copy_tbps,
            "hbm_floor_ms": b / (copy_tbps * 1e12) * 1e3 if copy_tbps else None,
            "serial_steps": steps, "step_us": step_us,
            "serial_chain_ms": steps * step_us / 1e3 if step_us else None}


def roofline_rows(result: dict, step_us: float | None = None, copy_tbps: float | None = None) -> list[dict]:
    """Per timed chunk row: measured medians (kda2, FLA, cuDNN kernel, cuDNN + prep) and the two bounds. The
    arguments override the JSON's copy bandwidth and step time."""
    copy_tbps = copy_tbps or (result.get("copy") or {}).get("TBps")
    step_us = step_us or result.get("serial_step_us")
    out = []
    for r in result.get("rows", []):
        if "H" not in r:
            continue
        ms = {k: (r.get(k) or {}).get("ms_median") for k in ("kda2", "fla", "cudnn", "cudnn_with_prep")}
        if not any(ms.values()):
            continue
        out.append({"id": r["id"], "gate": r["gate"], "label": r.get("label", r["id"]), **ms,
                    **row_bounds(r, copy_tbps, step_us)})
    return out


def roofline_chart(result: dict, path: Path, step_us: float | None = None, copy_tbps: float | None = None) -> str | None:
    """PNG: per shape × gate, the measured times against the HBM floor and the serial-chain line. Returns a note
    when it cannot draw."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no roofline chart: matplotlib is not importable ({exc})"
    rows = roofline_rows(result, step_us, copy_tbps)
    if not rows:
        return "no roofline chart: no timed rows"
    x = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(rows) + 3), 5.5))
    for key, label, marker, color, fill in (("kda2", "kda2", "o", "#1f77b4", True),
                                            ("fla", "FLA 0.6", "s", "#ff7f0e", True),
                                            ("cudnn", "cuDNN-FE kernel", "^", "#2ca02c", True),
                                            ("cudnn_with_prep", "cuDNN-FE + input prep", "v", "#2ca02c", False)):
        pts = [(i, r[key]) for i, r in zip(x, rows) if r.get(key)]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, s=55, label=label, zorder=3,
                       color=color if fill else "none", edgecolors=color)
    for key, label, color, ls in (("hbm_floor_ms", "HBM floor (bytes / measured copy bandwidth)", "k", "-"),
                                  ("serial_chain_ms", "serial chain, unsplit (64-token steps × step time)",
                                   "#d62728", "--")):
        pts = [(i, r[key]) for i, r in zip(x, rows) if r.get(key)]
        for j, (i, v) in enumerate(pts):
            ax.hlines(v, i - 0.4, i + 0.4, colors=color, linestyles=ls, label=label if j == 0 else None, zorder=2)
    ax.set_yscale("log")
    ax.set_ylabel("ms per call (median)")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['id']}\n{r['gate']}" for r in rows], fontsize=8)
    bw = rows[0].get("copy_TBps")
    st = rows[0].get("step_us")
    ax.set_title(f"Chunk KDA prefill roofline, {result.get('device', {}).get('name', '?')} — copy "
                 f"{'%.2f TB/s' % bw if bw else 'not measured'}, state step "
                 f"{'%.2f µs' % st if st else 'not given (no serial line)'}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kda2.bench.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--roofline", nargs=2, metavar=("RESULTS_JSON", "OUT_PNG"), required=True,
                    help="chunk benchmark JSON and the PNG to write")
    ap.add_argument("--step-us", type=float, help="time of one 64-token state step, µs (default: the JSON's)")
    ap.add_argument("--copy-tbps", type=float, help="copy bandwidth, TB/s (default: the JSON's measured copy)")
    args = ap.parse_args(argv)
    try:
        result = read_result(args.roofline[0])
    except ValueError as exc:
        print(f"kda2: error: {exc}", file=sys.stderr)
        return 2
    if result["kind"] != "kda2-bench-chunk":
        print(f"kda2: error: {args.roofline[0]}: a {KINDS[result['kind']]} result; the roofline is drawn from a "
              f"{KINDS['kda2-bench-chunk']} result (bench_chunk.json)", file=sys.stderr)
        return 2
    for r in roofline_rows(result, args.step_us, args.copy_tbps):
        def f(v):
            return "–" if v is None else f"{v:.3f}"
        print(f"{r['id']:>3} {r['gate']:<11} kda2 {f(r['kda2'])}  fla {f(r['fla'])}  cudnn {f(r['cudnn'])}  "
              f"cudnn+prep {f(r['cudnn_with_prep'])}  floor {f(r['hbm_floor_ms'])}  "
              f"serial {f(r['serial_chain_ms'])} ({r['serial_steps']} steps)  ms")
    note = roofline_chart(result, Path(args.roofline[1]), args.step_us, args.copy_tbps)
    if note:
        print(note, file=sys.stderr)
        return 1
    print(f"wrote {args.roofline[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
