"""kda2.runtime.monitor without a GPU or torch: fake CUDA events and fake libraries drive the real monitor.

The fake backend keeps a clock that each fake launch advances by the latency the test chose, so every
resolved sample has a known value; its events complete only when the test says so, which shows that the
hot path never waits (their synchronize() fails unless a test allows it). The hooked launch sites of the
torch entries (api's fast paths, PreparedPool.__call__) run on duck-typed tensors with torch stubbed out.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from kda2.runtime import abi, api, chunk, monitor, prepared  # noqa: E402
from kda2.runtime.errors import KDA2LaunchError  # noqa: E402

TUNED_SHAPE = {"N": 256, "T": 1, "H": 32}


# --- fakes ----------------------------------------------------------------------------------------------

class FakeEvent:
    def __init__(self, backend: "FakeBackend") -> None:
        self.b = backend
        self.t: float | None = None
        self.seq = -1

    def record(self, stream) -> None:
        assert stream == ("stream", 0)
        self.t = self.b.clock_us
        self.b.seq += 1
        self.seq = self.b.seq

    def query(self) -> bool:
        self.b.queries += 1
        if self.b.fail_query:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.b.done

    def synchronize(self) -> None:
        if not self.b.allow_sync:
            raise AssertionError("the monitor synchronised outside flush(wait=True)")
        self.b.syncs += 1

    def elapsed_time(self, end: "FakeEvent") -> float:
        return (end.t - self.t) / 1000.0  # ms, as torch.cuda.Event


class FakeBackend:
    def __init__(self, gpu: str = "NVIDIA H200") -> None:
        self.clock_us = 0.0
        self.seq = 0
        self.done = True
        self.capture = False
        self.allow_sync = False
        self.fail_query = False
        self.created = self.queries = self.syncs = 0
        self.gpu = gpu

    def new_event(self) -> FakeEvent:
        self.created += 1
        return FakeEvent(self)

    def stream(self, dev: int, raw=None):
        assert raw == 0x5EED  # the raw handle the launch used
        return ("stream", dev)

    def capturing(self) -> bool:
        return self.capture

    def device_name(self, dev: int) -> str:
        return self.gpu



#: A subprocess's first lines: any import of torch fails (the runtime and its monitor must not need it).
BLOCK_TORCH = textwrap.dedent("""
    import sys
    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "torch":
                raise ImportError("blocked import of " + name)
    sys.meta_path.insert(0, Blocker())
