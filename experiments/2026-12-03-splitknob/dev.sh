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
# (Moved here from call1.sh / call5.sh, the same commands; call1 ran them inline.)
# bits_vs_head: split_bench.py's unsplit calls on HEAD's build and this one, compared bit for bit.
bits_vs_head() {
  python3 $X bits $H $O/old.pt > $O/bits.log 2>&1 && python3 $X bits $NEW $O/new.pt >> $O/bits.log 2>&1 \
    && python3 $X cmp $O/old.pt $O/new.pt >> $O/bits.log 2>&1; echo "bits rc $?"; rm -f $O/*.pt
}
# ab_pk3 CUT: kda2 bench P1-P6 softplus and the K3 set, HEAD's build and this one alternating, two rounds (no peers);
# the rows' columns CUT (cut -f).
ab_pk3() {
  for r in 1 2; do
    for L in old new; do
      LIB=$H; [ $L = new ] && LIB=$NEW
      timeout 80 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus --no-fla --no-cudnn \
        --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r failed"
      timeout 60 python3 -m kda2.bench chunk --library $LIB --shapes k3 --no-fla --no-cudnn \
        --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r failed"
    done
  done
  for f in $O/p_*_1 $O/p_*_2 $O/k3_*_1 $O/k3_*_2; do echo "== $(basename $f)"; grep -E "^\| [PK][0-9]" $f/bench_chunk.md | cut -d'|' -f$1; done
}
