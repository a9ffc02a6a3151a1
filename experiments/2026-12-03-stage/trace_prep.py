"""Experiment only (not landed): when each prep warp reaches the step boundaries. Lane 0 of every warp writes clock64()
(the SM's cycle counter: one clock for a CTA's warps) at 14 marks into a static shared array (no registers held across
the body); at the end lane 0 of each warp of a few CTAs (blockIdx.y == 1, blockIdx.x % 16 == 3, z == 0: 8 CTAs of a P1
launch, at most 4096 lines a process) prints its row. Marks: 0 entry, 1 own gate pieces landed, 2 after the gate barrier,
3 own q / k landed, 4 after the l2norm barrier, 5 step 3's k-step loops done, 6 the K halves' exchange and exact path
done, 7 step 4 done, 8 after the end-of-step-4 barrier, 9 after level 1's barrier, 10 after the T16 barrier, 11 step 6's
stagings done, 12 after their barrier, 13 the copy-outs done.
With --mid (call 8): CTAs from the middle of the grid instead (the first wave's loads meet every CTA's at once), and
two more marks in step 3's exchange: 14 after the pair barrier, 15 before the exact path (after the partner's
partials are added and the Aqk / A stores issued).
usage: python trace_prep.py path/to/chunk.cuh [--mid] (in place); analyse with trace_report.py."""
import sys

p = sys.argv[1]
MID = "--mid" in sys.argv[2:]
NM = 16 if MID else 14
# which CTAs print: head 1 of sequence 0 (the first wave on P1), or with --mid head 40 of P1 / head 1 of P3's fifth
# sequence (grid (32, 32, 8)): about the middle of either grid
SEL = ("(gridDim.z > 1 ? blockIdx.y == 1 && blockIdx.z == gridDim.z / 2 : blockIdx.y == 40)" if MID
       else "blockIdx.y == 1 && blockIdx.z == 0")
EXTRA_FMT = " %lld %lld" if MID else ""
EXTRA_ARGS = ", t[14], t[15]" if MID else ""
s = open(p).read()


def sub(old, new, count=1):
    global s
    assert s.count(old) == count, (s.count(old), old[:70])
    s = s.replace(old, new)


sub("""struct SeqBounds { int64_t bos, len; };""", """struct SeqBounds { int64_t bos, len; };
__device__ unsigned kda2_trace_lines;
#define NMARKS """ + str(NM) + """
#define KDA2_MARK(i) do { if ((threadIdx.x & 31) == 0) kda2_trace[threadIdx.x >> 5][i] = clock64(); } while (0)""")
sub("""  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint8_t* slot = slot_ptr(a, sb.bos, n, c, hv);""", """  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  __shared__ long long kda2_trace[8][NMARKS];
  KDA2_MARK(0);
  uint8_t* slot = slot_ptr(a, sb.bos, n, c, hv);""")
sub("""  cp_async_wait<2>();   // this thread's gate pieces
  __syncthreads();      // everyone's
""", """  cp_async_wait<2>();   // this thread's gate pieces
  KDA2_MARK(1);
  __syncthreads();      // everyone's
  KDA2_MARK(2);
""")
sub("""  cp_async_wait<1>();   // this thread's q and k pieces
  __syncthreads();      // everyone's; Γ complete
""", """  cp_async_wait<1>();   // this thread's q and k pieces
  KDA2_MARK(3);
  __syncthreads();      // everyone's; Γ complete
""")
sub("""  __syncthreads();

  E* gAq = reinterpret_cast<E*>(slot + OFF_AQ);""", """  __syncthreads();
  KDA2_MARK(4);

  E* gAq = reinterpret_cast<E*>(slot + OFF_AQ);""")
sub("""    // The two halves of K meet in the A tile""", """    KDA2_MARK(5);
    // The two halves of K meet in the A tile""")
sub("""  // zeros right of the diagonal blocks of Aqk
""", """  KDA2_MARK(6);
  // zeros right of the diagonal blocks of Aqk
""")
sub("""    if (warp == 1 || warp == 5) {
      asm volatile("bar.sync""", """    KDA2_MARK(7);
    if (warp == 1 || warp == 5) {
      asm volatile("bar.sync""")
sub("""    __syncthreads();   // steps 3 and 4 done: A complete and its diagonal blocks inverted, q and k read for the last time
""", """    __syncthreads();   // steps 3 and 4 done: A complete and its diagonal blocks inverted, q and k read for the last time
    KDA2_MARK(8);
""")
if MID:   # after the exchange's pair barrier; before each part's exact path
    sub("""    prep_pair_sync(I);
    if (part == 1) {""", """    prep_pair_sync(I);
    KDA2_MARK(14);
    if (part == 1) {""")
    sub("""      exact(dQ, sQ);""", """      KDA2_MARK(15);
      exact(dQ, sQ);""")
    sub("""      exact(dK, sK);""", """      KDA2_MARK(15);
      exact(dK, sK);""")
# the barrier after level 1 (its comment differs with refl.patch): the mark on the line after it
_i = s.index("  __syncthreads();   // T1 and T2 complete;")
_j = s.index("\n", _i) + 1
s = s[:_j] + "  KDA2_MARK(9);\n" + s[_j:]
sub("""  __syncthreads();   // T16 complete before step 6 reads it
""", """  __syncthreads();   // T16 complete before step 6 reads it
  KDA2_MARK(10);
""")
sub("""    __syncthreads();   // both stagings complete
""", """    KDA2_MARK(11);
    __syncthreads();   // both stagings complete
    KDA2_MARK(12);
""")
sub("""      gU[p] = *reinterpret_cast<const uint4*>(sStU + vv * LDS_U + i);
    }
  }
}
""", """      gU[p] = *reinterpret_cast<const uint4*>(sStU + vv * LDS_U + i);
    }
  }
  KDA2_MARK(13);
  if (lane == 0 && """ + SEL + """ && blockIdx.x % 16 == 3 && atomicAdd(&kda2_trace_lines, 1u) < 4096u) {
    const long long* t = kda2_trace[warp];
    printf("PREPTRACE %d %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld""" + EXTRA_FMT + """\\n", blockIdx.x, hv,
           warp, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12], t[13]""" + EXTRA_ARGS + """);
  }
}
""")
open(p, "w").write(s)