""")


def _row(layout: str, bucket: int, index: int, us: float | None = None, shape: dict | None = None,
         gpu: str = "NVIDIA H200", klass: str = "all", min_chains: int = 0) -> dict:
    vid = f"var{layout[0]}{bucket}" + ("" if klass == "all" else klass)
    row = {"state_layout": layout, "bucket": bucket, "class": klass, "min_chains": min_chains, "variant": vid,
           "index": index, "routed_by": "tune" if us is not None else "rank", "candidates": [vid]}
    if us is not None:
        row["tuned"] = {"us": us, "gpu": gpu, "date": "2026-11-29T14:41:45+00:00", "shape": shape or TUNED_SHAPE}
    return row


class FakeLib:
    """The part of kda2.runtime.library.Library the monitor and the launch sites use."""

    def __init__(self, backend: FakeBackend, dispatch: list[dict], family: str = "recurrent",
                 spec: str = "fake_spec", arch: str = "sm_90a") -> None:
        self.spec, self.arch, self.family, self.dispatch = spec, arch, family, dispatch
        self.backend = backend
        self.latency_us = 10.0
        self.rc = 0
        self.launches: list[tuple] = []
        self._args = abi.KDA2RecurrentArgs()

    def route(self, state_v_first: bool, max_seqlen: int, chains: int) -> dict | None:
        """A stand-in for kda2_route over `dispatch` (the real one is tested in test_render.py)."""
        rows = [d for d in self.dispatch if d["state_layout"] == ("v_first" if state_v_first else "k_first")]
        fit = [d for d in rows if max_seqlen <= d["bucket"]] or (rows if self.family == "chunk" else [])
        if not fit:
            return None
        bucket = min(d["bucket"] for d in fit) if any(max_seqlen <= d["bucket"] for d in rows) else \
            max(d["bucket"] for d in rows)
        return max((d for d in rows if d["bucket"] == bucket and d["min_chains"] <= chains),
                   key=lambda d: d["min_chains"])

    def _fwd(self, addr: int, max_seqlen: int, stream) -> int:
        self.launches.append((addr, max_seqlen, stream))
        if not self.rc:
            self.backend.clock_us += self.latency_us
        return self.rc

    def args(self) -> abi.KDA2RecurrentArgs:
        return self._args

    def error(self, rc: int) -> KDA2LaunchError:
        return KDA2LaunchError(f"fake: rc {rc}", rc)


def recurrent_dispatch(tuned_us: float | None = 100.0, shape: dict | None = None) -> list[dict]:
    return [_row("k_first", 1, 0, tuned_us, shape), _row("k_first", 64, 1, 300.0, {"N": 8, "T": 64, "H": 32}),
            _row("v_first", 1, 2), _row("v_first", 64, 3)]


def make_args(N=256, T=1, H=32, HV=32, v_first=0) -> abi.KDA2RecurrentArgs:
    a = abi.KDA2RecurrentArgs()
    a.N, a.T, a.H, a.HV, a.state_v_first = N, T, H, HV, v_first
    return a


@pytest.fixture
def env(monkeypatch):
    """A fake backend and library; the monitor is off before and after each test."""
    monitor.disable(flush=False)
    monkeypatch.setattr(api, "_multi_gpu", False)
    monkeypatch.setattr(api, "_raw_stream", lambda idx: 0x5EED)  # api._relaunch's stream (bound by torch's init)
    b = FakeBackend()
    yield b, FakeLib(b, recurrent_dispatch())
    monitor.disable(flush=False)


def call(m, lib, args, n=1, longest=None, entry="fused_recurrent_kda"):
    for _ in range(n):
        m.launch(entry, lib, args, 0, args.T if longest is None else longest, 0x5EED)


def samples(records):
    return [r for r in records if r["record"] == "sample"]


# --- sampling, stats, lazy resolution ---------------------------------------------------------------

def test_samples_one_of_every_n_per_dispatch_row(env):
    b, lib = env
    m = monitor.enable(sample_every=4, backend=b)
    call(m, lib, make_args(), n=10)                       # k_first:1  -> calls 1, 5, 9 sampled
    call(m, lib, make_args(T=30), n=3)                    # k_first:64 -> call 1
    call(m, lib, make_args(T=64), n=2)                    # same row (T=64 <= 64) -> none more
    call(m, lib, make_args(v_first=1), n=5)               # v_first:1  -> calls 1, 5
    call(m, lib, make_args(T=2000), n=2)                  # past the last bucket: no row (the .so refuses it)
    assert len(lib.launches) == 22 and all(s == 0x5EED for _, _, s in lib.launches)  # every call launched
    by = {(s["state_layout"], s["bucket"]): s for s in m.stats()}
    assert {k: (s["calls"], s["sampled"]) for k, s in by.items()} == {
        ("k_first", 1): (10, 3), ("k_first", 64): (5, 2), ("v_first", 1): (5, 2)}
    assert by[("k_first", 1)]["kernel"] == "vark1" and by[("v_first", 1)]["variant_index"] == 2
    assert b.created == 2  # one event pair, re-recorded: each sample resolved before the next was taken


def test_chunk_family_routes_long_sequences_to_the_last_row(env):
    b, _ = env
    lib = FakeLib(b, [_row("k_first", 2048, 0), _row("k_first", 8192, 0)], family="chunk")
    m = monitor.enable(sample_every=1, backend=b)
    call(m, lib, make_args(T=100_000), entry="chunk_kda")
    (s,) = m.stats()
    assert (s["bucket"], s["family"], s["sampled"]) == (8192, "chunk", 1)


def test_each_batch_class_is_its_own_key(env):
    """One bucket, two batch classes: calls of few and of many chains are kept apart (their own kernels)."""
    b, _ = env
    lib = FakeLib(b, [_row("k_first", 2048, 0, klass="few"), _row("k_first", 2048, 1, klass="many", min_chains=64)],
                  family="chunk")
    m = monitor.enable(sample_every=1, backend=b)
    for N in (1, 1, 4):  # 32, 32 and 128 chains at HV = 32
        call(m, lib, make_args(N=N, T=2048), entry="chunk_kda")
    got = {(s["class"], s["kernel"]): s["sampled"] for s in m.stats()}
    assert got == {("few", "vark2048few"): 2, ("many", "vark2048many"): 1}


def test_stats_median_p90_over_a_bounded_window(env):
    b, lib = env
    m = monitor.enable(sample_every=1, backend=b, window=50)
    args = make_args(N=8)
    for us in range(1, 101):  # 1..100 us
        lib.latency_us = float(us)
        call(m, lib, args)
    recs = m.flush()
    got = [r["us"] for r in samples(recs)]
    assert got == [float(u) for u in range(1, 101)]
    (s,) = m.stats()
    assert s["count"] == 100 and s["sampled"] == 100 and s["pending"] == 0
    assert s["median_us"] == pytest.approx(75.5) and s["p90_us"] == pytest.approx(95.1)  # last 50: 51..100
    assert s["mean_us"] == pytest.approx(50.5) and (s["min_us"], s["max_us"]) == (1.0, 100.0)
    assert monitor.quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5 and math.isnan(monitor.quantile([], 0.9))


def test_resolution_is_lazy_and_never_waits_on_the_hot_path(env):
    b, lib = env
    m = monitor.enable(sample_every=1, backend=b)
    b.done = False  # the GPU has not reached any event yet
    call(m, lib, make_args(), n=5)
    assert m.flush() and m.stats()[0]["count"] == 0 and m.stats()[0]["pending"] == 5 and b.syncs == 0
    b.done = True
    call(m, lib, make_args())  # a later sampled call polls: the five earlier samples resolve now
    assert m.stats()[0]["count"] == 5 and m.stats()[0]["pending"] == 1
    b.done, b.allow_sync = False, True
    m.flush(wait=True)  # the explicit wait synchronises on what is left
    assert m.stats()[0]["count"] == 6 and b.syncs == 1


def test_backlog_and_lost_samples_are_counted_not_raised(env):
    b, lib = env
    m = monitor.enable(sample_every=1, backend=b, max_pending=3)
    b.done = False
    call(m, lib, make_args(), n=5)
    assert m.skipped == 2 and m.stats()[0]["sampled"] == 3 and len(lib.launches) == 5
    b.fail_query = True
    call(m, lib, make_args())  # the poll meets a broken event: the samples are dropped, the call goes on
    assert m.errors == 3 and len(lib.launches) == 6
    assert "kda2_monitor_errors_total 3" in m.prometheus_text()


def test_launch_errors_propagate_and_release_the_events(env):
    b, lib = env
    m = monitor.enable(sample_every=1, backend=b)
    lib.rc = 700
    with pytest.raises(KDA2LaunchError, match="rc 700"):
        call(m, lib, make_args())
    assert len(lib.launches) == 2  # kda2_fwd, then api._relaunch's retry, which raises
    assert m.stats()[0]["sampled"] == 0 and len(m._free) == 1 and not m._pending


# --- regression alert ---------------------------------------------------------------------------------

def test_alert_once_per_key_against_the_tuned_latency(env, caplog):
    b, lib = env  # k_first:1 tuned at 100 us for N=256 T=1 H=32
    m = monitor.enable(sample_every=1, backend=b, alert_ratio=1.5, min_samples=5)
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    lib.latency_us = 140.0  # 1.4x: within the ratio
    call(m, lib, make_args(), n=10)
    m.flush()
    assert m.regressions == 0 and not caplog.records
    lib.latency_us = 400.0  # 4x: the median of the window crosses 1.5x once more than half are slow
    call(m, lib, make_args(), n=30)
    recs = m.flush()
    alerts = [r for r in recs if r["record"] == "alert"]
    warnings = [r for r in caplog.records if r.name == "kda2.monitor"]
    assert m.regressions == 1 and len(alerts) == 1 and len(warnings) == 1
    assert "vark1" in warnings[0].getMessage() and "tuned 100.0 us" in warnings[0].getMessage()
    a = alerts[0]
    assert a["kernel"] == "vark1" and a["bucket"] == 1 and a["median_us"] > 150 and a["tuned_us"] == 100.0
    assert a["ratio"] == pytest.approx(a["median_us"] / 100.0, rel=1e-3)
    call(m, lib, make_args(), n=50)
    m.flush()
    assert m.regressions == 1 and len([r for r in caplog.records if r.name == "kda2.monitor"]) == 1
    (s,) = [s for s in m.stats() if s["bucket"] == 1]
    assert s["regressed"] and s["comparable"] == 90
    assert 'kda2_regressions_total{spec="fake_spec",arch="sm_90a",kernel="vark1",bucket="1",class="all"} 1' in m.prometheus_text()


def test_other_shapes_are_recorded_but_never_alert(env, caplog):
    b, lib = env
    m = monitor.enable(sample_every=1, backend=b, min_samples=3)
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    lib.latency_us = 10_000.0  # 100x the tuned latency, but at another batch size
    call(m, lib, make_args(N=8), n=20)
    call(m, lib, make_args(T=30, N=8), n=5)    # k_first:64 is tuned at N=8 T=64: T=30 differs too
    call(m, lib, make_args(v_first=1), n=5)    # v_first:1 routed by rank: no baseline
    recs = m.flush()
    assert m.regressions == 0 and not [r for r in recs if r["record"] == "alert"] and not caplog.records
    by = {}
    for r in samples(recs):
        assert r["comparable"] is False and r["reason"]
        by.setdefault((r["state_layout"], r["bucket"]), r["reason"])
    assert by[("k_first", 1)] == ("shape N=8 T=1 H=32 differs from the tuned shape N=256 T=1 H=32: "
                                  "latency not comparable")
    assert "N=8 T=30 H=32" in by[("k_first", 64)] and "N=8 T=64 H=32" in by[("k_first", 64)]
    assert "no tuned latency (routed_by=rank)" in by[("v_first", 1)]


def test_another_gpu_is_not_comparable(env):
    b, lib = env
    b.gpu = "NVIDIA H100 80GB HBM3"
    m = monitor.enable(sample_every=1, backend=b, min_samples=1)
    lib.latency_us = 1000.0
    call(m, lib, make_args(), n=3)
    recs = samples(m.flush())
    assert m.regressions == 0 and all("differs from the tuned GPU 'NVIDIA H200'" in r["reason"] for r in recs)


# --- output formats -----------------------------------------------------------------------------------

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_prometheus(text: str) -> tuple[dict, list]:
    """A strict reader of the text exposition format: (types, [(name, labels, value)])."""
    assert text.endswith("\n")
    types, out, seen_help = {}, [], set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in seen_help, f"second HELP for {name}"
            seen_help.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "summary", "histogram", "untyped") and name not in types
            types[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            name, labels = m.group(1), {}
            body = m.group(3) or ""
            pos = 0
            while pos < len(body):
                lm = _LABEL.match(body, pos)
                assert lm, f"bad labels in {line!r}"
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
            value = float(m.group(4))  # NaN / +Inf parse too
            family = re.sub(r"_(sum|count)$", "", name) if name not in types else name
            assert family in types, f"{name}: sample before its TYPE line"
            out.append((name, labels, value))
    return types, out


def test_jsonl_and_prometheus_files(env, tmp_path):
    b, lib = env
    jl, prom = tmp_path / "out" / "kda2.jsonl", tmp_path / "prom" / "kda2.prom"
    jl.parent.mkdir()
    prom.parent.mkdir()  # the monitor creates no directories
    m = monitor.enable(sample_every=2, jsonl=jl, prometheus=prom, backend=b, min_samples=2)
    lib.latency_us = 250.0
    call(m, lib, make_args(), n=8)                         # tuned route, tuned shape: alerts (2.5x)
    lib.latency_us = 10.0
    call(m, lib, make_args(v_first=1), n=3, entry="prepare_pool")
    b.capture = True
    call(m, lib, make_args(N=4), n=1)                      # k_first:1's 9th call, sampled while capturing: paused
    b.capture = False
    returned = monitor.flush()
    lines = jl.read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert recs == json.loads(json.dumps(returned, default=str))
    kinds = [r["record"] for r in recs]
    assert kinds.count("sample") == 4 + 2 and kinds.count("alert") == 1 and kinds.count("paused") == 1
    assert kinds.count("summary") == 2 and kinds[-2:] == ["summary", "summary"]
    s = next(r for r in recs if r["record"] == "sample")
    assert set(s) >= {"time", "spec", "arch", "family", "kernel", "variant_index", "state_layout", "bucket",
                      "routed_by", "entry", "device", "shape", "us", "tuned_us", "tuned_shape", "comparable", "reason"}
    assert s["shape"] == {"N": 256, "T": 1, "H": 32, "HV": 32} and s["us"] == 250.0 and s["comparable"] is True
    assert s["tuned_shape"] == TUNED_SHAPE and s["reason"] is None and s["entry"] == "fused_recurrent_kda"
    summ = {(r["state_layout"], r["bucket"]): r for r in recs if r["record"] == "summary"}
    assert summ[("k_first", 1)]["median_us"] == 250.0 and summ[("k_first", 1)]["ratio"] == 2.5
    assert summ[("k_first", 1)]["sampled"] == 4 and summ[("k_first", 1)]["calls"] == 9  # the paused one is not timed

    types, rows = parse_prometheus(prom.read_text())
    assert not list(prom.parent.glob(".*tmp")), "the Prometheus file is written through a temporary name"
    assert types["kda2_call_latency_us"] == "summary"
    for name in ("kda2_calls_sampled_total", "kda2_regressions_total", "kda2_calls_total",
                 "kda2_monitor_paused_total"):
        assert types[name] == "counter"
    lat = {(r[1]["kernel"], r[1]["bucket"], r[1]["quantile"]): r[2] for r in rows if r[0] == "kda2_call_latency_us"}
    assert lat == {("vark1", "1", "0.5"): 250.0, ("vark1", "1", "0.9"): 250.0,
                   ("varv1", "1", "0.5"): 10.0, ("varv1", "1", "0.9"): 10.0}
    for name, labels, _ in rows:
        if name.startswith("kda2_call_latency_us"):
            assert set(labels) == {"spec", "arch", "kernel", "bucket", "class"} | ({"quantile"} if name ==
                                                                           "kda2_call_latency_us" else set())
    val = {(r[0], r[1].get("kernel")): r[2] for r in rows if r[0] != "kda2_call_latency_us"}
    assert val[("kda2_call_latency_us_count", "vark1")] == 4 and val[("kda2_call_latency_us_sum", "vark1")] == 1000
    assert val[("kda2_calls_sampled_total", "vark1")] == 4 and val[("kda2_calls_total", "vark1")] == 9
    assert val[("kda2_regressions_total", "vark1")] == 1 and val[("kda2_regressions_total", "varv1")] == 0
    assert val[("kda2_tuned_latency_us", "vark1")] == 100.0 and val[("kda2_monitor_paused_total", None)] == 1
    assert monitor.prometheus_text() == prom.read_text()

    monitor.flush()  # appends: the next flush adds its own records (here: only the summaries)
    assert len(jl.read_text().splitlines()) == len(lines) + 2


def test_prometheus_label_values_are_escaped(env):
    b, _ = env
    lib = FakeLib(b, recurrent_dispatch(), spec='we"ird\\spec\nx')
    m = monitor.enable(sample_every=1, backend=b)
    call(m, lib, make_args())
    m.flush()
    _, rows = parse_prometheus(m.prometheus_text())
    assert rows[0][1]["spec"] == 'we\\"ird\\\\spec\\nx'


# --- CUDA graph capture -----------------------------------------------------------------------------

def test_paused_during_graph_capture(env, caplog):
    b, lib = env
    m = monitor.enable(sample_every=2, backend=b)
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    b.capture = True
    call(m, lib, make_args(), n=6)
    assert len(lib.launches) == 6 and b.created == 0 and b.queries == 0  # no event recorded or queried
    assert m.paused == 3 and m.stats()[0]["sampled"] == 0
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 1 and msgs[0].startswith("monitor: paused during CUDA graph capture")
    assert m.flush()[0]["record"] == "paused" and b.queries == 0  # nor at a flush during the capture
    b.capture = False
    call(m, lib, make_args(), n=6)
    assert m.stats()[0]["sampled"] == 3 and len(caplog.records) == 1


# --- the switch: enable / disable / environment ------------------------------------------------------

def test_enable_validates_and_installs_into_every_launch_site(env):
    b, _ = env
    for bad in (dict(sample_every=0), dict(sample_every=1.5), dict(alert_ratio=0), dict(alert_ratio=math.inf),
                dict(min_samples=0)):
        with pytest.raises(ValueError, match="monitor"):
            monitor.enable(backend=b, **bad)
        assert not monitor.enabled() and api._MON is None
    m = monitor.enable(sample_every=3, backend=b)
    assert monitor.active() is m and api._MON is m and chunk._MON is m and prepared._MON is m
    m2 = monitor.enable(sample_every=5, backend=b)  # reconfigure: replaces
    assert api._MON is m2 and chunk._MON is m2 and prepared._MON is m2
    assert monitor.disable() is m2
    assert api._MON is None and chunk._MON is None and prepared._MON is None and not monitor.enabled()
    assert monitor.flush() == [] and monitor.prometheus_text() == "" and monitor.stats() == []


def test_environment_switch(env, caplog, tmp_path):
    assert monitor._from_env({}) is None and monitor._from_env({"KDA2_MONITOR": "0"}) is None
    assert not monitor.enabled()
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    assert monitor._from_env({"KDA2_MONITOR": "maybe"}) is None and "not understood" in caplog.text
    assert monitor._from_env({"KDA2_MONITOR": "1", "KDA2_MONITOR_SAMPLE_EVERY": "0"}) is None
    assert not monitor.enabled()
    m = monitor._from_env({"KDA2_MONITOR": "1", "KDA2_MONITOR_SAMPLE_EVERY": "8", "KDA2_MONITOR_ALERT_RATIO": "2",
                           "KDA2_MONITOR_JSONL": str(tmp_path / "x.jsonl")})
    assert monitor.active() is m and (m.sample_every, m.alert_ratio, m.jsonl) == (8, 2.0, tmp_path / "x.jsonl")


def test_environment_is_read_at_import_without_torch(tmp_path):
    """KDA2_MONITOR=1 turns the monitor on when kda2.runtime is imported (torch stays unimported), and the
    JSONL file is written at exit."""
    code = BLOCK_TORCH + textwrap.dedent("""
        import kda2.runtime as rt
        from kda2.runtime import api, chunk, prepared
        m = rt.monitor.active()
        assert m is not None and m.sample_every == 16 and api._MON is m and chunk._MON is m and prepared._MON is m
        assert "torch" not in sys.modules
        print("MONITOR-ON")
    """)
    jl = tmp_path / "k.jsonl"
    e = dict(os.environ, PYTHONPATH=str(SRC), KDA2_MONITOR="1", KDA2_MONITOR_SAMPLE_EVERY="16",
             KDA2_MONITOR_JSONL=str(jl))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    assert res.returncode == 0 and "MONITOR-ON" in res.stdout, res.stdout + res.stderr
    assert jl.read_text() == ""  # the at-exit flush ran (nothing was sampled)
    e.pop("KDA2_MONITOR")
    res = subprocess.run([sys.executable, "-c", "import kda2.runtime as rt, kda2.runtime.api as a;"
                          "assert rt.monitor.active() is None and a._MON is None; print('OFF')"],
                         capture_output=True, text=True, env=e, timeout=120)
    assert res.returncode == 0 and "OFF" in res.stdout, res.stdout + res.stderr


# --- the hooked launch sites, with the monitor off and on ------------------------------------------------

class _Dtype:
    def __init__(self, name):
        self.name = name


BF16, F32, I32 = _Dtype("bf16"), _Dtype("f32"), _Dtype("i32")


class FakeTensor:
    _next = 0x10000

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype
        FakeTensor._next += 0x1000
        self._ptr = FakeTensor._next

    def get_device(self):
        return 0

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return self._ptr


class _AlwaysHit(dict):
    """api._fast stand-in: every signature is a cached verdict (the fast paths, without torch validation)."""

    def __init__(self, dense, pool):
        super().__init__()
        self.dense, self.pool = dense, pool

    def get(self, key, default=None):
        return self.dense if key[0] == 0 else self.pool


class _FakeTorchC:
    @staticmethod
    def _cuda_getCurrentRawStream(idx):
        return 0x5EED


class _FakeTorch:
    _C = _FakeTorchC()

    @staticmethod
    def is_grad_enabled():  # a serving loop's inference mode
        return False


def _decode_tensors(N=4, H=32, HV=32, K=128, V=128):
    return dict(q=FakeTensor((N, 1, H, K), BF16), k=FakeTensor((N, 1, H, K), BF16),
                v=FakeTensor((N, 1, HV, V), BF16), g=FakeTensor((N, 1, HV, K), F32),
                beta=FakeTensor((N, 1, HV), F32))


@pytest.fixture
def sites(env, monkeypatch):
    """The real launch sites of api (dense and pool fast paths) and PreparedPool, on fake tensors."""
    b, lib = env
    N, H, HV = 4, 32, 32
    monkeypatch.setattr(api, "_torch", _FakeTorch())
    monkeypatch.setattr(api, "_raw_stream", _FakeTorchC._cuda_getCurrentRawStream)
    monkeypatch.setattr(api, "_I32", I32)
    # (dev_index, N, T, H, HV, mode, flags, scale, lb, longest, [sshape,] v_first[, state dtype]): api._remember's
    # verdicts (dense form, then pool form)
    monkeypatch.setattr(api, "_fast", _AlwaysHit((0, N, 1, H, HV, 0, 0, 0.1, 0.0, 1, (N, HV, 128, 128), 0, F32),
                                                 (0, N, 1, H, HV, 0, 0, 0.1, 0.0, 1, 0)))
    monkeypatch.setattr(prepared, "_init_torch", lambda: _FakeTorch())
    x = _decode_tensors(N, H, HV)
    pool, idx, out = FakeTensor((8, HV, 128, 128), F32), FakeTensor((N,), I32), FakeTensor(x["v"].shape, BF16)
    sig = tuple((t.shape, t.dtype) for t in (*x.values(), pool, idx))
    step = prepared.PreparedPool(lib, 0, sig, (N, 1, H, HV, 0.1, 0.0, 0, 0, 0, 1), 0, 0, keep=())

    def run():
        o, ht = api.fused_recurrent_kda(*x.values(), library=lib, out=out)
        assert o is out and ht is None
        assert api.fused_recurrent_kda_pool(*x.values(), pool, idx, library=lib, out=out) is out
        assert step(*x.values(), pool, idx, out=out) is out

    return b, lib, run


def test_disabled_launch_sites_never_call_into_the_monitor(sites, monkeypatch):
    b, lib, run = sites

    def sentinel(*a, **k):
        raise AssertionError("the monitor was called while disabled")

    for name in ("launch", "_sample", "_route", "_poll", "_resolve", "_record"):
        monkeypatch.setattr(monitor.Monitor, name, sentinel)
    assert api._MON is None and chunk._MON is None and prepared._MON is None
    mon_file = os.path.realpath(monitor.__file__)
    entered = []

    def profile(frame, event, arg):
        if event == "call" and os.path.realpath(frame.f_code.co_filename) == mon_file:
            entered.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        for _ in range(3):
            run()
    finally:
        sys.setprofile(None)
    assert entered == [] and len(lib.launches) == 9 and b.created == 0


def test_enabled_launch_sites_go_through_the_monitor(sites):
    b, lib, run = sites
    m = monitor.enable(sample_every=1, backend=b)
    lib.latency_us = 7.0
    for _ in range(2):
        run()
    recs = samples(m.flush())
    assert len(lib.launches) == 6 and [r["entry"] for r in recs] == \
        ["fused_recurrent_kda", "fused_recurrent_kda_pool", "prepare_pool"] * 2
    assert all(r["us"] == 7.0 and r["shape"] == {"N": 4, "T": 1, "H": 32, "HV": 32} for r in recs)
    assert all(s == 0x5EED for _, _, s in lib.launches)
    monitor.disable()
    run()
    assert len(lib.launches) == 9 and m.stats()[0]["calls"] == 6  # off again: not counted


def test_every_launch_site_is_hooked():
    """Each entry's primary kda2_fwd call sits in the else-branch of an `if _MON:` test (a new launch site
    that bypasses the monitor fails here)."""
    import ast
    import inspect

    for mod in (api, chunk, prepared):
        tree = ast.parse(inspect.getsource(mod))
        hooked = unhooked = 0
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "_MON":
                hooked += 1
                assert "_MON.launch(" in ast.unparse(node.body[0])
                continue
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name not in ("_relaunch", "launch_raw"):
                src = ast.unparse(fn)
                fwd = src.count("._fwd(")
                hooks = src.count("_MON.launch(")
                unhooked += max(0, fwd - hooks)
        assert hooked >= 1 and unhooked == 0, f"{mod.__name__}: {unhooked} launch site(s) without the monitor hook"


# --- output paths: checked at enable, never a directory created; a failed write keeps its records ----------

def _monitor_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kda2.monitor" and r.levelno >= logging.WARNING]


def test_output_paths_are_checked_at_enable_and_no_directory_is_created(env, tmp_path):
    b, _ = env
    missing = tmp_path / "no" / "dir"
    (tmp_path / "file").write_text("")
    cases = [
        (dict(jsonl=missing / "k.jsonl"), "enable(jsonl=...)", f"its directory '{missing}' does not exist"),
        (dict(prometheus=missing / "k.prom"), "enable(prometheus=...)", "does not exist"),
        (dict(jsonl=tmp_path), "enable(jsonl=...)", "is a directory"),
        (dict(prometheus=tmp_path), "enable(prometheus=...)", "is a directory"),
        (dict(jsonl=tmp_path / "file" / "k.jsonl"), "enable(jsonl=...)", "is not a directory"),
    ]
    if os.path.isdir("/proc"):  # os.access says writable (and root may write anywhere else): only a file says no
        cases.append((dict(jsonl="/proc/kda2-monitor-test.jsonl"), "enable(jsonl=...)", "cannot create a file in '/proc'"))
    if os.path.exists("/dev/null"):  # replaced whole at each flush: never a device
        cases.append((dict(prometheus="/dev/null"), "enable(prometheus=...)", "not a regular file"))
    for kw, setting, problem in cases:
        with pytest.raises(ValueError) as ei:
            monitor.enable(backend=b, **kw)
        msg = str(ei.value)
        assert setting in msg and problem in msg and "allowed:" in msg, msg
        assert not monitor.enabled() and api._MON is None
    assert not (tmp_path / "no").exists()
    # a good pair: nothing is left behind by the check (the JSONL file appears at the first flush)
    m = monitor.enable(backend=b, jsonl=tmp_path / "k.jsonl", prometheus=tmp_path / "k.prom")
    assert monitor.active() is m and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_environment_output_path_is_named_and_leaves_the_monitor_off(env, caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    jl = tmp_path / "no" / "dir" / "k.jsonl"
    assert monitor._from_env({"KDA2_MONITOR": "1", "KDA2_MONITOR_JSONL": str(jl)}) is None
    assert monitor._from_env({"KDA2_MONITOR": "1", "KDA2_MONITOR_PROMETHEUS": str(tmp_path)}) is None
    assert not monitor.enabled() and not (tmp_path / "no").exists()
    w = _monitor_warnings(caplog)
    assert len(w) == 2 and all("the monitor stays off" in x for x in w), w
    assert "KDA2_MONITOR_JSONL" in w[0] and "does not exist" in w[0] and "enable(" not in w[0]
    assert "KDA2_MONITOR_PROMETHEUS" in w[1] and "is a directory" in w[1]


@pytest.mark.parametrize("name, value, allowed", [
    ("KDA2_MONITOR_SAMPLE_EVERY", "abc", "an integer >= 1"), ("KDA2_MONITOR_SAMPLE_EVERY", "0", "an integer >= 1"),
    ("KDA2_MONITOR_SAMPLE_EVERY", "2.5", "an integer >= 1"), ("KDA2_MONITOR_ALERT_RATIO", "fast", "a finite number > 0"),
    ("KDA2_MONITOR_ALERT_RATIO", "inf", "a finite number > 0")])
def test_environment_numbers_name_the_variable(env, caplog, name, value, allowed):
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    assert monitor._from_env({"KDA2_MONITOR": "1", name: value}) is None and not monitor.enabled()
    (w,) = _monitor_warnings(caplog)
    assert f"{name}: got {value!r}; allowed: {allowed}" in w and "stays off" in w, w
    assert "invalid literal" not in w and "could not convert" not in w


def test_failed_jsonl_write_keeps_the_records_for_the_next_flush(env, caplog, tmp_path):
    import shutil

    b, lib = env
    d = tmp_path / "logs"
    d.mkdir()
    jl = d / "k.jsonl"
    m = monitor.enable(sample_every=1, jsonl=jl, backend=b)
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    lib.latency_us = 1.0
    call(m, lib, make_args(), n=3)
    shutil.rmtree(d)  # gone after enable: the write fails
    assert m.flush() == [] and m.write_errors == 1 and not d.exists()  # no directory created at flush either
    (w,) = _monitor_warnings(caplog)
    assert f"cannot append to the JSONL file {jl}" in w and "FileNotFoundError" in w, w
    assert "3 record(s) kept for the next flush" in w, w
    lib.latency_us = 2.0
    call(m, lib, make_args(), n=2)
    d.mkdir()
    recs = m.flush()
    assert [r["us"] for r in samples(recs)] == [1.0, 1.0, 1.0, 2.0, 2.0]  # nothing lost, oldest first
    assert [json.loads(x)["us"] for x in jl.read_text().splitlines() if '"sample"' in x] == [1.0, 1.0, 1.0, 2.0, 2.0]
    assert m.records_dropped == 0 and len(_monitor_warnings(caplog)) == 1


def test_failed_write_requeues_within_max_records(env, caplog, tmp_path, monkeypatch):
    """Records that arrive while a failing write is under way are newer: they stay, and the oldest of the
    failed batch give way, counted, when the queue's limit is reached."""
    b, lib = env
    m = monitor.enable(sample_every=1, jsonl=tmp_path / "k.jsonl", backend=b, max_records=5)
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    for us in (1.0, 2.0, 3.0, 4.0):
        lib.latency_us = us
        call(m, lib, make_args())

    def full_disk(*a, **k):
        for i in range(3):
            m._record({"record": "alert", "n": i})
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(monitor, "open", full_disk, raising=False)
    assert m.flush() == [] and m.records_dropped == 2
    (w,) = _monitor_warnings(caplog)
    assert "OSError: No space left on device" in w and "2 record(s) kept" in w and "2 oldest dropped" in w, w
    monkeypatch.delattr(monitor, "open")
    recs = [r for r in m.flush() if r["record"] != "summary"]
    assert [r.get("us") for r in recs] == [3.0, 4.0, None, None, None] and [r.get("n") for r in recs[2:]] == [0, 1, 2]


