"""Turn a benchmark JSON into a README table or a PNG chart (matplotlib optional)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


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
        f"of a device copy ({copy.get('TBps', float('nan')):.2f} TB/s) measured in the same run.",
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


def load_result(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())
