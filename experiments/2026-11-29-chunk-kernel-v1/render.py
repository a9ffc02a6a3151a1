import sys, jinja2
bv, stages, layout = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
env = jinja2.Environment(loader=jinja2.FileSystemLoader('/work/main/src/kda2/templates'), undefined=jinja2.StrictUndefined)
lds_kv, lds_a, lds_u, lds_g, lds_t, lds_o, K = 136, 72, 72, 132, 68, 24, 128
plan = dict(lds_kv=lds_kv, lds_a=lds_a, lds_u=lds_u, lds_g=lds_g, lds_t=lds_t, lds_o=lds_o, prep_threads=256,
            state_threads=bv // 16 * 32,
            prep_smem_bytes=3*64*lds_kv*2 + 64*lds_g*4 + 64*lds_t*4 + 64*4,
            state_smem_bytes=stages*(3*64*lds_kv*2 + 64*lds_a*2 + bv*lds_u*2 + K*4) + (bv//16)*64*lds_o*2)
config = dict(arch='sm_90a', k=128, v=128, chunk=64, block_v=bv, stages=stages, bucket=8192, state_layout=layout,
              gate_modes=['lower_bound', 'precomputed', 'softplus'], qk_l2norm=True, beta_sigmoid=True, varlen=True)
src = env.get_template('chunk.cu.j2').render(config=config, reasons=[('x', 'smoke')], plan=plan, vid='smoke', name='smoke',
      ns='kda2_smoke', spec_name='smoke', kda2_version='0', kernel_symbol='prep', prep_symbol='kda2_chunk_prep', state_symbol='kda2_chunk_state')
host = f'''
#include <cuda_runtime.h>
extern "C" int kda2_smoke_launch(const KDA2RecurrentArgs* a, int max_chunks, void* stream) {{
  static bool init = false;
  if (!init) {{
    cudaFuncSetAttribute(kda2_chunk_prep, cudaFuncAttributeMaxDynamicSharedMemorySize, PREP_SMEM_BYTES);
    cudaFuncSetAttribute(kda2_chunk_state, cudaFuncAttributeMaxDynamicSharedMemorySize, STATE_SMEM_BYTES);
    init = true;
  }}
  cudaStream_t s = (cudaStream_t)stream;
  kda2_chunk_prep<<<dim3(max_chunks, a->HV, a->N), PREP_THREADS, PREP_SMEM_BYTES, s>>>(*a);
  cudaError_t e = cudaGetLastError(); if (e) return (int)e;
  kda2_chunk_state<<<dim3(V / BLOCK_V, a->HV, a->N), STATE_THREADS, STATE_SMEM_BYTES, s>>>(*a);
  return (int)cudaGetLastError();
}}
extern "C" int kda2_smoke_prep_only(const KDA2RecurrentArgs* a, int max_chunks, void* stream) {{
  kda2_chunk_prep<<<dim3(max_chunks, a->HV, a->N), PREP_THREADS, PREP_SMEM_BYTES, (cudaStream_t)stream>>>(*a);
  return (int)cudaGetLastError();
}}
extern "C" int kda2_smoke_state_only(const KDA2RecurrentArgs* a, void* stream) {{
  kda2_chunk_state<<<dim3(V / BLOCK_V, a->HV, a->N), STATE_THREADS, STATE_SMEM_BYTES, (cudaStream_t)stream>>>(*a);
  return (int)cudaGetLastError();
}}
'''
open(f'smoke_bv{bv}_s{stages}_{layout}.cu', 'w').write(src + host)