def test_failed_prometheus_write_is_one_line_and_leaves_no_temporary(env, caplog, tmp_path):
    b, lib = env
    d = tmp_path / "prom"
    d.mkdir()
    m = monitor.enable(sample_every=1, prometheus=d / "k.prom", backend=b)
    call(m, lib, make_args())
    caplog.set_level(logging.WARNING, logger="kda2.monitor")
    (d / "k.prom").mkdir()  # the file's name taken by a directory since
    assert samples(m.flush()) and m.write_errors == 1
    (w,) = _monitor_warnings(caplog)
    assert f"cannot write the Prometheus file {d / 'k.prom'}" in w, w
    assert [p.name for p in d.iterdir()] == ["k.prom"]


def test_import_kda2_monitor_is_the_runtime_monitor(tmp_path):
    """`import kda2.monitor` works (torch blocked) and is the very module `kda2.monitor` names as an attribute."""
    code = BLOCK_TORCH + textwrap.dedent("""
        import kda2.monitor
        from kda2.monitor import enable, disable
        import kda2, kda2.runtime.monitor as rm
        assert kda2.monitor is rm and sys.modules["kda2.monitor"] is rm and enable is rm.enable
        m = kda2.monitor.enable(sample_every=3)
        assert rm.active() is m and disable() is m
        assert "torch" not in sys.modules
        print("IMPORT-OK")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(SRC)), cwd=tmp_path)
    assert res.returncode == 0 and "IMPORT-OK" in res.stdout, res.stdout + res.stderr
