"""The shared remote cache (kda2.compile.remote) against a real S3-compatible server.

moto's server mode runs in this process on 127.0.0.1 (an OS-chosen port) for the module and is stopped at
its end; every build is a real SCons subprocess in a throwaway checkout with its own local cache and the
counting nvcc/nvlink/g++ wrappers of tests/test_build_pipeline.py, so "0 compiler calls" is counted.
Each test that writes to the store uses its own key prefix.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import shutil
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers below, whatever pytest's import mode
from test_build_pipeline import SPEC_A, Checkout, Run, spec_text  # noqa: E402  (skips without nvcc)

boto3 = pytest.importorskip("boto3", reason="the remote cache needs boto3: pip install -e '.[build]'")
moto_server = pytest.importorskip("moto.server", reason="these tests need moto's server: pip install -e '.[test]'")

pytestmark = pytest.mark.compile

BUCKET = "kda2-remote-cache-test"
SUMMARY_RE = re.compile(r"^kda2: remote cache (s3://\S+): (\d+) hits?, (\d+) pushed(.*)$", re.M)


@dataclass
class Store:
    endpoint: str
    s3: object  # a boto3 S3 client on the server

    def env(self, prefix: str) -> dict[str, str]:
        return {"KDA2_REMOTE_CACHE": f"s3://{BUCKET}/{prefix}", "KDA2_REMOTE_CACHE_ENDPOINT": self.endpoint,
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1"}

    def objects(self, prefix: str) -> dict[str, bytes]:
        keys = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return {k: self.s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in sorted(keys)}

    def recorded(self, key: str) -> str:
        return self.s3.head_object(Bucket=BUCKET, Key=key)["Metadata"].get("sha256", "")

    def copy_prefix(self, src: str, dst: str) -> None:
        for key in self.objects(src):
            self.s3.copy_object(Bucket=BUCKET, Key=dst + key[len(src):],
                                CopySource={"Bucket": BUCKET, "Key": key}, MetadataDirective="COPY")


@pytest.fixture(scope="module")
def store():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log on stderr
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing",
                          config=Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 2}))
        s3.create_bucket(Bucket=BUCKET)
        yield Store(endpoint, s3)
    finally:
        server.stop()


class RemoteCheckout(Checkout):
    """A checkout whose SCons sees exactly the remote settings given (none: no remote at all)."""

    def __init__(self, root: Path, cache: Path, remote: dict[str, str] | None):
        super().__init__(root, cache, {"a": spec_text(SPEC_A)})
        self.remote = remote or {}

    def env(self, path: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in super().env(path).items()
               if not (k.startswith("KDA2_REMOTE_CACHE") or k.startswith("AWS_"))}
        env.update(self.remote)
        return env


def summary(run: Run) -> tuple[int, int, str]:
    found = SUMMARY_RE.findall(run.stdout)
    assert len(found) == 1, "expected one remote cache summary line\n" + run.tail()
    _, hits, pushed, rest = found[0]
    return int(hits), int(pushed), rest


def warnings(run: Run) -> list[str]:
    """Warning lines, but the rules' "matches no current variant" notes every build of the test spec prints."""
    return [ln for ln in run.stderr.splitlines()
            if ln.startswith("kda2: warning:") and "matches no current variant" not in ln]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Pushed:
    checkout: RemoteCheckout
    run: Run
    outputs: dict[str, str]
    prefix: str


@pytest.fixture(scope="module")
def pushed(store: Store, tmp_path_factory) -> Pushed:
    """(1) A cold build with an empty local cache and an empty store prefix: everything is pushed."""
    base = tmp_path_factory.mktemp("remote-one")
    co = RemoteCheckout(base / "repo", base / "cache", store.env("shared"))
    run = co.scons()
    assert run.rc == 0, run.tail()
    print(f"\n[remote-cache] cold build pushing to the store: {run.wall:.1f}s")
    return Pushed(co, run, co.outputs(), "shared")


