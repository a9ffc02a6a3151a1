#!/usr/bin/env bash
# Device call 4 (H200): the trailing launch (library.cpp.j2 choose_trail, chunk.cuh Kernels::prep): a chunk call that
# does not overlap runs its prep first, one CTA per item in chunk-major order, and the state pass as its programmatic
# dependent, each slot waited for by its ready flag. old = HEAD's routed Kimi chunk library, new = the same kernels
# with the trailing launch. Chunk GPU tests on new; same bits old vs new; P1-P6 softplus and the K3 set (bounded),
# alternating, three rounds; P1-P6 with overlap refused on new (plain launches).
OLD_TAR=${OLD_TAR:-chunk_old.tar.xz} NEW_TAR=${NEW_TAR:-chunk_new.tar.xz}
. experiments/2026-12-02-trail/ab_env.sh
tests_and_bits
el bench
bench_p 3
bench_k3 2
timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $NEW --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
  --overlap off --out $O/p_plain > $O/p_plain.log 2>&1; echo "P new, overlap off: $(row $O/p_plain.log)"
el done
rm -f $O/*/*.png; cp -r $O $OUT/
