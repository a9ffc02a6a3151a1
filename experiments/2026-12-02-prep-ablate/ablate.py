"""Write an ablated copy of chunk.cuh's prep: one phase's work removed, the rest as it is (timing only; the outputs
of an ablated build are wrong). usage: python ablate.py NAME path/to/chunk.cuh (edits in place)

Why: the prep's phases share the SM with each other and with the second CTA, so stall samples do not say what a phase
costs; the time saved by removing it does (same run, P1-P6).
  gate   the softplus activation replaced by a cheap non-positive stand-in of the same magnitude (no MUFU)
  scan   Γ = the activated gate itself, no in-chunk cumulative sum
  norm   no l2norm pass
  s3     no A / Aqk (step 3, its exact channels and the Aqk zeros)
  s4     no element-wise outputs (step 4's loop and the β v stores; the barrier stays)
  s56    no inverse and no w / u (steps 5 and 6; a barrier stays)
  s5d    no forward substitution of the diagonal 16-blocks (step 5's first part)
  s5l    no block levels (step 5's levels 1 and 2)
  s6     no w / u products (step 6; its stores stay)
"""
import sys

name, path = sys.argv[1], sys.argv[2]
s = open(path).read()


def sub(old, new, count=1):
    global s
    assert s.count(old) >= 1, old[:80]
    s = s.replace(old, new, count)


def cut(start, end, keep_end=True):
    """#if 0 from the line holding `start` up to (not including) the line holding `end`."""
    global s
    i = s.index(start)
    i = s.rindex("\n", 0, i) + 1
    j = s.index(end, i)
    j = s.rindex("\n", 0, j) + 1
    s = s[:i] + "#if 0\n" + s[i:j] + "#endif\n" + s[j:]


if name == "gate":
    sub("for (int e = 0; e < SCAN_ROWS; ++e) x[e] = -a_scale * softplus_log2(x[e] + bias);",
        "for (int e = 0; e < SCAN_ROWS; ++e) x[e] = -a_scale * fabsf(x[e] + bias);")
elif name == "scan":
    sub("      acc += SCAN_ROWS * part + e < rows ? x[e] : 0.f;\n      x[e] = acc;",
        "      acc = SCAN_ROWS * part + e < rows ? x[e] : 0.f;\n      x[e] = acc;")
    sub("    float base = part > 0 ? sTot[d] : 0.f;", "    float base = 0.f;")
    sub("      if (q < part) base += sTot[q * K + d];", "      if (q < part && q < 0) base += sTot[q * K + d];")
elif name == "norm":
    sub("    if (a.flags & KDA2_QK_L2NORM) {", "    if (false) {")
elif name == "s3":
    cut("  // CUDA-core figure.\n  {\n", "  cp_async_wait<0>();   // this thread's v pieces")
elif name == "s4":
    cut("#pragma unroll\n    for (int m = 0; m < ITEMS; ++m) {  // 8 channels", "    if (tid < K / 4) {")
    cut("#pragma unroll\n    for (int m = 0; m < ITEMS; ++m) *reinterpret_cast<uint4*>(sQ + item_row(m)", "  }\n\n  // ---- 5. T")
elif name == "s56":
    cut("  float* sTi = reinterpret_cast<float*>(sK);   // over k", "// =============================================================================================\n// State pass")
    i = s.index("#endif\n// =============================================================================================\n// State pass")
    s = s[:i] + "#endif\n  __syncthreads();\n}\n\n" + s[i + len("#endif\n"):]
elif name == "s5d":
    cut("  if (tid < 64) {\n    const int I = tid >> 4, col = tid & 15, r0 = 16 * I;", "  __syncthreads();\n  {  // level 1")
elif name == "s5l":
    cut("  {  // level 1: warp", "  __syncthreads();   // T complete")
elif name == "s6":
    cut("#pragma unroll 1\n      for (int ks = 0; ks <= rb(0); ++ks) {", "      // stage as E: w row-major")
else:
    raise SystemExit(f"unknown ablation {name}")
open(path, "w").write(s)
