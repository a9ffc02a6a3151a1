"""kda2.runtime.monitor on a GPU: real CUDA events around real launches, and what the monitor costs per call.

The records are checked (route, kernel, shape, comparability with the tuned latency, finite positive
latencies, file formats); timings are printed and written to `--results-dir` (monitor_overhead.json),
never asserted: a shared GPU host's timings are not a test verdict.
"""
from __future__ import annotations

import __future__
import ast
import inspect
import json
import math
import re
import statistics
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _monitor_off():
    from kda2.runtime import monitor

    monitor.disable(flush=False)
    yield
    monitor.disable(flush=False)


@pytest.fixture(scope="session")
def chunk_lib(request, torch_cuda):
    """As in test_chunk_gpu.py (parametrized by conftest.py): one chunk-family library per spec."""
    from kda2.runtime import loader
    from kda2.runtime.errors import ArtifactError

    if request.param == "<no chunk build>":
        pytest.fail(f"a GPU is present but no chunk-family library is built under {loader.build_dir()}")
    try:
        lib = loader.load(request.param)
    except ArtifactError as exc:
        pytest.fail(f"a GPU is present but the chunk library is unusable: {exc}")
    assert lib.family == "chunk"
    return lib


def _layout(lib) -> str:
    """The decode row to exercise: a tuned one if the library has one (k_first first), else any built."""
    rows = [d for d in lib.dispatch if d["state_layout"] in lib.features.state_layouts]
    first = min(int(d["bucket"]) for d in rows)
    decode = sorted((d for d in rows if int(d["bucket"]) == first), key=lambda d: (d.get("tuned") is None,
                                                                                   d["state_layout"]))
    return decode[0]


def _inputs(torch, lib, N: int, T: int, H: int, HV: int, v_first: bool, seed: int) -> tuple[dict, dict]:
    """Realistic decode/prefill inputs for any built library (softplus gate if built) and the call options."""
    import torch.nn.functional as F

    f = lib.features
    gate = "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    K, V = lib.k, lib.v

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32)

    q, k = randn(N, T, H, K), randn(N, T, H, K)
    if not f.qk_l2norm:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    in_kernel = gate != "precomputed"
    x = dict(q=q.bfloat16(), k=k.bfloat16(), v=randn(N, T, HV, V).bfloat16(),
             g=randn(N, T, HV, K) if in_kernel else F.logsigmoid(randn(N, T, HV, K)) / 16,
             beta=randn(N, T, HV) if f.beta_sigmoid else torch.sigmoid(randn(N, T, HV)))
    extra = dict(A_log=randn(HV) * 0.5 if in_kernel else None, dt_bias=randn(HV * K) if in_kernel else None)
    opts = dict(use_qk_l2norm_in_kernel=f.qk_l2norm, use_gate_in_kernel=in_kernel,
                use_beta_sigmoid_in_kernel=f.beta_sigmoid, lower_bound=-5.0 if gate == "lower_bound" else None,
                state_v_first=v_first)
    sshape = (N, HV, V, K) if v_first else (N, HV, K, V)
    x["pool"] = randn(*sshape) * 0.1
    x["idx"] = torch.arange(N, dtype=torch.int32, device="cuda")
    return x, {**extra, **opts}


def _samples(records, **match):
    return [r for r in records if r["record"] == "sample" and all(r[k] == v for k, v in match.items())]


