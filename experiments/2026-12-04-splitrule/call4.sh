#!/usr/bin/env bash
# Device call 4 (H200): call 3's tunes again, the every-candidate builds with all their files (the loader checks
# every file the manifest lists; call 3 had left out the sources).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/new.tar.xz -C /tmp || exit 3
L=/tmp/vnew
cd /tmp/pk
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "tune $s"
  timeout 170 python3 -m kda2.tools.cli tune build/_all/$s/sm_90a --specs $OLDPWD/kernel_specs --rules $OLDPWD/rules \
    --profiles $OLDPWD/profiles --tuning $O/tuning --margin 0.2 --time-limit 150 > $O/tune_$s.log 2>&1
  echo "tune $s rc $?"; grep -E "split|wrote" $O/tune_$s.log | tail -8
done
cd $OLDPWD
el done
tar czf $OUT/call4.tgz -C /tmp o