def without_cubin_entries(src: Pushed, cache: Path) -> int:
    """Copy the first build's local cache to `cache`, minus the entries holding its cubins (so a build
    from it has to link, or ask the remote for, exactly those). Returns how many were left out."""
    cubins = {p.read_bytes() for p in src.checkout.out().glob("*.cubin")}
    shutil.copytree(src.checkout.cache, cache)
    gone = 0
    for p in cache.rglob("*"):
        if p.is_file() and re.fullmatch(r"[0-9a-f]{64}", p.name) and p.read_bytes() in cubins:
            p.unlink()
            Path(str(p) + ".sha256").unlink()
            gone += 1
    assert gone == len(cubins) == len(src.checkout.variant_ids())
    return gone


# ---- 1. cold build: every node is pushed, with its checksum -----------------------------------------

def test_cold_build_pushes_every_entry(pushed: Pushed, store: Store):
    co, run = pushed.checkout, pushed.run
    ids = co.variant_ids()
    assert run.compiled() == sorted(ids) and run.linked() == sorted((SPEC_A, v) for v in ids), run.tail()
    assert warnings(run) == [], run.tail()
    hits, n_pushed, rest = summary(run)
    objects = store.objects(pushed.prefix)
    local = [p for p in co.cache.rglob("*") if re.fullmatch(r"[0-9a-f]{64}", p.name)]
    assert hits == 0 and n_pushed == len(objects) == len(local) > 0, (run.stdout[-2000:], sorted(objects))
    assert rest == "", rest
    for key, data in objects.items():  # each object is a local entry, under its name, with its sha256
        sig = key.rsplit("/", 1)[1]
        (entry,) = [p for p in local if p.name == sig]
        assert entry.read_bytes() == data, key
        assert store.recorded(key) == sha256(data), key
    assert co.cubin(ids[0]).read_bytes() in objects.values()


# ---- 2. a second clean checkout, empty local cache: all from the store --------------------------

def test_clean_checkout_builds_from_the_store(pushed: Pushed, store: Store, tmp_path: Path):
    co = RemoteCheckout(tmp_path / "repo", tmp_path / "cache", store.env(pushed.prefix))
    run = co.scons()
    assert run.rc == 0, run.tail()
    assert run.calls and run.tools_run() == [], run.tools_run()  # probes only: no nvcc, nvlink, g++ build
    assert run.actions() == [], run.actions()
    assert warnings(run) == [], run.tail()
    hits, n_pushed, rest = summary(run)
    assert hits == len(store.objects(pushed.prefix)) and n_pushed == 0 and rest == "", run.stdout[-2000:]
    assert co.outputs() == pushed.outputs   # byte-identical, kernel objects included
    # the hits became verified local entries: a further clean build needs no remote at all
    shutil.rmtree(co.build)
    again = co.scons()
    assert again.rc == 0 and again.tools_run() == [], again.tail()
    assert SUMMARY_RE.search(again.stdout) is None, "an all-local build should not have asked the remote"
    assert co.outputs() == pushed.outputs
    print(f"\n[remote-cache] clean checkout, empty local cache, all from the store: {run.wall:.1f}s")


# ---- 3. a corrupted object is refused, rebuilt and replaced --------------------------------------

def test_corrupt_object_is_refused_rebuilt_and_replaced(pushed: Pushed, store: Store, tmp_path: Path):
    prefix = "corrupt"
    store.copy_prefix(pushed.prefix, prefix)
    vid = pushed.checkout.variant_ids()[0]
    good = pushed.checkout.cubin(vid).read_bytes()
    (key,) = [k for k, data in store.objects(prefix).items() if data == good]
    bad = bytearray(good)
    mid = len(bad) // 2
    bad[mid:mid + 16] = bytes(b ^ 0xFF for b in bad[mid:mid + 16])
    # same size, the good checksum kept in its metadata: only hashing the bytes can tell
    store.s3.put_object(Bucket=BUCKET, Key=key, Body=bytes(bad), Metadata={"sha256": sha256(good), "mode": "644"})
    assert store.recorded(key) == sha256(good)

    co = RemoteCheckout(tmp_path / "repo", tmp_path / "cache", store.env(prefix))
    run = co.scons()
    assert run.rc == 0, run.tail()
    (warning,) = warnings(run)
    assert "corrupt" in warning and key in warning, run.tail()
    assert run.linked() == [(SPEC_A, vid)], run.tools_run()   # that node only, from the (good) kernel.o
    assert run.compiled() == [] and run.host() == [], run.tools_run()
    hits, n_pushed, rest = summary(run)
    assert n_pushed == 1 and "1 refused as corrupt" in rest, run.stdout[-2000:]
    assert co.outputs() == pushed.outputs
    assert store.objects(prefix)[key] == good and store.recorded(key) == sha256(good), \
        "the rebuilt cubin should have replaced the corrupt object"
    assert co.cubin(vid).read_bytes() == good


