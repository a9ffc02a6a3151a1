"""The shared remote cache: an S3-compatible object store behind the local CacheDir (docs/DESIGN.md §4).

Configured only from the environment, read once per SCons run:

  KDA2_REMOTE_CACHE           s3://bucket[/prefix]  (unset: no remote; nothing is imported or printed)
  KDA2_REMOTE_CACHE_ENDPOINT  http(s)://host:port of a MinIO / moto / other S3-compatible server (unset: AWS)
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, [AWS_SESSION_TOKEN], AWS_DEFAULT_REGION (default us-east-1)

Without AWS credentials in the environment the remote is read-only and its requests are unsigned; no
credentials file, profile or instance metadata is consulted.

An object is `<prefix>/<sig[:2]>/<sig>` (sig = the SCons build signature that names the local entry) and
carries its sha256 and file mode as object metadata, so bytes and checksum arrive together in one
put-object: never a partial object, never an object without its checksum. A put is conditional
(`If-None-Match: *`) after a HEAD, so an existing object is never overwritten, except one this run refused
as corrupt. A download goes to a temporary name, is hashed against the recorded sha256 and only then
linked into the local cache with its sidecar; a mismatch is refused with a warning and the object deleted.

Any failure of the store (refused connection, timeout, missing bucket, bad credentials, ...) prints one
line `kda2: warning: remote cache ...: <why>; building locally` and switches the remote off for the rest of
the run: the remote can make a build faster, never make it fail. At exit one summary line reports hits and
pushes, if the remote was consulted at all.
"""
from __future__ import annotations

import atexit
import base64
import hashlib
import os
import re
import sys
import threading
from typing import Any
from urllib.parse import urlparse

ENV_URL = "KDA2_REMOTE_CACHE"
ENV_ENDPOINT = "KDA2_REMOTE_CACHE_ENDPOINT"
CONNECT_TIMEOUT_S = 2
READ_TIMEOUT_S = 5  # between two reads of a response, not for the whole object
MAX_ATTEMPTS = 2  # botocore "standard" mode: the first try and one retry
_MISSING = ("NoSuchKey", "404", "NotFound")  # HEAD has no body: a bare 404 is its "not here"
_RACE_LOST = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")


