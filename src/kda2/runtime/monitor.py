"""Opt-in runtime monitor: sampled launch latencies per dispatch route, regression alerts, JSONL and Prometheus.

Off by default, and then free: each launch site of the torch entries (`fused_recurrent_kda`,
`fused_recurrent_kda_pool`, `PreparedPool.__call__`, `chunk_kda`) reads one module global, `_MON`, which is
None unless a monitor is on (`if _MON: <monitored launch> elif <the usual launch>`): no function call, no
attribute lookup beyond that one check.

Turning it on::

    from kda2.runtime import monitor
    monitor.enable(sample_every=64, jsonl="kda2.jsonl", prometheus="/var/lib/node_exporter/kda2.prom",
                   alert_ratio=1.5)
    ...                                   # serve
    monitor.flush()                       # resolve finished samples, write both files (also at exit)

or, for a process you do not edit, the environment, read once when `kda2.runtime` is imported:
`KDA2_MONITOR=1` (also `true`/`yes`/`on`; `0`/empty = off), with optional `KDA2_MONITOR_SAMPLE_EVERY` (64),
`KDA2_MONITOR_JSONL`, `KDA2_MONITOR_PROMETHEUS` (paths) and `KDA2_MONITOR_ALERT_RATIO` (1.5). A malformed
value is logged (naming the variable and what it allows) and leaves the monitor off.

Output paths are checked when the monitor is turned on, not at the first flush: each must name a file (not a
directory) in an existing directory where a file can be created (the JSONL file, when it exists already, must
open for appending; the Prometheus file, when it exists, must be a regular file). The monitor creates no
directories. A bad path makes `enable()` raise ValueError naming the argument (`enable(jsonl=...)`); from the
environment it is logged naming the variable, and the monitor stays off.

What is measured. A key is a dispatch row of a loaded library: (library, state layout, bucket, batch class),
which names one kernel/variant (`kernel` = the row's variant id). The row is the one the library itself picks
for the call (`kda2_route`: state layout, longest sequence, state chains N·HV). Of every `sample_every` calls
on a key the first is sampled: two CUDA events (`torch.cuda.Event(enable_timing=True)`, the torch entries' stream) are recorded
on the call's stream just before and just after the launch. The latency is the stream time between them:
the kernel(s) of the call, plus any time the GPU sat idle waiting for the launch itself when the stream was
empty (a busy stream shows kernel time only). Nothing waits for the GPU on the hot path: pending samples
are resolved lazily, by polling `event.query()` from the oldest on each later sampled call and at `flush()`
(`flush(wait=True)` synchronises on the pending ones, for shutdown and tests). Pending samples are capped
(`max_pending`); beyond it sampling is skipped and counted. Under CUDA graph capture
(`torch.cuda.is_current_stream_capturing()`) a sampled call records nothing (events would become graph
nodes, and event queries are illegal while capturing): it is launched as usual, counted as paused, and the
first one logs "monitor: paused during CUDA graph capture". The check sees the calling thread's capture
only: a server that captures on one thread while another launches with the monitor on should capture with
`capture_error_mode="thread_local"` (an event query from another thread is an "unsafe" call under the
default global mode), or turn the monitor off around its captures.

Per key: count, sum, and the last `window` latencies (median and p90 come from that window).

Regression alert. Rows routed by `kda2 tune` carry the tuned latency in the manifest (`dispatch[].tuned`:
`us`, `gpu`, `shape {N, T, H}`). A sample is *comparable* with it only when the call's N, T, H equal the
tuned shape and the GPU's name equals the tuned GPU; otherwise it is recorded with `comparable: false`
and a `reason` (route not tuned, shape differs, GPU differs). When a key has ≥ `min_samples` comparable
samples and their median (over the window) exceeds `alert_ratio ×` the tuned `us`, one warning per key is
logged on `logging.getLogger("kda2.monitor")`, an `alert` record is emitted and `kda2_regressions_total`
for the key becomes 1. The check runs each time `min_samples` more comparable samples resolve, and at flush.

Output (`flush()` writes both; `prometheus_text()` returns the exposition without writing):

- JSON lines, appended to `jsonl`: one `{"record": "sample", ...}` per resolved sample (call time, spec,
  arch, family, kernel, variant_index, state_layout, bucket, class, routed_by, entry, device, shape {N, T, H, HV},
  us, tuned_us, tuned_shape, comparable, reason), one `{"record": "alert", ...}` per regression, one
  `{"record": "paused", ...}` when sampling first pauses for a graph capture, and at each flush one
  `{"record": "summary", ...}` per key (calls, sampled, count, median_us, p90_us, mean_us, min_us, max_us,
  comparable, comparable_median_us, tuned_us, ratio, regressed). Records wait in memory (at most
  `max_records`, oldest dropped and counted) until `flush()`, which also returns them. A write that fails
  (the directory removed since, a full disk) is logged in one line and keeps the records queued for the next
  flush (within `max_records`; the oldest beyond it are dropped and counted); that flush returns [].
- Prometheus text exposition 0.0.4, rewritten atomically at `prometheus` (a node_exporter textfile):
  `kda2_call_latency_us{spec,arch,kernel,bucket,class,quantile}` (summary: quantiles 0.5 and 0.9, `_sum`,
  `_count`), `kda2_calls_sampled_total{spec,arch,kernel,bucket,class}`, `kda2_calls_total{...}` (calls seen while on),
  `kda2_regressions_total{...}` (0 or 1 per key), `kda2_tuned_latency_us{...}` (tuned routes), and
  `kda2_monitor_paused_total`, `kda2_monitor_skipped_total` (backlog), `kda2_monitor_errors_total`.

Stdlib only; torch is used (through `kda2.runtime.api`) only when a sampled torch call records events.
"""
from __future__ import annotations

