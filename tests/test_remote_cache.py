"""The shared remote cache (kda2.compile.remote) against a real S3-compatible server.

moto's server mode runs in this process on 127.0.0.1 (an OS-chosen port) for the module and is stopped at
its end; every build is a real SCons subprocess in a throwaway checkout with its own local cache and the
counting nvcc/nvlink/g++ wrappers of tests/test_build_pipeline.py, so "0 compiler calls" is counted.
Each test that writes to the store uses its own key prefix.
"""
from __future__ import annotations

import contextlib
import hashlib
import http.client
import http.server
import logging
import re
import shutil
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

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


def test_malformed_remote_is_said_even_when_nothing_is_built(pushed: Pushed, tmp_path: Path):
    """An up-to-date tree (`scons -q`) never misses locally, so the remote was never read and a malformed
    KDA2_REMOTE_CACHE went unsaid; it is read (no request made) as the graph is declared."""
    without_cubin_entries(pushed, tmp_path / "cache")
    co = RemoteCheckout(tmp_path / "repo", tmp_path / "cache", {"KDA2_REMOTE_CACHE": "http://x"})
    assert co.scons().rc == 0
    run = co.scons("-q")
    assert run.rc == 0, run.tail()
    assert warnings(run) == ["kda2: warning: remote cache: KDA2_REMOTE_CACHE='http://x' is not s3://bucket[/prefix]; "
                             "building locally"], run.tail()


# ---- 6. read-only credentials: a denied put stops pushing, fetching goes on ---------------------------

_ACCESS_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                  b'<Message>Access Denied</Message><RequestId>kda2-test</RequestId></Error>')


@contextlib.contextmanager
def denying_proxy(endpoint: str, deny: tuple[str, ...]):
    """An HTTP proxy in front of the moto server that answers the methods in `deny` with S3's 403 AccessDenied
    (what a key without s3:PutObject gets for PUT) and forwards everything else. Yields its endpoint URL."""
    target = urlparse(endpoint)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # no request log on stderr
            pass

        def _serve(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.command in deny:
                status, headers, data = 403, [("Content-Type", "application/xml")], _ACCESS_DENIED
            else:
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
                try:
                    conn.request(self.command, self.path, body=body or None,
                                 headers={k: v for k, v in self.headers.items() if k.lower() != "expect"})
                    resp = conn.getresponse()
                    data = resp.read()
                    status = resp.status
                    headers = [(k, v) for k, v in resp.getheaders()
                               if k.lower() not in ("transfer-encoding", "connection", "content-length")]
                finally:
                    conn.close()
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)) if self.command != "HEAD" or status != 200
                             else next((v for k, v in headers if k.lower() == "content-length"), "0"))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _serve

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_read_only_credentials_stop_pushing_but_keep_fetching(pushed: Pushed, store: Store, tmp_path: Path):
    """The store holds everything but one kernel object, and the key may read but not write: that kernel is
    compiled, its put denied (one warning), and everything after it, its cubin included, still comes from
    the store."""
    prefix = "readonly"
    store.copy_prefix(pushed.prefix, prefix)
    vid = pushed.checkout.variant_ids()[0]
    (obj,) = [p for p in pushed.checkout.build.rglob(f"*_{vid}.o") if p.is_file()]
    (key,) = [k for k, data in store.objects(prefix).items() if data == obj.read_bytes()]
    store.s3.delete_object(Bucket=BUCKET, Key=key)
    n_objects = len(store.objects(prefix))

    with denying_proxy(store.endpoint, deny=("PUT",)) as endpoint:
        co = RemoteCheckout(tmp_path / "repo", tmp_path / "cache",
                            store.env(prefix) | {"KDA2_REMOTE_CACHE_ENDPOINT": endpoint})
        run = co.scons()
    assert run.rc == 0, run.tail()
    (warning,) = warnings(run)
    assert "PutObject denied (AccessDenied" in warning, warning
    assert warning.endswith("read-only credentials: fetching, not pushing"), warning
    assert "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY from the environment" in warning, warning
    assert run.compiled() == [vid], run.tools_run()          # the one missing object, built here
    assert run.linked() == [] and run.host() == [], run.tools_run()  # the rest, its cubin too: fetched
    hits, n_pushed, rest = summary(run)
    assert hits == n_objects and n_pushed == 0, run.stdout[-2000:]
    assert "not pushing (read-only credentials)" in rest and "disabled" not in rest, rest
    assert key not in store.objects(prefix)
    assert co.outputs() == pushed.outputs


# ---- 7. direct checks of kda2.compile.remote against the same server ----------------------------------

