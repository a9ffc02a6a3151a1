"""Benchmarks (`python -m kda2.bench ...`, or `kda2 bench ...` through the CLI).

    python -m kda2.bench recurrent [--out DIR] [--library MANIFEST] [--layouts v_first,k_first]
                                   [--shapes D1,S2,N128T4] [--quick] [--no-fla]
    python -m kda2.bench chunk [--out DIR] [--library MANIFEST] [--shapes p|k3|f|all|P1,K3,B2T4096H16,...]
                               [--gates softplus,lower_bound] [--layout v_first|k_first] [--iters N] [--warmup N]
                               [--no-fla] [--no-cudnn] [--step-us US] [--head-dim 64|128|256]
                               [--overlap auto|on|off]
    python -m kda2.bench readme-table DIR/bench_recurrent.json   (or DIR/bench_chunk.json)
    python -m kda2.bench.report --roofline DIR/bench_chunk.json OUT.png [--step-us US] [--copy-tbps TBPS]
"""
from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path

#: where results go without --out: chunk writes bench_out/bench_chunk.*; recurrent a fresh folder per run
BENCH_OUT = Path("bench_out")


def default_recurrent_out() -> Path:
    """./bench_out/recurrent-<UTC date and time>: a new folder per run, so a run keeps the last one's results."""
    return BENCH_OUT / f"recurrent-{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%d-%H%M%S')}"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kda2 bench", description="KDA² benchmarks: kda2 against its peers (FLA, cuDNN-FE) in one process, on "
        "the GPU (needs torch, a GPU and built libraries; FLA and cuDNN-FE only to time them). `kda2 bench "
        "COMMAND --help` lists a command's options.",
        epilog="e.g. kda2 bench recurrent --shapes D1,N128T4; kda2 bench chunk --shapes p --gates softplus; "
        "kda2 bench readme-table bench_out/bench_chunk.json")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", title="commands")
    r = sub.add_parser("recurrent", help="recurrent KDA (decode + short prefill) vs FLA fused_recurrent_kda")
    r.add_argument("--out", type=Path, help="directory for bench_recurrent.json / .png (default: a new "
                   "./bench_out/recurrent-<UTC date>-<time>, printed at the start)")
    r.add_argument("--library", help="manifest.json or build directory (default: KDA2_LIBRARY or ./build)")
    r.add_argument("--layouts", help="comma list of k_first,v_first (default: every built layout)")
    r.add_argument("--shapes", help="comma list of shape ids (D1,D2,D3,M1,D2h,D3h,S1,S2,S3,S4; default all) and "
                                    "decode sizes N<sequences>T<tokens>[h] (from the state pool; h: bf16 states), "
                                    "e.g. D2,N128T4")
    r.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    r.add_argument("--no-fla", action="store_true", help="do not import or time FLA")
    r.add_argument("--variant", help="comma list of variant ids (at most one per state layout): every call of that "
                                     "layout launches it instead of the routed one (a same-run A/B of a candidate)")
    c = sub.add_parser("chunk", help="chunk KDA prefill (docs/DESIGN.md §1.1 P1-P6) vs FLA chunk_kda")
    c.add_argument("--out", type=Path, default=Path("bench_out"),
                   help="directory for bench_chunk.json / .md / .png (default: ./bench_out)")
    c.add_argument("--library", help="chunk library manifest.json or build directory (default: KDA2_CHUNK_LIBRARY, "
                                     "else the chunk-family build under ./build)")
    c.add_argument("--shapes", help="comma list of shape ids (P1..P6, K1..K10, F1..F4) and sets: p (P1-P6, the "
                                    "default), k3 (cuDNN-FE's ten Kimi-K3 shapes), f (few chains: one long prompt on "
                                    "1-4 heads, where the library splits sequences), all; and dense batches "
                                    "B<sequences>T<tokens>H<heads>, e.g. B2T4096H16 (as given at every --head-dim)")
    c.add_argument("--gates", help="comma list of softplus,lower_bound (default: both for P and F shapes, lower_bound "
                                   "for the k3 set)")
    c.add_argument("--layout", default="v_first", choices=["v_first", "k_first"],
                   help="state layout (default v_first, as FLA's KDA layer)")
    c.add_argument("--iters", type=int, default=20, help="timed calls per shape x gate x impl (default 20)")
    c.add_argument("--warmup", type=int, default=3, help="untimed calls before timing (default 3)")
    c.add_argument("--no-fla", action="store_true", help="do not import or time FLA")
    c.add_argument("--no-cudnn", action="store_true",
                   help="do not import or time cuDNN-FE's fused Hopper KDA (kda2.bench.cudnn_peer)")
    c.add_argument("--step-us", type=float,
                   help="time of one 64-token state step in µs, for the serial-chain line of the roofline chart")
    c.add_argument("--head-dim", type=int, default=128, choices=[64, 128, 256],
                   help="K = V of the run (default 128); at 64 / 256 every shape keeps its tokens and H·K (H scaled "
                        "by 128/K) and runs on the chunk build of that head dim")
    c.add_argument("--overlap", default="auto", choices=["auto", "on", "off"],
                   help="the state pass beside the prep (docs/DESIGN.md §1): auto, the library's choice (default); on, "
                        "asked for (a variant whose state CTA does not fit beside a prep CTA still runs plainly); "
                        "off, refused. Results are the same bits every way")
    c.add_argument("--a-log", type=float,
                   help="every head's A_log (the gate's decay scale exp(A_log), softplus and lower_bound gates) instead "
                        "of the draw 0.5·randn: a model's decay strength; a strong one (e.g. 2.0) sends channels of the "
                        "prep's diagonal blocks to its slower exact paths (docs/DESIGN.md §1)")
    t = sub.add_parser("readme-table", help="print a markdown table from a benchmark JSON (recurrent or chunk)")
    t.add_argument("json", type=Path)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.cmd == "readme-table":
        from kda2.bench.report import load_result, readme_table

        result = load_result(args.json)
        if result.get("kind") == "kda2-bench-chunk":
            from kda2.bench.chunk import markdown_table

            print(markdown_table(result))
        else:
            print(readme_table(result))
        return 0
    split = lambda s: [x for x in s.split(",") if x] if s else None  # noqa: E731
    if args.cmd == "chunk":
        from kda2.bench import chunk

        return chunk.run(args.out, args.library, split(args.shapes), split(args.gates), args.layout, args.iters,
                         args.warmup, not args.no_fla, argv, use_cudnn=not args.no_cudnn, step_us=args.step_us,
                         head_dim=args.head_dim, overlap=args.overlap, a_log=args.a_log)
    from kda2.bench.recurrent import run

    if args.out is None:
        args.out = default_recurrent_out()
        print(f"kda2 bench recurrent: results go to {args.out} (--out DIR to choose)", flush=True)
    return run(args.out, args.library, split(args.layouts), split(args.shapes), args.quick, not args.no_fla, argv,
               variants=split(args.variant))