class RemoteCache:
    """One S3 prefix. Thread-safe: SCons retrieves and pushes from its worker threads."""

    def __init__(self, url: str, endpoint: str | None, env: dict[str, str]):
        self.url, self.endpoint = url.rstrip("/"), endpoint or None
        self.hits = self.pushed = self.present = self.refused = 0
        self.disabled: str | None = None
        self.consulted = False
        self._lock = threading.Lock()
        self._refused_keys: set[str] = set()
        self._client: Any = None
        u = urlparse(url)
        if u.scheme != "s3" or not u.netloc:
            self._disable(f"{ENV_URL}={url!r} is not s3://bucket[/prefix]")
            self.bucket, self.prefix = "", ""
        else:
            self.bucket, self.prefix = u.netloc, u.path.strip("/")
        key_id, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
        self.writable = bool(key_id and secret)
        self._creds = dict(aws_access_key_id=key_id, aws_secret_access_key=secret,
                           aws_session_token=env.get("AWS_SESSION_TOKEN")) if self.writable else None
        self._region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or "us-east-1"

    # ---- plumbing ----------------------------------------------------------------------------------

    def where(self) -> str:
        return self.url + (f" at {self.endpoint}" if self.endpoint else "")

    def key(self, sig: str) -> str:
        return "/".join(p for p in (self.prefix, sig[:2].upper(), sig) if p)

    def _disable(self, why: str) -> None:
        with self._lock:
            if self.disabled is not None:
                return
            self.disabled = why
        sys.stderr.write(f"kda2: warning: remote cache {self.where()}: {why}; building locally\n")
        sys.stderr.flush()

    def client(self):
        with self._lock:
            if self._client is None:
                import boto3  # only when a remote is configured: a plain build never imports it
                from botocore import UNSIGNED
                from botocore.config import Config
                cfg = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                             retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
                             s3={"addressing_style": "path"} if self.endpoint else {},
                             signature_version=None if self.writable else UNSIGNED)
                session = boto3.session.Session(region_name=self._region, **(self._creds or {}))
                self._client = session.client("s3", endpoint_url=self.endpoint, config=cfg)
            return self._client

    def _usable(self) -> bool:
        if self.disabled is not None:
            return False
        self.consulted = True
        return True

    def _failed(self, e: BaseException) -> None:
        self._disable(_why(e))

    # ---- the two operations ------------------------------------------------------------------------

    def fetch(self, sig: str, dest: str, what: str) -> bool:
        """Place the object for `sig` at the local cache path `dest` (and `dest`.sha256) if the store has it
        and its bytes match its recorded sha256. True: `dest` now exists (ours or a concurrent writer's)."""
        if not self._usable():
            return False
        key = self.key(sig)
        tmp = f"{dest}.remote.{os.getpid()}.{threading.get_ident()}"
        try:
            try:
                obj = self.client().get_object(Bucket=self.bucket, Key=key)
            except Exception as e:
                if _code(e) == "NoSuchKey":  # a store's "not here"; a bare 404 to a GET is not one
                    return False
                raise
            expected = (obj.get("Metadata") or {}).get("sha256", "")
            h = hashlib.sha256()
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(tmp, "wb") as f:
                for chunk in obj["Body"].iter_chunks(1 << 20):
                    h.update(chunk)
                    f.write(chunk)
            actual = h.hexdigest()
        except Exception as e:
            _remove(tmp)
            self._failed(e)
            return False
        if actual != expected:
            _remove(tmp)
            with self._lock:
                self.refused += 1
                self._refused_keys.add(key)
            recorded = f"recorded {expected[:16]}…" if expected else "no sha256 recorded"
            deleted = "deleted it" if self._delete(key) else "could not delete it"
            sys.stderr.write(f"kda2: warning: remote cache object s3://{self.bucket}/{key} for {what} is corrupt "
                             f"(sha256 {actual[:16]}… != {recorded}); {deleted}, rebuilding {what}\n")
            return False
        try:
            os.chmod(tmp, _mode(obj.get("Metadata") or {}))
            side_tmp = f"{tmp}.sha256"
            with open(side_tmp, "w") as f:
                f.write(actual + "\n")
            if not os.path.exists(dest):  # a sidecar outliving its (deleted) entry must not pair with ours
                _remove(dest + ".sha256")
            try:
                os.link(tmp, dest)  # never replaces an entry another build placed meanwhile
                created = True
            except FileExistsError:
                created = False
            except OSError:  # no hard links on this file system
                created = not os.path.exists(dest)
                if created:
                    os.replace(tmp, dest)
            if created:  # we made the entry, so we pair it (a sidecar left by a deleted entry is replaced)
                os.replace(side_tmp, dest + ".sha256")
        except OSError as e:
            sys.stderr.write(f"kda2: warning: remote cache: cannot place {key} into the local cache ({e}); "
                             f"building {what}\n")
            return False
        finally:
            _remove(tmp)
            _remove(f"{tmp}.sha256")
        if created:
            with self._lock:
                self.hits += 1
        return True

    def push(self, sig: str, path: str, digest: str) -> None:
        """Upload `path` (whose sha256 is `digest`) as the object for `sig`, unless a good one is there."""
        if not self.writable or not self._usable():
            return
        key = self.key(sig)
        try:
            c = self.client()
            overwrite = key in self._refused_keys
            if not overwrite:
                try:
                    head = c.head_object(Bucket=self.bucket, Key=key)
                except Exception as e:
                    if _code(e) not in _MISSING:
                        raise
                else:
                    if (head.get("Metadata") or {}).get("sha256"):
                        with self._lock:
                            self.present += 1
                        return
                    overwrite = True  # not one of ours: no checksum to verify it by
            with open(path, "rb") as f:
                data = f.read()
            if hashlib.sha256(data).hexdigest() != digest:
                return  # changed under us: push nothing rather than something unverified
            kw = dict(Bucket=self.bucket, Key=key, Body=data,
                      Metadata={"sha256": digest, "mode": "%o" % (os.stat(path).st_mode & 0o777)},
                      ChecksumSHA256=base64.b64encode(bytes.fromhex(digest)).decode())
            if not overwrite:
                kw["IfNoneMatch"] = "*"
            try:
                c.put_object(**kw)
            except Exception as e:
                if _code(e) in _RACE_LOST:  # another writer put the same key first: same content by construction
                    with self._lock:
                        self.present += 1
                    return
                raise
            with self._lock:
                self.pushed += 1
                self._refused_keys.discard(key)
        except Exception as e:
            self._failed(e)

    def _delete(self, key: str) -> bool:
        try:
            self.client().delete_object(Bucket=self.bucket, Key=key)
            return True
        except Exception:
            return False

    def summary(self) -> str:
        parts = [f"{self.hits} hit{'s' * (self.hits != 1)}", f"{self.pushed} pushed"]
        if self.present:
            parts.append(f"{self.present} already there")
        if self.refused:
            parts.append(f"{self.refused} refused as corrupt")
        off = f" (disabled: {self.disabled})" if self.disabled else ""
        return f"kda2: remote cache {self.url}: {', '.join(parts)}{off}"


