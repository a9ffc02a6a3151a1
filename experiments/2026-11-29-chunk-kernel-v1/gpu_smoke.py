"""Standalone check of the chunk kernels (before pipeline integration): correctness vs fp64, timing vs FLA."""
import ctypes, json, math, os, sys, time
import numpy as np, torch
sys.path.insert(0, os.path.abspath('../../src'))
from kda2 import reference as R
from ctypes import c_void_p, c_int32, c_float, c_int64

class Args(ctypes.Structure):
    _fields_ = [(n, c_void_p) for n in ('q', 'k', 'v', 'g', 'beta', 'A_log', 'dt_bias', 'o', 'h0', 'ht', 'cu', 'idx')] + \
               [('N', c_int32), ('T', c_int32), ('H', c_int32), ('HV', c_int32), ('scale', c_float), ('lb', c_float),
                ('mode', c_int32), ('flags', c_int32), ('v_first', c_int32), ('reserved', c_int32),
                ('ws', c_void_p), ('ws_bytes', c_int64), ('max_seqlen', c_int64)]

LIBS = {}
def lib(name):
    if name not in LIBS:
        LIBS[name] = ctypes.CDLL(os.path.abspath(name))
    return LIBS[name]

WS = {}
def run_kda2(libname, q, k, v, g, beta, *, A_log=None, dt_bias=None, scale=None, h0=None, cu=None, mode=0, l2=True,
             bsig=True, neg=False, lb=0.0, v_first=True, out=None, ht=None, parts='all'):
    B, T, H, K = q.shape; HV, V = v.shape[2], v.shape[3]
    if cu is not None:
        N = cu.numel() - 1; total = T; lens = (cu[1:] - cu[:-1]); maxlen = int(lens.max())
    else:
        N = B; total = B * T; maxlen = T
    ws_bytes = (total // 64 + N + 1) * HV * 74240
    key = (libname, ws_bytes)
    if WS.get('n', 0) < ws_bytes:
        WS['buf'] = torch.empty(ws_bytes, dtype=torch.uint8, device='cuda'); WS['n'] = ws_bytes
    o = out if out is not None else torch.empty_like(v)
    flags = (1 if l2 else 0) | (2 if bsig else 0) | (4 if neg else 0) | (8 if g.dtype == torch.bfloat16 else 0) | \
            (16 if beta.dtype == torch.bfloat16 else 0) | (32 if A_log is not None else 0) | (64 if dt_bias is not None else 0)
    a = Args(q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), A_log.data_ptr() if A_log is not None else 0,
             dt_bias.data_ptr() if dt_bias is not None else 0, o.data_ptr(), h0.data_ptr() if h0 is not None else 0,
             ht.data_ptr() if ht is not None else 0, cu.data_ptr() if cu is not None else 0, 0, N, T, H, HV,
             scale if scale is not None else K ** -0.5, lb, mode, flags, 1 if v_first else 0, 0, WS['buf'].data_ptr(), ws_bytes, maxlen)
    L = lib(libname); s = torch.cuda.current_stream().cuda_stream
    mc = (maxlen + 63) // 64
    if parts == 'all': rc = L.kda2_smoke_launch(ctypes.byref(a), mc, c_void_p(s))
    elif parts == 'prep': rc = L.kda2_smoke_prep_only(ctypes.byref(a), mc, c_void_p(s))
    else: rc = L.kda2_smoke_state_only(ctypes.byref(a), c_void_p(s))
    assert rc == 0, rc
    return o

def rel(x, ref):
    x = np.asarray(x, dtype=np.float64); return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-30))

