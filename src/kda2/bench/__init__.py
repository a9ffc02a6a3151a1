"""Benchmarks (`python -m kda2.bench ...`, or `kda2 bench ...` through the CLI).

    python -m kda2.bench recurrent --out DIR [--library MANIFEST] [--layouts v_first,k_first]
                                   [--shapes D1,S2] [--quick] [--no-fla]
    python -m kda2.bench readme-table DIR/bench_recurrent.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kda2 bench", description="KDA² benchmarks")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recurrent", help="recurrent KDA (decode + short prefill) vs FLA fused_recurrent_kda")
    r.add_argument("--out", required=True, type=Path, help="directory for bench_recurrent.json / .png")
    r.add_argument("--library", help="manifest.json or build directory (default: KDA2_LIBRARY or ./build)")
    r.add_argument("--layouts", help="comma list of k_first,v_first (default: every built layout)")
    r.add_argument("--shapes", help="comma list of shape ids (D1,D2,D3,S1,S2,S3,S4; default all)")
    r.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    r.add_argument("--no-fla", action="store_true", help="do not import or time FLA")
    t = sub.add_parser("readme-table", help="print a markdown table from a benchmark JSON")
    t.add_argument("json", type=Path)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.cmd == "readme-table":
        from kda2.bench.report import load_result, readme_table

        print(readme_table(load_result(args.json)))
        return 0
    from kda2.bench.recurrent import run

    split = lambda s: [x for x in s.split(",") if x] if s else None  # noqa: E731
    return run(args.out, args.library, split(args.layouts), split(args.shapes), args.quick, not args.no_fla, argv)
