"""Experiment only (not landed): time the phases of the wgmma state pass's chunk step with %globaltimer on thread 0
of a few CTAs and printf their per-step means at the end. usage: python trace_patch.py path/to/chunk.cuh (in place)
Phases: top (the stage's tiles: mbarrier wait and the barrier after it), ready (the next chunk's load_chunk: in an
overlapped launch the ready-flag wait), ab (the first two MMA groups to P), c (v_new, the last group, its wait), out
(o staging, copy-out, the step's end)."""
import sys

p = sys.argv[1]
s = open(p).read()


def sub(old, new):
    global s
    assert s.count(old) == 1, old[:60]
    s = s.replace(old, new)


sub("""  for (int j = 0; j < nchi; ++j) {
    const int stage = j % STAGES;
    // Two stages or more: the next tiles'""", """  auto gt = []() { uint64_t t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; };
  uint64_t tr_top = 0, tr_ready = 0, tr_ab = 0, tr_c = 0, tr_out = 0, t_prev = gt();
  const bool tracer = tid == 0 && blockIdx.x == 0 && blockIdx.y < 3 && blockIdx.z == 0;
  for (int j = 0; j < nchi; ++j) {
    const int stage = j % STAGES;
    // Two stages or more: the next tiles'""")
sub("""    __syncthreads();   // every thread is done with the stage refilled next
    if constexpr (STAGES > 1)
      if (j + STAGES - 1 < nchi) load_chunk(j + STAGES - 1, (j + STAGES - 1) % STAGES, false);""",
    """    __syncthreads();   // every thread is done with the stage refilled next
    uint64_t t1 = gt(); tr_top += t1 - t_prev;
    if constexpr (STAGES > 1)
      if (j + STAGES - 1 < nchi) load_chunk(j + STAGES - 1, (j + STAGES - 1) % STAGES, false);
    uint64_t t2 = gt(); tr_ready += t2 - t1;""")
sub("""    wgmma_wait<1>();
    wgmma_hold(P);""", """    wgmma_wait<1>();
    wgmma_hold(P);
    uint64_t t3 = gt(); tr_ab += t3 - t2;""")
sub("""    wgmma_wait<0>();
    wgmma_hold(O);
    wgmma_hold(S);""", """    wgmma_wait<0>();
    wgmma_hold(O);
    wgmma_hold(S);
    uint64_t t4 = gt(); tr_c += t4 - t3;""")
sub("""    fence_proxy_async();   // these generic accesses of the w tile come before the bulk copy that refills it
    if constexpr (STAGES == 1) __syncthreads();
  }
""", """    fence_proxy_async();   // these generic accesses of the w tile come before the bulk copy that refills it
    if constexpr (STAGES == 1) __syncthreads();
    t_prev = gt(); tr_out += t_prev - t4;
  }
  if (tracer && nchi > 0)
    printf("TRACE ov=%d stages=%d cta=(%d,%d) steps=%d ns/step: top %llu ready %llu ab %llu c %llu out %llu total %llu\\n",
           int(OV), STAGES, blockIdx.x, blockIdx.y, nchi, tr_top / nchi, tr_ready / nchi, tr_ab / nchi, tr_c / nchi,
           tr_out / nchi, (tr_top + tr_ready + tr_ab + tr_c + tr_out) / nchi);
""")
open(p, "w").write(s)