import atexit
import importlib
import json
import logging
import math
import os
import threading
import time
from collections import deque
from ctypes import addressof as _addressof
from pathlib import Path
from typing import Any, Iterable

from kda2.artifact.atomic import probe_dir
from kda2.runtime import api as _api

log = logging.getLogger("kda2.monitor")

ENV = "KDA2_MONITOR"
ENV_SAMPLE_EVERY = "KDA2_MONITOR_SAMPLE_EVERY"
ENV_JSONL = "KDA2_MONITOR_JSONL"
ENV_PROMETHEUS = "KDA2_MONITOR_PROMETHEUS"
ENV_ALERT_RATIO = "KDA2_MONITOR_ALERT_RATIO"

#: Modules whose launch sites read the global `_MON` (None when off, the active Monitor when on).
HOOKED = ("kda2.runtime.api", "kda2.runtime.chunk", "kda2.runtime.prepared")

PAUSED_MESSAGE = "monitor: paused during CUDA graph capture"
_QUANTILES = (0.5, 0.9)
_ROUTE_CACHE_MAX = 4096

_active: "Monitor | None" = None
_lock = threading.Lock()
_atexit_registered = False


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) of an ascending list; NaN if empty."""
    n = len(sorted_values)
    if not n:
        return math.nan
    pos = q * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class TorchEvents:
    """Event backend of the torch entries: torch.cuda.Event on torch's current stream of the call's device.

    A backend provides `new_event()` (an object with `record(stream)`, `query() -> bool`,
    `elapsed_time(end) -> ms` and `synchronize()`), `stream(device_index, raw_handle)` (the stream object
    events are recorded on, for the raw handle the launch used), `capturing()` and
    `device_name(device_index)`; tests pass their own to `enable(backend=...)`.
    """

    def __init__(self) -> None:
        torch = self._torch = _api._torch or _api._init_torch()
        self._names: dict[int, str] = {}
        # (device, raw handle) -> torch Stream. Stable: a torch stream's id never changes its handle
        # (pool streams live as long as the process; an external stream's id is its handle).
        self._streams: dict[tuple[int, Any], Any] = {}
        self.capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or \
            torch.cuda.is_current_stream_capturing  # the C function: a Python frame less (~0.6 us)

    def new_event(self) -> Any:
        return self._torch.cuda.Event(enable_timing=True)

    def stream(self, device_index: int, raw: Any = None) -> Any:
        s = self._streams.get((device_index, raw))
        if s is None:
            s = self._torch.cuda.current_stream(device_index)  # ~3 us: once per stream
            if raw is not None and s.cuda_stream == raw:
                if len(self._streams) >= 1024:
                    self._streams.clear()
                self._streams[(device_index, raw)] = s
        return s

    def device_name(self, device_index: int) -> str | None:
        name = self._names.get(device_index)
        if name is None:
            try:
                name = self._names[device_index] = self._torch.cuda.get_device_name(device_index)
            except Exception:  # noqa: BLE001 - a name is only used to qualify the comparison
                return None
        return name


class _Route:
    """One dispatch row of one library (the monitor's key) and its statistics."""

    __slots__ = ("lib", "spec", "arch", "family", "kernel", "variant_index", "layout", "bucket", "klass", "routed_by",
                 "tuned_us", "tuned_shape", "tuned_gpu", "countdown", "calls", "sampled", "count", "total_us",
                 "min_us", "max_us", "window", "cwindow", "ccount", "regressed")

    def __init__(self, lib: Any, row: dict, window: int) -> None:
        self.lib = lib
        self.spec, self.arch = str(lib.spec), str(lib.arch)
        self.family = str(getattr(lib, "family", "recurrent"))
        self.kernel = str(row["variant"])
        self.variant_index = int(row["index"])
        self.layout = str(row["state_layout"])
        self.bucket = int(row["bucket"])
        self.klass = str(row.get("class", ""))
        self.routed_by = row.get("routed_by")
        tuned = row.get("tuned") or None
        self.tuned_us = self.tuned_shape = self.tuned_gpu = None
        if isinstance(tuned, dict) and tuned.get("us") is not None:
            self.tuned_us = float(tuned["us"])
            shape = tuned.get("shape") or {}
            if all(k in shape for k in ("N", "T", "H")):
                self.tuned_shape = (int(shape["N"]), int(shape["T"]), int(shape["H"]))
            self.tuned_gpu = tuned.get("gpu")
        self.countdown = 1  # the first call of a key is sampled
        self.calls = self.sampled = self.count = self.ccount = 0
        self.total_us = 0.0
        self.min_us, self.max_us = math.inf, -math.inf
        self.window: deque = deque(maxlen=window)
        self.cwindow: deque = deque(maxlen=window)
        self.regressed = False

    def labels(self) -> dict:
        return {"spec": self.spec, "arch": self.arch, "kernel": self.kernel, "bucket": str(self.bucket),
                "class": self.klass}

    def ident(self) -> dict:
        return {"spec": self.spec, "arch": self.arch, "family": self.family, "kernel": self.kernel,
                "variant_index": self.variant_index, "state_layout": self.layout, "bucket": self.bucket,
                "class": self.klass, "routed_by": self.routed_by}

    def tuned_shape_dict(self) -> dict | None:
        return None if self.tuned_shape is None else dict(zip(("N", "T", "H"), self.tuned_shape))


class Monitor:
    """The sampling monitor. Create and install it with `enable()`; its methods are also the module's."""

    def __init__(self, sample_every: int = 64, jsonl: str | os.PathLike | None = None,
                 prometheus: str | os.PathLike | None = None, alert_ratio: float = 1.5, *, min_samples: int = 20,
                 window: int = 1024, max_pending: int = 4096, max_records: int = 65536,
                 backend: Any = None) -> None:
        for name, value in (("sample_every", sample_every), ("min_samples", min_samples), ("window", window),
                            ("max_pending", max_pending), ("max_records", max_records)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"monitor {name}: got {value!r}; allowed: an integer >= 1")
        if isinstance(alert_ratio, bool) or not isinstance(alert_ratio, (int, float)) or not alert_ratio > 0 \
                or math.isinf(alert_ratio):
            raise ValueError(f"monitor alert_ratio: got {alert_ratio!r}; allowed: a finite number > 0")
        self.sample_every = sample_every
        self.jsonl = _writable(jsonl, "monitor enable(jsonl=...)") if jsonl is not None else None
        self.prometheus = _writable(prometheus, "monitor enable(prometheus=...)", replaced=True) \
            if prometheus is not None else None
        self.alert_ratio = float(alert_ratio)
        self.min_samples = min_samples
        self.window = window
        self.max_pending = max_pending
        self._backend = backend
        self._routes: dict = {}      # (lib, v_first, longest, chains) -> _Route | None (no row: the launch fails)
        self._rows: dict = {}        # (lib, layout, bucket, class) -> _Route, in first-seen order
        self._pending: deque = deque()
        self._free: list = []        # resolved event pairs, re-recorded by later samples
        self._records: deque = deque(maxlen=max_records)
        self._poll_lock = threading.Lock()
        self.paused = 0              # sampled calls skipped under CUDA graph capture
        self.skipped = 0             # sampled calls skipped: max_pending samples unresolved
        self.errors = 0              # samples lost to an event error
        self.records_dropped = 0
        self.write_errors = 0        # failed JSONL / Prometheus writes (each logged in one line)
        self.regressions = 0
        self._paused_logged = False

    # -- hot path ------------------------------------------------------------------------------------
    def launch(self, entry: str, lib: Any, args: Any, dev_index: int, longest: int, stream: Any) -> None:
        """Launch `args` as the entry would (`kda2_fwd`, `_relaunch` on a non-zero return), sampling 1 call of
        every `sample_every` per dispatch row. Called only by the hooked launch sites while on."""
        chains = args.N * args.HV
        r = self._routes.get((lib, args.state_v_first, longest, chains), False)
        if r is False:
            r = self._route(lib, args.state_v_first, longest, chains)
        if r is not None:
            r.calls += 1
            r.countdown -= 1
            if r.countdown <= 0:
                r.countdown = self.sample_every
                self._sample(entry, r, lib, args, dev_index, longest, stream)
                return
        if _api._multi_gpu or lib._fwd(_addressof(args), longest, stream):
            _api._relaunch(lib, args, dev_index, longest)

    def _sample(self, entry: str, r: _Route, lib: Any, args: Any, dev_index: int, longest: int, stream: Any) -> None:
        b = self._backend
        if b is None:
            b = self._backend = TorchEvents()
        if b.capturing():
            self._pause(r, entry)
        else:
            if self._pending:
                self._poll()
            if len(self._pending) >= self.max_pending:
                self.skipped += 1
            else:
                s = b.stream(dev_index, stream)
                free = self._free
                e0, e1 = free.pop() if free else (b.new_event(), b.new_event())
                N, T, H, HV = args.N, args.T, args.H, args.HV
                t = time.time()
                e0.record(s)
                try:
                    if _api._multi_gpu or lib._fwd(_addressof(args), longest, stream):
                        _api._relaunch(lib, args, dev_index, longest)
                except BaseException:
                    free.append((e0, e1))
                    raise
                e1.record(s)
                r.sampled += 1
                self._pending.append((e0, e1, r, entry, dev_index, N, T, H, HV, t))
                return
        if _api._multi_gpu or lib._fwd(_addressof(args), longest, stream):
            _api._relaunch(lib, args, dev_index, longest)

    def _route(self, lib: Any, v_first: int, longest: int, chains: int) -> _Route | None:
        """The dispatch row the library picks (kda2_route); None where it picks none (the launch fails)."""
        row = lib.route(bool(v_first), longest, chains)
        r = None
        if row is not None:
            rkey = (lib, row["state_layout"], int(row["bucket"]), row.get("class"))
            r = self._rows.get(rkey)
            if r is None:
                r = self._rows[rkey] = _Route(lib, row, self.window)
        if len(self._routes) >= _ROUTE_CACHE_MAX:  # many distinct lengths (varlen prefill): start over
            self._routes.clear()
        self._routes[(lib, v_first, longest, chains)] = r
        return r

    def _pause(self, r: _Route, entry: str) -> None:
        self.paused += 1
        if not self._paused_logged:
            self._paused_logged = True
            log.warning("%s (sampling resumes after it; the captured launches are not timed)", PAUSED_MESSAGE)
            self._record({"record": "paused", "time": time.time(), "message": PAUSED_MESSAGE, "entry": entry,
                          **r.ident()})

    # -- resolution (lazy) -----------------------------------------------------------------------------
    def _poll(self, wait: bool = False) -> int:
        """Resolve finished samples, oldest first, stopping at the first unfinished one (or waiting for it)."""
        if not self._poll_lock.acquire(blocking=wait):
            return 0  # another thread is resolving
        n = 0
        try:
            p = self._pending
            while p:
                item = p[0]
                e0, e1 = item[0], item[1]
                try:
                    if not e1.query():
                        if not wait:
                            break
                        e1.synchronize()
                    us = e0.elapsed_time(e1) * 1000.0
                except Exception as exc:  # noqa: BLE001 - never turn a lost sample into the caller's error
                    p.popleft()
                    self.errors += 1
                    if self.errors == 1:
                        log.warning("monitor: a sample was lost (%s: %s); further losses are only counted",
                                    type(exc).__name__, exc)
                    continue
                p.popleft()
                self._free.append((e0, e1))
                self._resolve(item, us)
                n += 1
        finally:
            self._poll_lock.release()
        return n

    def _resolve(self, item: tuple, us: float) -> None:
        _, _, r, entry, dev, N, T, H, HV, t = item
        r.count += 1
        r.total_us += us
        if us < r.min_us:
            r.min_us = us
        if us > r.max_us:
            r.max_us = us
        r.window.append(us)
        ok = r.tuned_shape == (N, T, H) and (r.tuned_gpu is None or self._same_gpu(r.tuned_gpu, dev))
        if len(self._records) == self._records.maxlen:
            self.records_dropped += 1
        self._records.append((item, us, ok))  # made a dict at flush: the hot path only appends a tuple
        if ok:
            r.cwindow.append(us)
            r.ccount += 1
            if not r.regressed and r.ccount % self.min_samples == 0:
                self._check(r)

    def _sample_record(self, item: tuple, us: float, ok: bool) -> dict:
        _, _, r, entry, dev, N, T, H, HV, t = item
        return {"record": "sample", "time": t, **r.ident(), "entry": entry, "device": dev,
                "shape": {"N": N, "T": T, "H": H, "HV": HV}, "us": round(us, 3), "tuned_us": r.tuned_us,
                "tuned_shape": r.tuned_shape_dict(), "comparable": ok,
                "reason": None if ok else self._incomparable(r, dev, N, T, H)}

    def _same_gpu(self, tuned_gpu: str, dev: int) -> bool:
        name = self._backend.device_name(dev) if self._backend is not None else None
        return name is None or name == tuned_gpu

    def _incomparable(self, r: _Route, dev: int, N: int, T: int, H: int) -> str | None:
        """Why a sample cannot be held against the route's tuned latency (None: it can)."""
        if r.tuned_us is None:
            return f"route {r.layout}:{r.bucket} has no tuned latency (routed_by={r.routed_by}): no baseline"
        if r.tuned_shape is None:
            return f"route {r.layout}:{r.bucket}: the manifest's tuned entry has no shape"
        if (N, T, H) != r.tuned_shape:
            tn, tt, th = r.tuned_shape
            return (f"shape N={N} T={T} H={H} differs from the tuned shape N={tn} T={tt} H={th}: "
                    f"latency not comparable")
        if r.tuned_gpu and not self._same_gpu(r.tuned_gpu, dev):
            name = self._backend.device_name(dev)
            return f"GPU {name!r} differs from the tuned GPU {r.tuned_gpu!r}: latency not comparable"
        return None

    def _check(self, r: _Route) -> None:
        if r.regressed or r.tuned_us is None or len(r.cwindow) < self.min_samples:
            return
        med = quantile(sorted(r.cwindow), 0.5)
        limit = self.alert_ratio * r.tuned_us
        if med > limit:
            r.regressed = True
            self.regressions += 1
            n = len(r.cwindow)
            log.warning("kda2 regression: %s/%s kernel %s (%s bucket %d) median %.1f us over %d samples > "
                        "%.2f x tuned %.1f us (tuned on %s, shape %s)", r.spec, r.arch, r.kernel, r.layout,
                        r.bucket, med, n, self.alert_ratio, r.tuned_us, r.tuned_gpu, r.tuned_shape_dict())
            self._record({"record": "alert", "time": time.time(), **r.ident(), "median_us": round(med, 3),
                          "samples": n, "tuned_us": r.tuned_us, "tuned_shape": r.tuned_shape_dict(),
                          "tuned_gpu": r.tuned_gpu, "alert_ratio": self.alert_ratio,
                          "ratio": round(med / r.tuned_us, 4)})

    def _record(self, rec: dict) -> None:
        if len(self._records) == self._records.maxlen:
            self.records_dropped += 1
        self._records.append(rec)

    # -- reading ---------------------------------------------------------------------------------------
    def routes(self) -> list[_Route]:
        return list(self._rows.values())

    def stats(self) -> list[dict]:
        """One summary per key (what a flush writes as `summary` records), in first-seen order."""
        out = []
        for r in self.routes():
            w = sorted(r.window)
            cw = sorted(r.cwindow)
            cmed = quantile(cw, 0.5) if cw else None
            out.append({**r.ident(), "calls": r.calls, "sampled": r.sampled, "count": r.count,
                        "pending": r.sampled - r.count,
                        "median_us": _round(quantile(w, 0.5)) if w else None,
                        "p90_us": _round(quantile(w, 0.9)) if w else None,
                        "mean_us": _round(r.total_us / r.count) if r.count else None,
                        "min_us": _round(r.min_us) if r.count else None,
                        "max_us": _round(r.max_us) if r.count else None,
                        "comparable": r.ccount, "comparable_median_us": _round(cmed) if cmed is not None else None,
                        "tuned_us": r.tuned_us, "tuned_shape": r.tuned_shape_dict(), "tuned_gpu": r.tuned_gpu,
                        "ratio": _round(cmed / r.tuned_us, 4) if cmed is not None and r.tuned_us else None,
                        "regressed": r.regressed})
        return out

    def prometheus_text(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of the current statistics."""
        routes = self.routes()
        lines = ["# HELP kda2_call_latency_us Launch latency of sampled kda2 calls (CUDA events around the "
                 "launch on the call's stream), microseconds; quantiles over the last samples of each route.",
                 "# TYPE kda2_call_latency_us summary"]
        for r in routes:
            if not r.count:
                continue
            w = sorted(r.window)
            for q in _QUANTILES:
                lines.append(f"kda2_call_latency_us{_labels(r.labels(), quantile=_num(q))} {_num(quantile(w, q))}")
            lines.append(f"kda2_call_latency_us_sum{_labels(r.labels())} {_num(r.total_us)}")
            lines.append(f"kda2_call_latency_us_count{_labels(r.labels())} {r.count}")
        for name, help_, attr in (
                ("kda2_calls_sampled_total", "Calls sampled (events recorded) per route.", "sampled"),
                ("kda2_calls_total", "Calls per route while the monitor was on.", "calls"),
                ("kda2_regressions_total", "Regression alerts per route (median over alert_ratio x the tuned "
                                           "latency; at most one per route).", "regressed")):
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} counter"]
            lines += [f"{name}{_labels(r.labels())} {int(getattr(r, attr))}" for r in routes]
        lines += ["# HELP kda2_tuned_latency_us Tuned latency of the route (manifest dispatch[].tuned.us).",
                  "# TYPE kda2_tuned_latency_us gauge"]
        lines += [f"kda2_tuned_latency_us{_labels(r.labels())} {_num(r.tuned_us)}" for r in routes
                  if r.tuned_us is not None]
        for name, help_, value in (
                ("kda2_monitor_paused_total", "Sampled calls not timed because a CUDA graph was being captured.",
                 self.paused),
                ("kda2_monitor_skipped_total", "Sampled calls not timed because max_pending samples were "
                                               "unresolved.", self.skipped),
                ("kda2_monitor_errors_total", "Samples lost to an event error.", self.errors)):
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} counter", f"{name} {value}"]
        return "\n".join(lines) + "\n"

    def flush(self, wait: bool = False) -> list[dict]:
        """Resolve finished samples (all pending ones with `wait=True`: a synchronisation), run the
        regression check, write the JSONL records and the Prometheus file; return the records written.

        A failed write is logged (one line per file) and counted in `write_errors`, never raised; when the
        JSONL append fails the records stay queued for the next flush and [] is returned."""
        b = self._backend
        if self._pending and not (b is not None and b.capturing()):
            self._poll(wait)
        for r in self.routes():
            if not r.regressed and len(r.cwindow) >= self.min_samples:
                self._check(r)
        raw = []
        pop = self._records.popleft
        while self._records:
            raw.append(pop())
        records = [rec if isinstance(rec, dict) else self._sample_record(*rec) for rec in raw]
        records += [{"record": "summary", "time": time.time(), **s} for s in self.stats()]
        if self.jsonl is not None:
            text = "".join(json.dumps(rec, sort_keys=True, allow_nan=False, default=str) + "\n" for rec in records)
            try:
                with open(self.jsonl, "a", encoding="utf-8") as f:
                    f.write(text)
            except OSError as exc:
                kept, lost = self._requeue(raw)
                self.write_errors += 1
                log.warning("monitor: cannot append to the JSONL file %s (%s); %d record(s) kept for the next "
                            "flush%s", self.jsonl, _os_error(exc), kept,
                            f", {lost} oldest dropped (max_records {self._records.maxlen})" if lost else "")
                records = []
        if self.prometheus is not None:
            tmp = self.prometheus.with_name(f".{self.prometheus.name}.{os.getpid()}.tmp")
            try:
                tmp.write_text(self.prometheus_text(), encoding="utf-8")
                os.replace(tmp, self.prometheus)
            except OSError as exc:
                try:
                    tmp.unlink()
                except OSError:
                    pass
                self.write_errors += 1
                log.warning("monitor: cannot write the Prometheus file %s (%s); it is rewritten whole at the next "
                            "flush", self.prometheus, _os_error(exc))
        return records

    def _requeue(self, raw: list) -> tuple[int, int]:
        """Put records taken by a flush whose write failed back in front of the queue (they are older than
        any queued since), within max_records: the oldest beyond it are dropped and counted. (kept, dropped)"""
        q = self._records
        lost = max(0, len(raw) - (q.maxlen - len(q)))
        if lost:
            self.records_dropped += lost
            raw = raw[lost:]
        q.extendleft(reversed(raw))
        return len(raw), lost


_PATH_RULE = "allowed: a file in an existing directory where files can be created (no directories are created)"


def _writable(path: str | os.PathLike, setting: str, replaced: bool = False) -> Path:
    """`path` as a Path when a flush can write it, else ValueError naming `setting`. Creates nothing that
    stays: the directory is probed with a temporary file (os.access says yes for root, and for /proc)."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    where = f"{setting}: {text!r}"
    if not text:
        raise ValueError(f"{where}: an empty path; {_PATH_RULE}")
    p = Path(text)
    if p.is_dir():
        raise ValueError(f"{where} is a directory; {_PATH_RULE}")
    parent = p.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise ValueError(f"{where}: its directory {str(parent)!r} {what}; {_PATH_RULE}")
    if p.exists() and not replaced:
        if not p.is_file():  # a FIFO or a device (/dev/stdout): opening one may block; ask instead
            if not os.access(p, os.W_OK):
                raise ValueError(f"{where}: not writable; {_PATH_RULE}")
            return p
        try:
            with open(p, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise ValueError(f"{where}: cannot be opened for appending ({_os_error(exc)}); {_PATH_RULE}") from None
        return p
    if replaced and p.exists() and not p.is_file():
        raise ValueError(f"{where} exists and is not a regular file (the file is replaced whole at each flush); "
                         f"{_PATH_RULE}")
    try:
        probe_dir(parent)
    except OSError as exc:
        raise ValueError(f"{where}: cannot create a file in {str(parent)!r} ({_os_error(exc)}); {_PATH_RULE}") \
            from None
    return p


def _os_error(exc: OSError) -> str:
    return f"{type(exc).__name__}: {exc.strerror}" if exc.strerror else f"{type(exc).__name__}: {exc}"


def _round(x: float, nd: int = 3) -> float:
    return round(x, nd)


def _num(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "NaN"
    if isinstance(x, float) and math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x)) if isinstance(x, float) else str(x)


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict, **more: str) -> str:
    items = {**labels, **more}
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in items.items()) + "}"


