#!/usr/bin/env bash
# Device call 2 (H200, the spec's sm_90a target; PROFILE=h100 on an H100: a record for that profile, which routes only
# a build of a spec targeting it; carry build/_ab/whl312.tar.xz too), carry ["build/_ab/cand_fused.tar.xz"] and, to resume,
# ["experiments/2026-12-05-twin/partial"] (a partial record of an earlier call, if any): `kda2 tune` of the
# every-candidate build of kimi_linear_chunk/sm_90a with the fused twins into a copy of tuning/.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
P=${PROFILE:-h200}; G=$(echo $P | tr a-z A-Z)
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q $G || { echo "not an $G: no tune for profile $P"; exit 4; }
tar xJf build/_ab/cand_fused.tar.xz || exit 3
if [ $P != h200 ]; then   # --profile re-reads the spec's budget and the profiles: pydantic and PyYAML (cp312 wheels)
  tar xJf build/_ab/whl312.tar.xz -C /tmp && python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/whl12/*.whl || exit 3
  export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
cp -r tuning $O/tuning
cp experiments/2026-12-05-twin/partial/*.partial.json $O/tuning/ 2>/dev/null && echo "resuming a partial record"
el tune
timeout 560 python3 -m kda2.tools.cli tune build/_candidates/kimi_linear_chunk/sm_90a --tuning $O/tuning --margin 0.2 \
  --time-limit ${TUNE_S:-530} --force ${QUICK:+--quick} $([ $P = h200 ] || echo --profile $P) > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first|wrote|partial|stopped" $O/tune.log | tail -40
el done
mkdir -p $OUT/call2 && cp -r $O/* $OUT/call2/; tar czf $OUT/call2.tgz -C /tmp o