def _parse_prometheus(text: str) -> list[tuple[str, dict, float]]:
    """prometheus_client's parser when installed, else a strict reader of the same format."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        rows = []
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
            assert m, line
            labels = dict(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            rows.append((m.group(1), labels, float(m.group(3))))
        return rows
    return [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def test_decode_calls_record_sensible_latencies(lib, torch_cuda, seed, tmp_path):
    """Decode calls (pool form, dense form, prepared pool) with the monitor on: every call sampled
    (sample_every=1), every record names the dispatch row kda2_select picks, its kernel and the call's
    shape; at the tuned shape a sample is comparable with the tuned latency (same GPU), at another it
    says why not; latencies are finite and positive; the JSONL and Prometheus files parse."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda, fused_recurrent_kda_pool, monitor, prepare_pool

    row = _layout(lib)
    v_first = row["state_layout"] == "v_first"
    tuned = row.get("tuned")
    N, T, H = (tuned["shape"]["N"], tuned["shape"]["T"], tuned["shape"]["H"]) if tuned else (64, 1, 32)
    x, kw = _inputs(torch, lib, N, T, H, H, v_first, seed + 500)
    small, kw_small = _inputs(torch, lib, 8, 1, H, H, v_first, seed + 501)
    out = torch.empty_like(x["v"])
    step = prepare_pool(small["q"], small["k"], small["v"], small["g"], small["beta"], small["pool"], small["idx"],
                        library=lib, **kw_small)
    assert lib.select(v_first, T, N * H) == row["index"]  # the row's own batch class: N·HV chains

    def pool_call():
        fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], x["pool"], x["idx"], library=lib,
                                 out=out, **kw)

    for _ in range(3):  # warm-up: module loads, first-use checks, the signature cache
        pool_call()
    torch.cuda.synchronize()
    jl, prom = tmp_path / "kda2.jsonl", tmp_path / "kda2.prom"
    m = monitor.enable(sample_every=1, jsonl=jl, prometheus=prom, min_samples=10)
    n_pool, n_small = 40, 20
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(n_pool):
        pool_call()
    e1.record()
    for _ in range(n_small):
        fused_recurrent_kda(small["q"], small["k"], small["v"], small["g"], small["beta"],
                            initial_state=small["pool"], library=lib, **kw_small)
        step(small["q"], small["k"], small["v"], small["g"], small["beta"], small["pool"], small["idx"])
    records = monitor.flush(wait=True)
    loop_us = e0.elapsed_time(e1) * 1e3 / n_pool

    assert m.errors == 0 and m.skipped == 0 and m.paused == 0
    gpu = torch.cuda.get_device_name()
    # each call's own dispatch row: the N = 8 calls may fall in another batch class than the tuned shape's
    small_row = lib.route(v_first, 1, 8 * H)
    assert small_row is not None and lib.select(v_first, 1, 8 * H) == small_row["index"]

    def want(r):
        return dict(spec=lib.spec, arch=lib.arch, family="recurrent", kernel=r["variant"], variant_index=r["index"],
                    state_layout=r["state_layout"], bucket=int(r["bucket"]))
    big = _samples(records, entry="fused_recurrent_kda_pool")
    dense = _samples(records, entry="fused_recurrent_kda")
    prep = _samples(records, entry="prepare_pool")
    assert (len(big), len(dense), len(prep)) == (n_pool, n_small, n_small)
    for rows_, expect in ((big, want(row)), (dense + prep, want(small_row))):
        for r in rows_:
            assert {k: r[k] for k in expect} == expect, r
            assert math.isfinite(r["us"]) and 0 < r["us"] < 1e6, r
    for r in big:
        assert r["shape"] == {"N": N, "T": T, "H": H, "HV": H}
        if tuned and tuned.get("gpu") == gpu:
            assert r["comparable"] is True and r["reason"] is None and r["tuned_us"] == tuned["us"], r
        else:
            assert r["comparable"] is False and r["reason"], r
    for r in dense + prep:
        assert r["shape"]["N"] == 8 and r["comparable"] is False
        assert ("differs from the tuned shape" if small_row.get("tuned") else "no tuned latency") in r["reason"], r
    # one statistic per route (kernel and batch class): the N = 8 calls share the row's only where both match (one
    # kernel can serve two classes: large_head_recurrent's does)
    same = (small_row["variant"], small_row.get("class")) == (row["variant"], row.get("class"))
    (s,) = [s for s in monitor.stats() if s["kernel"] == row["variant"] and s["class"] == row.get("class")]
    assert s["count"] == s["sampled"] == n_pool + (2 * n_small if same else 0) and s["pending"] == 0
    assert s["min_us"] <= s["median_us"] <= s["p90_us"] <= s["max_us"]

    lines = [json.loads(line) for line in jl.read_text().splitlines()]
    assert len(lines) == len(records) and lines[-1]["record"] == "summary"
    rows = _parse_prometheus(prom.read_text())
    lat = [r for r in rows if r[0] == "kda2_call_latency_us" and r[1].get("kernel") == row["variant"]]
    assert {r[1]["quantile"] for r in lat} == {"0.5", "0.9"}
    assert all(set(r[1]) == {"spec", "arch", "kernel", "bucket", "class", "quantile"} and r[2] > 0 for r in lat), lat
    sampled = [r for r in rows if r[0] == "kda2_calls_sampled_total" and r[1].get("kernel") == row["variant"]
               and r[1].get("class") == row.get("class")]
    assert sampled and sampled[0][2] == n_pool + (2 * n_small if same else 0)

    med = statistics.median(r["us"] for r in big)
    alerts = [r for r in records if r["record"] == "alert"]
    print(f"\n[{lib.spec}/{lib.arch}] {row['state_layout']}:{row['bucket']} kernel {row['variant']} N={N} T={T} H={H}: "
          f"monitor median {med:.1f} us (p90 {statistics.quantiles([r['us'] for r in big], n=10)[-1]:.1f}), "
          f"back-to-back loop {loop_us:.1f} us/call, tuned {tuned['us'] if tuned else '-'} us; "
          f"N=8 median {statistics.median(r['us'] for r in dense + prep):.1f} us; alerts: {len(alerts)}")