# -- module-level API ------------------------------------------------------------------------------------

def _install(m: "Monitor | None", modules: Iterable[str] = HOOKED) -> None:
    for name in modules:
        importlib.import_module(name)._MON = m


def enable(sample_every: int = 64, jsonl: str | os.PathLike | None = None,
           prometheus: str | os.PathLike | None = None, alert_ratio: float = 1.5, **options: Any) -> Monitor:
    """Turn the monitor on (replacing, after a flush, one already on) and return it.

    `sample_every`: time 1 call of every N per dispatch row; `jsonl` / `prometheus`: files `flush()` writes
    (also flushed at interpreter exit), checked here (an existing directory where a file can be created, the
    path not a directory; none is created): ValueError naming the argument otherwise; `alert_ratio`: the
    regression threshold over the tuned latency.
    Keyword options of `Monitor`: `min_samples` (K, 20), `window` (1024), `max_pending` (4096),
    `max_records` (65536), `backend` (the event source; default torch's CUDA events).
    """
    global _active, _atexit_registered
    m = Monitor(sample_every, jsonl, prometheus, alert_ratio, **options)
    with _lock:
        old, _active = _active, m
        _install(m)
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True
    if old is not None:
        _safe_flush(old)
    return m


def disable(flush: bool = True) -> Monitor | None:
    """Turn the monitor off (the launch sites go back to their single check); flush it first by default.
    Returns the monitor that was on (its statistics stay readable), or None."""
    global _active
    with _lock:
        old, _active = _active, None
        _install(None)
    if old is not None and flush:
        old.flush()
    return old


