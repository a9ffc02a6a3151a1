# Sourced by call1a.sh and call1b.sh, with O (their folder under /tmp) and TGZ (its archive under $OUT) set: the
# carried libraries unpacked, `el` (elapsed time), `save` (the folder into $OUT/$TGZ) and `run NAME TIMEOUT PYTEST_ARGS`
# (one GPU test group into $O/NAME), and the GPU's name and clocks.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p "$O"
tar xJf build/_ab/vbfs.tar.xz -C /tmp || exit 3
save() { tar czf "$OUT/$TGZ" -C /tmp "$(basename "$O")" 2>/dev/null; }
run() {  # name, timeout, pytest args...
  local n=$1 t=$2; shift 2
  mkdir -p $O/$n
  timeout "$t" python3 -m pytest -m gpu -q --require-gpu -rs -p no:cacheprovider --results-dir $O/$n "$@" \
    > $O/$n.log 2>&1
  echo "$n rc $?" >> $O/rc.txt
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee $O/gpu.txt
