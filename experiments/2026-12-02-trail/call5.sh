#!/usr/bin/env bash
# Device call 5 (H200): the state pass launched as the prep's programmatic dependent (plain unsplit launches, sm_90:
# library.cpp.j2; chunk.cuh Kernels::prep signals at entry, Kernels::state waits for the prep grid's completion
# before it reads anything), so its CTAs are resident when the prep ends. old = HEAD's routed Kimi chunk library,
# new = that change. Chunk GPU tests on new; same bits old vs new; P1-P6 softplus and the K3 set (bounded),
# alternating; P1-P6 with overlap refused on new.
# (the steps of call4.sh, on chunk_old.tar.xz = HEAD before this change and chunk_new.tar.xz rebuilt with it)
exec bash experiments/2026-12-02-trail/call4.sh
