# Sourced by this folder's device calls (run from the repository root on the device): the carried wheels (FLA 0.6.0,
# cuDNN-FE 1.32, in build/_ab/whl) installed into /tmp/site, the vendored sm_90a libraries of the six default specs
# unpacked under /tmp/ab/_vend/<spec>, $O the output folder and `el` elapsed seconds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  build/_ab/whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake FLA_FLASH_KDA=0
tar xJf build/_ab/libs.tar.xz -C /tmp/ab || exit 3
V=/tmp/ab/_vend
python3 -c "import fla, torch; print('fla', fla.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
# $O as one file (the device returns at most eight)
finish() { el done; rm -f $O/*/*.png; tar czf $OUT/$1.tgz -C /tmp o; }