def make(B, T, H, HV, gate, seed, cu=None, strong=False, beta_mode=None):
    gen = torch.Generator().manual_seed(seed)
    K = V = 128
    q = torch.randn(B, T, H, K, generator=gen).bfloat16(); k = torch.randn(B, T, H, K, generator=gen).bfloat16()
    v = torch.randn(B, T, HV, V, generator=gen).bfloat16()
    A_log = dt = None; lb = 0.0
    if gate == 'precomputed':
        g = torch.nn.functional.logsigmoid(torch.randn(B, T, HV, K, generator=gen)) / 16
        if strong: g[..., :10] = -20.0
        mode = 0
    else:
        g = torch.randn(B, T, HV, K, generator=gen).bfloat16()
        A_log = (torch.randn(HV, generator=gen) * 0.5).float(); dt = torch.randn(HV * K, generator=gen).float()
        if strong: dt.view(HV, K)[:, :8] = 6.0
        mode = 1 if gate == 'softplus' else 2
        lb = -5.0 if gate == 'lower_bound' else 0.0
    beta = torch.randn(B, T, HV, generator=gen).float()
    bsig = True
    if beta_mode is not None:
        beta = torch.full((B, T, HV), beta_mode); bsig = False
    h0 = torch.randn(B if cu is None else len(cu) - 1, HV, V, K, generator=gen).float() * 0.1
    return dict(q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt, mode=mode, lb=lb, h0=h0, bsig=bsig)

def check(libname, B, T, H, HV, gate, seed, cu=None, v_first=True, use_h0=True, strong=False, beta_mode=None, fla=None):
    d = make(B, T, H, HV, gate, seed, cu, strong, beta_mode)
    cu_t = torch.tensor(cu, dtype=torch.int64, device='cuda') if cu is not None else None
    h0 = d['h0'] if v_first else d['h0'].transpose(-1, -2).contiguous()
    dev = {k2: (t.cuda() if isinstance(t, torch.Tensor) else t) for k2, t in d.items()}
    o = torch.full_like(dev['v'], float('nan')); ht = torch.full_like(h0.cuda(), float('nan'))
    run_kda2(libname, dev['q'], dev['k'], dev['v'], dev['g'], dev['beta'], A_log=dev['A_log'], dt_bias=dev['dt_bias'],
             h0=h0.cuda() if use_h0 else None, cu=cu_t, mode=d['mode'], lb=d['lb'], v_first=v_first, out=o, ht=ht, bsig=d['bsig'])
    torch.cuda.synchronize()
    opts = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=gate != 'precomputed', use_beta_sigmoid_in_kernel=d['bsig'],
                A_log=d['A_log'], dt_bias=d['dt_bias'], lower_bound=(d['lb'] if gate == 'lower_bound' else None),
                state_v_first=v_first, cu_seqlens=np.array(cu) if cu is not None else None)
    ro, rs = R.chunk_kda_ref(d['q'].float().numpy(), d['k'].float().numpy(), d['v'].float().numpy(), d['g'].float().numpy(),
                             d['beta'].float().numpy(), initial_state=h0.numpy() if use_h0 else None, output_final_state=True, **opts)
    eo = rel(o.float().cpu().numpy(), ro); es = rel(ht.cpu().numpy(), rs)
    nan = bool(torch.isnan(o).any() or torch.isnan(ht).any())
    fo = fs = None
    if fla is not None:
        try:
            kw = dict(opts); kw['cu_seqlens'] = cu_t; kw['A_log'] = dev['A_log']; kw['dt_bias'] = dev['dt_bias']
            if gate == 'lower_bound': kw['safe_gate'] = True
            fo_, fs_ = fla(dev['q'], dev['k'], dev['v'], dev['g'], dev['beta'], initial_state=h0.cuda() if use_h0 else None,
                           output_final_state=True, **kw)
            fo = rel(fo_.float().cpu().numpy(), ro); fs = rel(fs_.cpu().numpy(), rs)
        except Exception as e:
            fo = f'err {type(e).__name__}: {e}'[:100]
    print(f'{libname} B{B} T{T} H{H} HV{HV} {gate} cu={cu} vf={v_first} h0={use_h0} strong={strong} beta={beta_mode}: '
          f'o {eo:.2e} state {es:.2e} nan={nan} | FLA o {fo if not isinstance(fo, float) else f"{fo:.2e}"} state {fs if fs is None else f"{fs:.2e}"}', flush=True)
    return eo, es, nan