@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """This process's AWS environment, emptied (no credentials file, no instance metadata probe); returns a
    setter for the variables a test wants."""
    import os
    for k in list(os.environ):
        if k.startswith(("AWS_", "KDA2_REMOTE_CACHE")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    def set_env(**kv: str) -> None:
        for k, v in kv.items():
            monkeypatch.setenv(k, v)
    return set_env


def remote_cache(url: str, endpoint: str):
    from kda2.compile.remote import RemoteCache
    import os
    return RemoteCache(url, endpoint, dict(os.environ))


def stderr_lines(capsys: pytest.CaptureFixture) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def test_credentials_come_from_a_profile_too(store: Store, aws_env, tmp_path: Path, capsys):
    """boto3's usual lookup: AWS_PROFILE and a credentials file give write access (no env keys needed)."""
    creds = tmp_path / "credentials"
    creds.write_text("[kda2-ci]\naws_access_key_id = fromprofile1234\naws_secret_access_key = testing\n")
    aws_env(AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_PROFILE="kda2-ci")
    rc = remote_cache(f"s3://{BUCKET}/profile", store.endpoint)
    entry = tmp_path / "entry"
    entry.write_bytes(b"built by a profile's key")
    sig = sha256(b"profile-sig")
    rc.push(sig, str(entry), sha256(entry.read_bytes()))
    assert stderr_lines(capsys) == []
    assert rc.pushed == 1 and store.recorded(rc.key(sig)) == sha256(entry.read_bytes())
    assert rc.creds == "credentials profile 'kda2-ci' of the shared credentials file (key id …1234)", rc.creds


def test_denied_get_names_the_credentials_and_turns_the_remote_off(store: Store, aws_env, tmp_path: Path,
                                                                   capsys):
    """A denied read is today's failure (remote off, one warning), and the warning says which credentials
    were used: here a profile's, which the old env-keys-only warning could not have named."""
    creds = tmp_path / "credentials"
    creds.write_text("[reader]\naws_access_key_id = readerkey9876\naws_secret_access_key = testing\n")
    aws_env(AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_PROFILE="reader")
    with denying_proxy(store.endpoint, deny=("GET", "HEAD")) as endpoint:
        rc = remote_cache(f"s3://{BUCKET}/denied-get", endpoint)
        assert rc.fetch(sha256(b"x"), str(tmp_path / "cache" / "x"), "x.cubin") is False
        assert rc.fetch(sha256(b"y"), str(tmp_path / "cache" / "y"), "y.cubin") is False  # not asked again
    (warning,) = stderr_lines(capsys)
    assert "GetObject denied (AccessDenied" in warning and warning.endswith("; building locally"), warning
    assert "profile 'reader' of the shared credentials file (key id …9876)" in warning, warning
    assert rc.disabled and not rc.push_denied


def test_remote_url_without_bucket_is_refused_in_one_line(store: Store, aws_env, capsys):
    from kda2.compile import remote
    rc = remote_cache("s3://", store.endpoint)
    (warning,) = stderr_lines(capsys)
    assert warning == ("kda2: warning: remote cache: KDA2_REMOTE_CACHE='s3://' names no bucket: "
                       "expected s3://bucket[/prefix]; building locally"), warning
    assert rc.disabled and rc.fetch("ab" * 32, "/nonexistent/x", "x") is False
    remote._report(rc)  # at exit: the warning said it all, no "remote cache s3:: 0 hits" line
    assert capsys.readouterr().out == ""


def test_invalid_bucket_name_is_named_briefly(store: Store, aws_env, tmp_path: Path, capsys):
    rc = remote_cache("s3://My Bucket!/p", store.endpoint)
    assert rc.fetch("ab" * 32, str(tmp_path / "x"), "x") is False
    (warning,) = stderr_lines(capsys)
    assert "'My Bucket!' is not a bucket name (1-255 letters, digits" in warning, warning
    assert "regex" not in warning and len(warning) < 240, warning


def test_object_without_sha256_metadata_is_foreign_not_corrupt(store: Store, aws_env, tmp_path: Path, capsys):
    aws_env(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    rc = remote_cache(f"s3://{BUCKET}/foreign", store.endpoint)
    sig = sha256(b"foreign-sig")
    store.s3.put_object(Bucket=BUCKET, Key=rc.key(sig), Body=b"someone else's bytes")  # no metadata
    dest = tmp_path / "cache" / sig[:2] / sig
    assert rc.fetch(sig, str(dest), "x.cubin") is False and not dest.exists()
    (warning,) = stderr_lines(capsys)
    assert warning == (f"kda2: warning: remote cache object s3://{BUCKET}/{rc.key(sig)} for x.cubin was not "
                       f"written by kda2 (no sha256 metadata); not used, rebuilding x.cubin"), warning
    assert store.objects("foreign")[rc.key(sig)] == b"someone else's bytes"  # not ours to delete
    built = tmp_path / "built"
    built.write_bytes(b"kda2's bytes")
    rc.push(sig, str(built), sha256(built.read_bytes()))  # ... but ours to replace
    assert store.recorded(rc.key(sig)) == sha256(b"kda2's bytes")
    assert "1 not written by kda2" in rc.summary() and "corrupt" not in rc.summary(), rc.summary()