def test_graph_capture_pauses_sampling(lib, torch_cuda, seed):
    """Under capture the monitor records no event (the graph holds the kernel alone) and replays equal eager."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda_pool, monitor

    row = _layout(lib)
    v_first = row["state_layout"] == "v_first"
    x, kw = _inputs(torch, lib, 4, 1, 2, 2, v_first, seed + 510)
    pool0 = x["pool"].clone()
    out = torch.empty_like(x["v"])
    m = monitor.enable(sample_every=1)

    def step():
        fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], x["pool"], x["idx"], library=lib,
                                 out=out, **kw)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up off the capture path, sampled (on the side stream)
    torch.cuda.current_stream().wait_stream(side)
    x["pool"].copy_(pool0)
    step()
    torch.cuda.synchronize()
    o_eager, pool_eager = out.clone(), x["pool"].clone()
    graph = torch.cuda.CUDAGraph()
    x["pool"].copy_(pool0)
    with torch.cuda.graph(graph):
        step()
        step()
    assert m.paused == 2
    x["pool"].copy_(pool0)
    graph.replay()
    torch.cuda.synchronize()
    # two captured steps = two eager steps from pool0
    x2 = x["pool"].clone()
    x["pool"].copy_(pool0)
    step()
    step()
    torch.cuda.synchronize()
    assert torch.equal(x2, x["pool"]) and not torch.equal(pool_eager, pool0)
    recs = monitor.flush(wait=True)
    assert [r["record"] for r in recs if r["record"] != "summary"].count("paused") == 1
    assert len(_samples(recs)) == 4 and m.errors == 0  # warm-up, eager, and the two after the replay
    assert o_eager.isfinite().all()


def test_chunk_calls_are_recorded_without_baseline(chunk_lib, torch_cuda, seed):
    """chunk_kda goes through the monitor too; at a shape other than its row's tuned one (or on a row routed by rank)
    no sample is comparable, and the reason says which."""
    torch = torch_cuda
    from kda2.runtime import chunk_kda, monitor

    lib = chunk_lib
    v_first = "v_first" in lib.features.state_layouts
    x, kw = _inputs(torch, lib, 2, 200, 2, 2, v_first, seed + 520)
    m = monitor.enable(sample_every=2)
    for _ in range(5):
        chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["pool"], output_final_state=True,
                  library=lib, **kw)
    recs = _samples(monitor.flush(wait=True))
    idx = lib.select(v_first, 200, 2 * 2)  # N·HV chains
    assert len(recs) == 3 and m.errors == 0
    for r in recs:
        assert r["family"] == "chunk" and r["entry"] == "chunk_kda" and r["variant_index"] == idx
        assert r["comparable"] is False and 0 < r["us"] < 1e6
        assert "no tuned latency" in r["reason"] or "differs from the tuned shape" in r["reason"], r
    print(f"\n[{lib.spec}/{lib.arch}] chunk_kda N=2 T=200 H=2: monitor {[r['us'] for r in recs]} us")


# ---- overhead ------------------------------------------------------------------------------------------

def _unhooked(fn, module):
    """`fn` compiled again without its monitor hook (`if _MON: ... elif X:` -> `if X:`): the no-monitor
    baseline, identical code otherwise."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    removed = []

    class Strip(ast.NodeTransformer):
        def visit_If(self, node):
            self.generic_visit(node)
            if isinstance(node.test, ast.Name) and node.test.id == "_MON":
                removed.append(node)
                return node.orelse
            return node

    tree = ast.fix_missing_locations(Strip().visit(tree))
    assert len(removed) == 1 and "_MON" not in ast.unparse(tree), ast.unparse(tree)
    ns: dict = {}
    exec(compile(tree, f"<unhooked {fn.__qualname__}>", "exec", flags=__future__.annotations.compiler_flag,
                 dont_inherit=True), vars(module), ns)
    return ns[fn.__name__]


