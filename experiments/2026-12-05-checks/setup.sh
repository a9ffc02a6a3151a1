# Sourced by call.sh and call2.sh on the device: the carried build and FLA wheels unpacked, `el` (elapsed time),
# `save` (the results so far into $OUT/$TGZ) and `run NAME TIMEOUT PYTEST_ARGS...` (one GPU test group into $O/NAME).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/routed.tar.xz || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PYTHONPATH:/tmp/site TRITON_CACHE_DIR=/tmp/triton
save() { tar czf "$OUT/$TGZ" -C /tmp o 2>/dev/null; }
run() {  # name, timeout, pytest args...
  local n=$1 t=$2; shift 2
  mkdir -p $O/$n
  timeout "$t" python3 -m pytest -m gpu -q --require-gpu -rs -p no:cacheprovider --results-dir $O/$n "$@" \
    > $O/$n.log 2>&1
  echo "$n rc $?" >> $O/rc.txt
}