# ---- the one instance of this process ---------------------------------------------------------------

_instance: RemoteCache | None = None
_resolved = False
_init_lock = threading.Lock()


def get() -> RemoteCache | None:
    """The remote configured in the environment, created on first use; None if there is none."""
    global _instance, _resolved
    if _resolved:
        return _instance
    with _init_lock:
        if not _resolved:
            url = os.environ.get(ENV_URL, "").strip()
            if url:
                _instance = RemoteCache(url, os.environ.get(ENV_ENDPOINT, "").strip() or None, dict(os.environ))
                if _instance.disabled is None:
                    try:
                        import boto3  # noqa: F401
                    except ImportError:
                        _instance._disable("boto3 is not installed (pip install 'kda2[build]')")
                atexit.register(_report, _instance)
            _resolved = True
    return _instance


def _report(rc: RemoteCache) -> None:
    if rc.consulted or rc.disabled:
        sys.stdout.write(rc.summary() + "\n")
        sys.stdout.flush()


# ---- helpers -------------------------------------------------------------------------------------

def _code(e: BaseException) -> str:
    resp = getattr(e, "response", None)
    if isinstance(resp, dict):
        err = resp.get("Error") or {}
        return str(err.get("Code") or resp.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return ""


def _why(e: BaseException) -> str:
    name = type(e).__name__
    if name == "EndpointConnectionError":  # the urllib3 error inside names the errno; the URL is in the warning
        m = re.search(r"\[Errno -?\d+\] [^'\")]+", str(getattr(e, "kwargs", {}).get("error", "")))
        return f"cannot connect ({m.group(0).strip() if m else 'unreachable'})"
    if name == "ConnectTimeoutError":
        return f"no connection within {CONNECT_TIMEOUT_S} s"
    if name == "ReadTimeoutError":
        return f"no answer within {READ_TIMEOUT_S} s"
    code = _code(e)
    resp = getattr(e, "response", None)
    if code and isinstance(resp, dict):  # an answer from the server, but not one a healthy store gives
        op = getattr(e, "operation_name", "request")
        msg = " ".join(str((resp.get("Error") or {}).get("Message") or "").split())
        if code in ("403", "AccessDenied", "Forbidden"):
            return (f"{op} denied ({code}{': ' + msg if msg and msg != 'Forbidden' else ''}): check AWS_ACCESS_KEY_ID, "
                    f"AWS_SECRET_ACCESS_KEY and the bucket policy (without s3:ListBucket a missing key answers 403 too)")
        if code in ("404", "NotFound"):
            return f"{op} answered a bare 404, not NoSuchKey: is this an S3 endpoint?"
        return f"{op} failed ({code}{': ' + msg if msg else ''})"
    text = " ".join(str(e).split())
    return f"{name}: {text}" if text else name


def _mode(meta: dict[str, str]) -> int:
    try:
        mode = int(meta.get("mode", "644"), 8)
    except ValueError:
        mode = 0o644
    return (mode & 0o755) | 0o600  # owner can always read and write; nothing beyond rwxr-xr-x


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
