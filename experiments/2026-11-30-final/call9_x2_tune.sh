#!/usr/bin/env bash
# Device call 9 (2x H200): `kda2 tune` spreading candidates over both GPUs through Dask distributed (wheels carried),
# into a scratch tuning dir (the committed records stay the single-GPU ones).
set -u -o pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
nvidia-smi -L
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/dask-*.whl .whl/distributed-*.whl .whl/partd-*.whl .whl/locket-*.whl .whl/tblib-*.whl .whl/tornado-*.whl \
  .whl/zict-*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
python3 -c "import distributed, torch; print('distributed', distributed.__version__, 'GPUs', torch.cuda.device_count())"
TUN=$O/tuning; cp -r tuning $TUN
T0=$(date +%s)
timeout 300 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a build/small_head_recurrent/sm_90a \
  build/kimi_linear_chunk/sm_90a --tuning $TUN --time-limit 240 > $O/tune_x2.log 2>&1; echo "tune rc $? in $(( $(date +%s) - T0 )) s"
grep -E "one GPU|Dask|workers|->" $O/tune_x2.log | head -30
tar czf $OUT/call9.tgz -C /tmp o