def test_monitor_overhead(lib, torch_cuda, seed, pytestconfig):
    """Median wall time per decode call: no hook at all (baseline), monitor off, on with sample_every=64
    and 1; for the general pool entry and the prepared one. Printed and written, not asserted."""
    torch = torch_cuda
    from kda2.runtime import api, monitor, prepare_pool, prepared

    row = _layout(lib)
    v_first = row["state_layout"] == "v_first"
    x, kw = _inputs(torch, lib, 4, 1, 4, 4, v_first, seed + 530)  # small: Python's time dominates the GPU's
    out = torch.empty_like(x["v"])
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"], x["pool"], x["idx"])
    step = prepare_pool(*args, library=lib, **kw)
    pool_kw = dict(kw, library=lib, out=out)
    base_pool = _unhooked(api.fused_recurrent_kda_pool, api)
    base_step = _unhooked(prepared.PreparedPool.__call__, prepared)
    entries = {
        "fused_recurrent_kda_pool": {"baseline": lambda: base_pool(*args, **pool_kw),
                                     "hooked": lambda: api.fused_recurrent_kda_pool(*args, **pool_kw)},
        "prepare_pool": {"baseline": lambda: base_step(step, *args, out=out),
                         "hooked": lambda: step(*args, out=out)},
    }
    monitors = {"off": None, "on_every64": monitor.Monitor(sample_every=64),
                "on_every1": monitor.Monitor(sample_every=1)}
    configs = ["baseline", "off", "on_every64", "on_every1"]
    block, rounds = 200, 40
    times: dict = {e: {c: [] for c in configs} for e in entries}
    for e, fns in entries.items():
        for c in configs:  # warm every path (fast-path cache, first sample, event creation)
            monitor._install(monitors.get(c))
            for _ in range(block):
                fns["baseline" if c == "baseline" else "hooked"]()
        monitor._install(None)
    torch.cuda.synchronize()
    for r in range(rounds):
        for e, fns in entries.items():
            for c in configs[r % 4:] + configs[:r % 4]:  # rotate the order: drift hits every config alike
                fn = fns["baseline" if c == "baseline" else "hooked"]
                monitor._install(monitors.get(c))
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                for _ in range(block):
                    fn()
                t1 = time.perf_counter_ns()
                times[e][c].append((t1 - t0) / block / 1e3)
    monitor._install(None)
    torch.cuda.synchronize()
    for mon in monitors.values():
        if mon is not None:
            mon.flush(wait=True)
            assert mon.errors == 0 and mon.paused == 0

    result = {"spec": lib.spec, "arch": lib.arch, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "shape": {"N": 4, "T": 1, "H": 4, "HV": 4, "K": lib.k, "V": lib.v}, "route": f"{row['state_layout']}:"
              f"{row['bucket']}", "kernel": row["variant"], "block_calls": block, "rounds": rounds,
              "statistic": "median over rounds of the mean wall time per call in a block (us)", "entries": {}}
    lines = [f"\nmonitor overhead [{lib.spec}/{lib.arch}, decode N=4 H=4, {rounds} x {block} calls per config]"]
    for e in entries:
        med = {c: statistics.median(times[e][c]) for c in configs}
        spread = {c: statistics.quantiles(times[e][c], n=4) for c in configs}
        result["entries"][e] = {c: {"median_us": round(med[c], 3), "q1_us": round(spread[c][0], 3),
                                    "q3_us": round(spread[c][2], 3),
                                    "delta_vs_baseline_us": round(med[c] - med["baseline"], 3)} for c in configs}
        lines.append(f"  {e:<25} " + "  ".join(f"{c} {med[c]:6.2f} us ({med[c] - med['baseline']:+.2f})"
                                                for c in configs))
    for name, mon in monitors.items():
        if mon is not None:
            result[f"{name}_samples"] = sum(s["count"] for s in mon.stats())
    print("\n".join(lines))
    out_dir = pytestconfig.getoption("results_dir")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "monitor_overhead.json"
        try:  # one file for the session: a run per library, replaced by spec and arch
            data = json.loads(path.read_text())
            runs = [r for r in data["runs"] if (r["spec"], r["arch"]) != (lib.spec, lib.arch)]
        except (OSError, ValueError, KeyError, TypeError):
            runs = []
        path.write_text(json.dumps({"kind": "kda2-monitor-overhead", "schema": 1, "runs": runs + [result]},
                                   indent=1) + "\n")
        print(f"monitor overhead -> {path}")
    for e in entries:  # correctness only: every configuration ran every call
        assert all(len(times[e][c]) == rounds and all(t > 0 for t in times[e][c]) for c in configs)
