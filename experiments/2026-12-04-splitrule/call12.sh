#!/usr/bin/env bash
# Device call 12 (H200): with the lead at 24, does the overlap pay below 128 chunks (OVERLAP_MIN_CHUNKS)? overlap.py
# (split 1; overlap chosen / asked for / refused) on 32-112-chunk shapes whose state CTAs fit half the SMs, the
# libraries as committed.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/fin.tar.xz -C /tmp || exit 3
S="B1T2048H16 B1T2048H32 B4T2048H8 B1T3072H16 B1T3072H24 B1T3072H32 B1T4096H12 B1T4096H16 B1T4096H24 B1T4096H32"
S="$S B2T4096H8 B2T4096H16 B1T5120H16 B1T5120H24 B1T5120H32 B1T6144H16 B1T6144H24 B1T6144H32 B1T7168H24 B1T7168H32"
timeout 200 python3 experiments/2026-12-04-splitrule/overlap.py /tmp/vfin/kimi_linear_chunk/sm_90a/manifest.json \
  $O/overlap_short.json $S > $O/overlap_short.log 2>&1; echo "rc $?"; cut -c1-160 $O/overlap_short.log
cp -r $O/. $OUT/
