# Sourced by this folder's device calls (run from the repository root on the device): HEAD-at-session-start's vendored
# kimi_linear_chunk (build/_ab/head.tar.xz, carried) unpacked as $H, $O the output folder, `el` elapsed seconds,
# `finish NAME` packs $O into one file (the device returns at most eight). No peers: these calls time our kernels only.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/head
tar xJf build/_ab/head.tar.xz -C /tmp/head || exit 3
H=/tmp/head/_vend/kimi_linear_chunk/sm_90a
NEW=build/kimi_linear_chunk/sm_90a
X=experiments/2026-12-03-wgfold/split_bench.py
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
finish() { el done; tar czf $OUT/$1.tgz -C /tmp o; }
