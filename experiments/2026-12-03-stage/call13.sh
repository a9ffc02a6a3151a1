#!/usr/bin/env bash
# Device call 13 (next session): xskip.patch applied to the working tree (K = 64 not tracked: there the flag's register
# spilled), its three chunk specs vendored to build/_ab/n_<spec> (`kda2 vendor --to build/_ab/n_<spec> --arch sm_90a`):
# bits against HEAD's builds (mkvariants.sh base b64 b256) at K = 64, 128, 256 and the chunk GPU tests at each
# (pipes/call3.sh, TESTS_ONLY). Carry build/_ab.
for s in small_head_chunk kimi_linear_chunk large_head_chunk; do
  mkdir -p build/$s; rm -rf build/$s/sm_90a; ln -s "$PWD/build/_ab/n_$s/$s/sm_90a" build/$s/sm_90a
done
TESTS_ONLY=1 CALL=${CALL:-call13} bash experiments/2026-12-03-pipes/call3.sh