# ---- 4. the store is down: one warning, the build goes on locally -------------------------------

def test_store_down_warns_once_and_builds_locally(pushed: Pushed, store: Store, tmp_path: Path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    env = store.env(pushed.prefix) | {"KDA2_REMOTE_CACHE_ENDPOINT": f"http://127.0.0.1:{closed}"}
    n = without_cubin_entries(pushed, tmp_path / "cache")
    co = RemoteCheckout(tmp_path / "repo", tmp_path / "cache", env)
    run = co.scons()
    assert run.rc == 0, run.tail()
    (warning,) = warnings(run)
    assert warning.startswith("kda2: warning: remote cache ") and warning.endswith("; building locally"), warning
    assert "Traceback" not in run.stdout + run.stderr, run.tail()
    assert len(run.linked()) == n and run.compiled() == [], run.tools_run()
    hits, n_pushed, rest = summary(run)
    assert hits == n_pushed == 0 and "disabled" in rest, run.stdout[-2000:]
    assert co.outputs() == pushed.outputs
    print(f"\n[remote-cache] store down, {n} cubins linked locally: {run.wall:.1f}s")


@contextlib.contextmanager
def dropping_server():
    """A TCP server on 127.0.0.1 that accepts every connection and closes it unanswered; yields (port,
    a list that counts the connections). Stopped, its thread joined, on exit."""
    seen: list[int] = []
    stop = threading.Event()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.settimeout(0.1)

    def serve():
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:  # the accept timeout: look at `stop` again
                continue
            seen.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], seen
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()


def test_failing_store_is_left_alone_for_the_rest_of_the_build(pushed: Pushed, store: Store, tmp_path: Path):
    """A cold build (every node a local miss) against a store that drops every connection: it is asked by
    at most the two SCons workers in flight, then never again."""
    with dropping_server() as (port, seen):
        env = store.env(pushed.prefix) | {"KDA2_REMOTE_CACHE_ENDPOINT": f"http://127.0.0.1:{port}"}
        co = RemoteCheckout(tmp_path / "repo", tmp_path / "cache", env)
        run = co.scons()
    assert run.rc == 0, run.tail()
    (warning,) = warnings(run)
    assert warning.startswith("kda2: warning: remote cache ") and warning.endswith("; building locally"), warning
    assert len(run.compiled()) == len(co.variant_ids()), run.tools_run()
    # one request per worker (-j2) at most; a request is two attempts, and botocore opens a fresh connection
    # for a dropped one, 3 connections in all (left to ask on, a cold build asks for all 22 nodes: ~70)
    assert 1 <= len(seen) <= 2 * 3, f"{len(seen)} connections to a store that failed at once"
    assert co.outputs() == pushed.outputs


# ---- 5. no remote configured: not a word about one ------------------------------------------------

def test_no_remote_configured_prints_nothing_about_it(pushed: Pushed, tmp_path: Path):
    n = without_cubin_entries(pushed, tmp_path / "cache")
    co = RemoteCheckout(tmp_path / "repo", tmp_path / "cache", None)
    assert not any(k.startswith(("KDA2_REMOTE", "AWS_")) for k in co.env())
    run = co.scons()
    assert run.rc == 0, run.tail()
    assert len(run.linked()) == n and run.compiled() == [], run.tools_run()
    assert "remote" not in (run.stdout + run.stderr).lower(), run.tail()
    assert warnings(run) == [], run.tail()
    assert co.outputs() == pushed.outputs