def bench(libname, fla, shape, gate='softplus', iters=20):
    name, B, T, H, cu = shape
    HV = H
    gen = torch.Generator(device='cuda').manual_seed(0)
    K = V = 128
    q = torch.randn(B, T, H, K, device='cuda', dtype=torch.bfloat16); k = torch.randn_like(q); v = torch.randn(B, T, HV, V, device='cuda', dtype=torch.bfloat16)
    g = torch.randn(B, T, HV, K, device='cuda', dtype=torch.bfloat16); beta = torch.randn(B, T, HV, device='cuda').float()
    A_log = (torch.randn(HV, device='cuda') * 0.5).float(); dt = torch.randn(HV * K, device='cuda').float()
    N = B if cu is None else len(cu) - 1
    h0 = torch.randn(N, HV, V, K, device='cuda') * 0.1; ht = torch.empty_like(h0); o = torch.empty_like(v)
    cu_t = torch.tensor(cu, dtype=torch.int64, device='cuda') if cu is not None else None
    lb = -5.0 if gate == 'lower_bound' else 0.0; mode = 1 if gate == 'softplus' else 2
    def ours(parts='all'):
        run_kda2(libname, q, k, v, g, beta, A_log=A_log, dt_bias=dt, h0=h0, cu=cu_t, mode=mode, lb=lb, out=o, ht=ht, parts=parts)
    def theirs():
        return fla(q, k, v, g, beta, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                   use_beta_sigmoid_in_kernel=True, A_log=A_log, dt_bias=dt, lower_bound=(lb if gate == 'lower_bound' else None),
                   safe_gate=(gate == 'lower_bound'), state_v_first=True, cu_seqlens=cu_t)
    def t(fn, *a):
        for _ in range(3): fn(*a)
        torch.cuda.synchronize(); ts = []
        for _ in range(iters):
            s, e = torch.cuda.Event(True), torch.cuda.Event(True); s.record(); fn(*a); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
        return float(np.median(ts))
    ta = t(ours); tp = t(ours, 'prep'); ts_ = t(ours, 'state')
    tf = t(theirs) if fla else float('nan')
    agree = float('nan')
    if fla:
        fo, _ = theirs(); ours(); torch.cuda.synchronize()
        agree = float((o.float() - fo.float()).norm() / fo.float().norm())
    print(f'BENCH {libname} {name} {gate}: kda2 {ta:.3f} ms (prep {tp:.3f} state {ts_:.3f}) FLA {tf:.3f} ms  speedup {tf/ta:.2f}x  agree {agree:.1e}', flush=True)
    del q, k, v, g, o, h0, ht; torch.cuda.empty_cache()

if __name__ == '__main__':
    try:
        from fla.ops.kda import chunk_kda as fla
    except Exception as e:
        print('no FLA', e); fla = None
    L = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else 'check'
    vf = 'k_first' not in L
    if mode == 'check':
        check(L, 2, 200, 2, 4, 'softplus', 2, v_first=vf)
        check(L, 1, 1000, 2, 2, 'softplus', 3, cu=[0, 15, 100, 300, 1000], v_first=vf)
        check(L, 1, 500, 2, 2, 'lower_bound', 4, v_first=vf)
        check(L, 1, 300, 1, 2, 'precomputed', 5, strong=True, v_first=vf)
        check(L, 1, 300, 1, 2, 'softplus', 6, strong=True, v_first=vf, use_h0=False)
    if mode == 'check2':
        check(L, 1, 64, 1, 1, 'precomputed', 1, use_h0=False, v_first=vf)
        check(L, 1, 160, 1, 1, 'precomputed', 7, beta_mode=0.999, v_first=vf)
    if mode.startswith('bench'):
        shapes = {'P1': ('P1', 1, 8192, 64, None), 'P2': ('P2', 1, 16384, 32, None), 'P3': ('P3', 8, 2048, 32, None),
                  'P4': ('P4', 1, 8192, 64, [0, 1300, 1847, 3895, 4858, 5129, 8192]), 'P5': ('P5', 1, 65536, 32, None),
                  'P6': ('P6', 2, 2048, 8, None)}
        want = sys.argv[3].split(',') if len(sys.argv) > 3 else list(shapes)
        for nm in want:
            bench(L, fla if mode == 'bench' else None, shapes[nm])
