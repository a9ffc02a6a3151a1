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
import sys
from pathlib import Path

from kda2.bench import host

#: where and when a run writes, as both runs' --out help says it
_WHERE = ("(default: a new ./bench_out/{kind}-<UTC date>-<time>, printed when the run starts measuring). Nothing is "
          "written before that: a run stopped by its arguments, a missing GPU or library leaves no folder and keeps "
          "the results already in DIR; once it measures, its files replace an earlier run's there")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kda2 bench", description="KDA² benchmarks: kda2 against its peers (FLA, cuDNN-FE) in one process, on "
        "the GPU (needs torch, a GPU and built libraries; FLA and cuDNN-FE only to time them). `kda2 bench "
        "COMMAND --help` lists a command's options.",
        epilog="e.g. kda2 bench recurrent --shapes D1,N128T4; kda2 bench chunk --shapes p --gates softplus; "
        "kda2 bench readme-table bench_out/chunk-<date>-<time>/bench_chunk.json")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", title="commands")
    r = sub.add_parser("recurrent", help="recurrent KDA (decode + short prefill) vs FLA fused_recurrent_kda",
                       description="Times kda2's recurrent KDA (decode in place in a state pool, short prefill) and "
                       "FLA's fused_recurrent_kda in one process on the same inputs (Kimi-Linear config), and checks "
                       "that they agree. Needs torch, a GPU and a built recurrent library. Writes bench_recurrent.json "
                       "(after every row) and bench_recurrent.png to --out. Exit 0 ok, 1 no library or a kda2 row "
                       "failed, 2 bad arguments or no GPU.")
    r.add_argument("--out", type=Path, metavar="DIR",
                   help="directory for bench_recurrent.json / .png " + _WHERE.format(kind="recurrent"))
    r.add_argument("--library", help="manifest.json or build directory (default: KDA2_LIBRARY or ./build)")
    r.add_argument("--layouts", help="comma list of k_first,v_first (default: every built layout)")
    r.add_argument("--shapes", help="comma list of shape ids (D1,D2,D3,M1,D2h,D3h,S1,S2,S3,S4; default all) and "
                                    "decode sizes N<sequences>T<tokens>[h] (from the state pool; h: bf16 states), "
                                    "e.g. D2,N128T4")
    r.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test; default: the full count)")
    r.add_argument("--no-fla", action="store_true", help="do not import or time FLA (default: time it if importable)")
    r.add_argument("--variant", help="comma list of variant ids (12 hex digits, at most one per state layout): every "
                                     "call of that layout launches it instead of the routed one (a same-run A/B of a "
                                     "candidate; default: the routed variants)")
    c = sub.add_parser("chunk", help="chunk KDA prefill (docs/DESIGN.md §1.1 P1-P6) vs FLA chunk_kda",
                       description="Times kda2.chunk_kda (chunked prefill) and its peers, FLA's chunk_kda and "
                       "cuDNN-FE's fused Hopper KDA, in one process on the same inputs (FLA's KDA layer config), and "
                       "checks kda2 against FLA. Needs torch, a GPU and a built chunk library. Writes bench_chunk.json "
                       "(after every shape), bench_chunk.md, bench_chunk.png and bench_chunk_roofline.png to --out. "
                       "Exit 0 ok, 1 no library, a kda2 error or a disagreement with FLA, 2 bad arguments or no GPU.")
    c.add_argument("--out", type=Path, metavar="DIR",
                   help="directory for bench_chunk.json / .md / .png / _roofline.png " + _WHERE.format(kind="chunk"))
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
    c.add_argument("--no-fla", action="store_true", help="do not import or time FLA (default: time it if importable)")
    c.add_argument("--no-cudnn", action="store_true",
                   help="do not import or time cuDNN-FE's fused Hopper KDA (kda2.bench.cudnn_peer; default: time it "
                        "if importable, at --head-dim 128 and --layout v_first)")
    c.add_argument("--step-us", type=float,
                   help="time of one 64-token state step in µs, for the serial-chain line of the roofline chart "
                        "(recorded, not measured; default: none, the chart has no serial-chain line)")
    c.add_argument("--head-dim", type=int, default=128, choices=[64, 128, 256],
                   help="K = V of the run (default 128); at 64 / 256 every shape keeps its tokens and H·K (H scaled "
                        "by 128/K) and runs on the chunk build of that head dim")
    c.add_argument("--overlap", default="auto", choices=["auto", "on", "off"],
                   help="the state pass beside the prep (docs/DESIGN.md §1): auto, the library's choice (default); on, "
                        "asked for (a variant whose state CTA does not fit beside a prep CTA still runs plainly); "
                        "off, refused. Results are the same bits every way")
    c.add_argument("--a-log", type=float,
                   help="every head's A_log (the gate's decay scale exp(A_log), softplus and lower_bound gates) instead "
                        "of the draw 0.5·randn (the default): a model's decay strength; a strong one (e.g. 2.0) sends "
                        "channels of the prep's diagonal blocks to its slower exact paths (docs/DESIGN.md §1)")
    t = sub.add_parser("readme-table", help="print a markdown table from a benchmark JSON (recurrent or chunk)",
                       description="Prints the markdown table of a benchmark's results, as the README shows them.")
    t.add_argument("json", type=Path, metavar="JSON",
                   help="a bench_recurrent.json or bench_chunk.json written by `kda2 bench recurrent|chunk` (in its "
                        "--out DIR)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.cmd == "readme-table":
        from kda2.bench.report import read_result, readme_table

        try:
            result = read_result(args.json)
        except ValueError as exc:
            return host.fail(str(exc), 2)
        if result["kind"] == "kda2-bench-chunk":
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

    return run(args.out, args.library, split(args.layouts), split(args.shapes), args.quick, not args.no_fla, argv,
               variants=split(args.variant))
