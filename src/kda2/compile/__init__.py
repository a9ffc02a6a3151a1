"""Stage 5, compile: the toolchain, nvcc/nvlink actions as Python, ptxas and SASS checks, the SCons
graph and its verified cache (DESIGN.md §2.5). The only stage that imports SCons."""
