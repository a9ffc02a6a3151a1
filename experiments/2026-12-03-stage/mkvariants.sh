#!/usr/bin/env bash
# Build and vendor (sm_90a) HEAD and each variant of this experiment into build/_ab/v_<name> (carried to the device):
#   base    HEAD's kimi_linear_chunk          b64 / b256   HEAD's small_head_chunk / large_head_chunk
#   dinv    dinv.patch (the diagonal inverse by pair 1 inside step 4, in place over A_II)
#   both    dinv.patch + stm.patch (step 6's staging by stmatrix)   — call 1; both landed in fd8d412, so from call 2
#   on base is HEAD with them and the patches below apply to it:
#   s6one   step 6 stages w over k and uᵀ in Γ, one barrier before both copy-outs (s6one.patch)
#   hdiv    the query head by an unsigned division, none for HV = H (hdiv.patch)
#   full    a whole chunk's tile copies without the zero-stores between them (full.patch)
#   u2      step 6's two passes unrolled (u2.patch, on s6one + hdiv)   — landed in 918c149 with s6one + hdiv (37e00ba)
#   refl    on 918c149: step 3's K halves hand over at once, A reflected (refl.patch, with its TIR model and CPU test)
#           — landed in 9ad3e00, so from call 9 on base is HEAD with it and the patches below apply to it:
#   cmaj    the plain prep grid read value head fastest, then chunk (cmaj.patch; call 9: slower)
#   bout    step 6's copy-out by bulk copies, w staged as the slot's swizzled image (bout.patch)
#   xskip   the exact path only where the pair's step-3 loop left a channel out (bar.red.or on the pair barrier; xskip.patch)
#   hot     timing only, outputs wrong: the state pass reads chunks 0 and 1's slots for every chunk (hot in L2; hot.patch)
#   hotw    timing only, outputs wrong: the prep writes every chunk into chunk 0's slot (hotw.patch)
#   noload  timing only, outputs wrong: no tile copies in the prep (the tiles hold what the SM's last CTA left; noload.patch)
#   NAME+NAME… several of those patches together, applied in that order
# Run from the repository root with the venv active, on a clean tree; restores the sources and tests.
set -euo pipefail
export PYTHONPATH=$PWD/src KDA2_CACHE_DIR=${KDA2_CACHE_DIR:-$PWD/cache}
D=experiments/2026-12-03-stage
for name in "$@"; do
  spec=kimi_linear_chunk
  case $name in
    base) ;;
    b64) spec=small_head_chunk ;;
    b256) spec=large_head_chunk ;;
    dinv) git apply $D/dinv.patch ;;
    both) git apply $D/dinv.patch; git apply $D/stm.patch ;;
    s6one|hdiv|full|u2|refl|cmaj|bout|xskip|hot|hotw|noload|*+*) for p in ${name//+/ }; do git apply $D/$p.patch; done ;;
    *) echo "unknown variant $name"; exit 2 ;;
  esac
  python3 -m kda2.tools.cli build -j2 $spec -- -Q build/$spec/sm_90a > /tmp/mkv_$name.log 2>&1 \
    || { echo "build $name failed"; tail -5 /tmp/mkv_$name.log; git checkout -q src tests; exit 1; }
  rm -rf build/_ab/v_$name
  python3 -m kda2.tools.cli vendor --to build/_ab/v_$name --arch sm_90a $spec > /dev/null
  echo "$name: $(grep -h -A3 "entry function 'kda2_chunk_prep_[0-9a-f]*'" build/$spec/sm_90a/*.ptxas.log | grep -o 'Used [0-9]* registers\|[0-9]* bytes spill stores' | sort | uniq -c | tr '\n' ' ')"
  git checkout -q src tests
done
