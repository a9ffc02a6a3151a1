"""Render chunk.cu.j2 (from a given template dir) into a standalone .cu with a cudart launcher."""
import sys, jinja2
sys.path.insert(0, '/work/main/src')
from kda2 import chunk_smem as cs
tdir, bv, stages, layout, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
env = jinja2.Environment(loader=jinja2.FileSystemLoader(tdir), undefined=jinja2.StrictUndefined)
s = cs.expected_strides(128)
old = 'old' in tag
plan = dict(s, prep_threads=256,
            state_threads=(bv // 16 * 32) if old else cs.state_threads(bv),
            prep_smem_bytes=cs.prep_smem_bytes(s),
            state_smem_bytes=(stages*(3*64*136*2 + 64*72*2 + bv*72*2 + 128*4) + (bv//16)*64*24*2) if old
            else cs.state_smem_bytes(s, k=128, block_v=bv, stages=stages))
import os
config = dict(cluster=bool(os.environ.get('CLUSTER')), arch=os.environ.get('ARCH', 'sm_90a'), k=128, v=128, chunk=64, block_v=bv, stages=stages, bucket=8192, state_layout=layout,
              gate_modes=['lower_bound', 'precomputed', 'softplus'], qk_l2norm=True, beta_sigmoid=True, varlen=True)
src = env.get_template('chunk.cu.j2').render(config=config, reasons=[('x', 'smoke')], plan=plan, vid='smoke', name='smoke',
      ns='kda2_smoke', spec_name='smoke', kda2_version='0', kernel_symbol='prep', prep_symbol='kda2_chunk_prep', state_symbol='kda2_chunk_state')
host = '''
#include <cuda_runtime.h>
extern "C" int kda2_smoke_launch(const KDA2RecurrentArgs* a, int max_chunks, void* stream) {
  static bool init = false;
  if (!init) {
    cudaFuncSetAttribute(kda2_chunk_prep, cudaFuncAttributeMaxDynamicSharedMemorySize, PREP_SMEM_BYTES);
    cudaFuncSetAttribute(kda2_chunk_state, cudaFuncAttributeMaxDynamicSharedMemorySize, STATE_SMEM_BYTES);
    init = true;
  }
  cudaStream_t s = (cudaStream_t)stream;
  kda2_chunk_prep<<<dim3(max_chunks, a->HV, a->N), PREP_THREADS, PREP_SMEM_BYTES, s>>>(*a);
  cudaError_t e = cudaGetLastError(); if (e) return (int)e;
  kda2_chunk_state<<<dim3(V / BLOCK_V, a->HV, a->N), STATE_THREADS, STATE_SMEM_BYTES, s>>>(*a);
  return (int)cudaGetLastError();
}
extern "C" int kda2_smoke_prep_only(const KDA2RecurrentArgs* a, int max_chunks, void* stream) {
  kda2_chunk_prep<<<dim3(max_chunks, a->HV, a->N), PREP_THREADS, PREP_SMEM_BYTES, (cudaStream_t)stream>>>(*a);
  return (int)cudaGetLastError();
}
extern "C" int kda2_smoke_state_only(const KDA2RecurrentArgs* a, void* stream) {
  kda2_chunk_state<<<dim3(V / BLOCK_V, a->HV, a->N), STATE_THREADS, STATE_SMEM_BYTES, (cudaStream_t)stream>>>(*a);
  return (int)cudaGetLastError();
}
'''
open(f'{tag}_bv{bv}_s{stages}_{layout}.cu', 'w').write(src + host)
