#!/usr/bin/env bash
# Device call 1 (H200): issue 13's accuracy acceptance with FLA 0.6.0 in the same process. FLA's Triton kernels warmed
# for 15 chunk accuracy cases at each head dim (every gate mode in both layouts, bf16 and fp16, GVA 1/2/4/8, bf16
# A_log / dt_bias, varlen, h0 / ht on and off), then six test processes in parallel: the chunk accuracy cases on each
# head dim's library (FLA on those 15), and the recurrent matrix (input dtype × parameter dtype × GVA 1/2/4/8 ×
# layout) on each with FLA's fused_recurrent_kda on every case. Tables: $O/k<K>/{chunk,recurrent}-accuracy.md.
. experiments/2026-12-03-peers/dev.sh
CASES=T63-precomputed-kf,T64-softplus-bf16g-gva2-vf,T160-softplus-fp32g-nodt-noh0-kf,T500-lowerbound-safe-gva2-betabf16-vf
CASES=$CASES,T1000-precomputed-nol2-nobsig-vf,varlen-15-100-300-1200-2000-softplus-bf16g-vf
CASES=$CASES,varlen-256-500-1000-lowerbound-gva2-kf,fp16-T1000-lowerbound-betaf16-gva2-vf,fp16-T65-precomputed-nofinal-kf
CASES=$CASES,fp16-varlen-15-100-300-1200-2000-softplus-vf,T300-softplus-gva4-pbf16-vf,varlen-15-100-300-softplus-gva8-H1-kf
CASES=$CASES,T300-lowerbound-gva8-pbf16-H1-kf,fp16-T300-softplus-gva8-pbf16-H1-vf
CASES=$CASES,fp16-varlen-15-100-300-softplus-gva4-pbf16-kf
el "FLA warm-up: 15 cases x 3 head dims"
timeout 330 python3 -m kda2.bench.fla_warm --jobs 15 --cases $CASES --head-dims 64,128,256 > $O/warm.log 2>&1
echo "warm rc $?"; tail -1 $O/warm.log; grep -iE "fail|reject" $O/warm.log | head -5
el "tests: 3 chunk + 3 recurrent processes"
declare -A CH=([64]=small_head_chunk [128]=kimi_linear_chunk [256]=large_head_chunk)
declare -A RE=([64]=small_head_recurrent [128]=kimi_linear_recurrent [256]=large_head_recurrent)
for K in 64 128 256; do
  mkdir -p $O/k$K
  ( timeout 230 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --chunk-library $V/${CH[$K]} \
      --fla-cases=$CASES --results-dir $O/k$K -rs -p no:cacheprovider > $O/k$K/gpu_chunk.log 2>&1
    echo "chunk K=$K rc $?" >> $O/rcs.txt ) &
  ( KDA2_LIBRARY=$V/${RE[$K]} timeout 230 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -q \
      --require-gpu --fla-recurrent=all --results-dir $O/k$K -rs -p no:cacheprovider > $O/k$K/gpu_recurrent.log 2>&1
    echo "recurrent K=$K rc $?" >> $O/rcs.txt ) &
done
wait
cat $O/rcs.txt
for K in 64 128 256; do
  for f in gpu_chunk gpu_recurrent; do echo "K=$K $f: $(tail -1 $O/k$K/$f.log)"; grep -E "^FAILED|^ERROR" $O/k$K/$f.log | head -5; done
  grep -c "| ok |\|| yes |" $O/k$K/*-accuracy.md 2>/dev/null
  grep -h "NO\*\*" $O/k$K/*-accuracy.md 2>/dev/null | head -5
done
finish call1