def active() -> Monitor | None:
    """The monitor that is on, or None."""
    return _active


def enabled() -> bool:
    return _active is not None


def flush(wait: bool = False) -> list[dict]:
    """`Monitor.flush` of the active monitor ([] when off)."""
    m = _active
    return m.flush(wait) if m is not None else []


def prometheus_text() -> str:
    """`Monitor.prometheus_text` of the active monitor ("" when off)."""
    m = _active
    return m.prometheus_text() if m is not None else ""


def stats() -> list[dict]:
    """`Monitor.stats` of the active monitor ([] when off)."""
    m = _active
    return m.stats() if m is not None else []


def _safe_flush(m: Monitor) -> None:
    try:
        m.flush()
    except Exception as exc:  # noqa: BLE001 - at exit or on replacement: report, never raise
        log.warning("monitor: flush failed (%s: %s)", type(exc).__name__, exc)


def _at_exit() -> None:
    m = _active
    if m is not None and (m.jsonl is not None or m.prometheus is not None):
        _safe_flush(m)


def _from_env(environ: dict | None = None) -> Monitor | None:
    """KDA2_MONITOR=1 (read once, when kda2.runtime is imported): enable with the KDA2_MONITOR_* settings."""
    env = os.environ if environ is None else environ
    value = env.get(ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return None
    if value not in ("1", "true", "yes", "on"):
        log.warning("%s=%r: not understood (1/true/yes/on or 0/false/no/off); the monitor stays off", ENV,
                    env.get(ENV))
        return None
    try:
        sample_every = _env_number(env, ENV_SAMPLE_EVERY, int, 64, "an integer >= 1")
        alert_ratio = _env_number(env, ENV_ALERT_RATIO, float, 1.5, "a finite number > 0")
        jsonl, prometheus = env.get(ENV_JSONL) or None, env.get(ENV_PROMETHEUS) or None
        if jsonl is not None:
            _writable(jsonl, ENV_JSONL)  # checked here too, so that the warning names the variable
        if prometheus is not None:
            _writable(prometheus, ENV_PROMETHEUS, replaced=True)
        return enable(sample_every=sample_every, jsonl=jsonl, prometheus=prometheus, alert_ratio=alert_ratio)
    except ValueError as exc:
        log.warning("%s=1 ignored, the monitor stays off: %s", ENV, exc)
        return None


def _env_number(env: Any, name: str, kind: type, default: float, allowed: str) -> Any:
    """The number in `env[name]` (`default` when unset or empty), else ValueError naming the variable."""
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = kind(raw.strip())
    except ValueError:
        value = None
    if value is None or not value > 0 or math.isinf(value):
        raise ValueError(f"{name}: got {raw!r}; allowed: {allowed} (default {default})")
    return value


_from_env()

__all__ = ["HOOKED", "Monitor", "PAUSED_MESSAGE", "TorchEvents", "active", "disable", "enable", "enabled", "flush",
           "prometheus_text", "quantile", "stats"]
