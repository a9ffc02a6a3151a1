"""Stage 4, codegen: variant config + TIR plan → a short .cu that instantiates a kernel header, and
the per-library host translation unit (DESIGN.md §2.4). Text in, text out; no compilers here."""
