"""The shared remote cache: an S3-compatible object store behind the local CacheDir (docs/DESIGN.md §4).

Configured only from the environment, read once per SCons run:

  KDA2_REMOTE_CACHE           s3://bucket[/prefix]  (unset: no remote; nothing is imported or printed)
  KDA2_REMOTE_CACHE_ENDPOINT  http(s)://host:port of a MinIO / moto / other S3-compatible server (unset: AWS)
  AWS_DEFAULT_REGION / AWS_REGION (default us-east-1)
  credentials: boto3's usual chain, looked up once when the store is first asked: AWS_ACCESS_KEY_ID +
  AWS_SECRET_ACCESS_KEY [+ AWS_SESSION_TOKEN], AWS_PROFILE and the shared credentials / config files (SSO,
  assume-role, credential_process), a container or instance role (the instance metadata probe is boto3's:
  1 s, one attempt unless AWS_METADATA_SERVICE_* say otherwise; AWS_EC2_METADATA_DISABLED=true skips it).
  An assume-role profile that wants an MFA code is refused, never prompted for: a build must not wait on a tty.

Without credentials the remote is read-only and its requests are unsigned (a public-read bucket). With
credentials that may read but not write (PutObject denied: "CI writes, developers read"), the first denied
put stops pushing for the run, with one warning, and fetching goes on.

An object is `<prefix>/<sig[:2]>/<sig>` (sig = the SCons build signature that names the local entry) and
carries its sha256 and file mode as object metadata, so bytes and checksum arrive together in one
put-object: never a partial object, never an object without its checksum. A put is conditional
(`If-None-Match: *`) after a HEAD, so an existing object is never overwritten, except one this run refused
as corrupt or one without the sha256 metadata. A download goes to a temporary name, is hashed against the
recorded sha256 and only then linked into the local cache with its sidecar; a mismatch is refused with a
warning and the object deleted. An object without sha256 metadata was not written by kda2: it is reported
as such and not used (nor deleted); the node is rebuilt and, with write access, pushed over it.

Any failure of the store (refused connection, timeout, missing bucket, bad credentials, ...) prints one
line `kda2: warning: remote cache ...: <why>; building locally` and switches the remote off for the rest of
the run: the remote can make a build faster, never make it fail. A denied request names the credentials it
was made with. A KDA2_REMOTE_CACHE that is not s3://bucket[/prefix] (or names an impossible bucket) is
refused with one warning before anything is imported. At exit one summary line reports hits and pushes, if
the remote was consulted at all.
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
_DENIED = ("AccessDenied", "403", "Forbidden")
# botocore's own check of a bucket name (so nothing it would send is refused here); S3 itself is stricter
_BUCKET_RE = re.compile(r"[a-zA-Z0-9.\-_]{1,255}")
_BUCKET_RULE = "1-255 letters, digits, '.', '-', '_'; on AWS 3-63 lowercase letters, digits, '.', '-'"


class RemoteCache:
    """One S3 prefix. Thread-safe: SCons retrieves and pushes from its worker threads."""

    def __init__(self, url: str, endpoint: str | None, env: dict[str, str]):
        self.url, self.endpoint = url.rstrip("/"), endpoint or None
        self.hits = self.pushed = self.present = self.refused = self.foreign = 0
        self.disabled: str | None = None
        self.consulted = False
        self.invalid = False  # a KDA2_REMOTE_CACHE refused as it stands: never consulted, no summary
        self.writable: bool | None = None  # credentials found (known once the client exists)
        self.push_denied: str | None = None  # why pushing stopped for the run (fetching goes on)
        self.creds = "not looked up yet"  # which credentials the requests carry, for a "denied" warning
        self._lock = threading.Lock()
        self._refused_keys: set[str] = set()
        self._client: Any = None
        self._region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or "us-east-1"
        self.bucket, self.prefix = "", ""
        u = urlparse(url)
        if u.scheme != "s3" or not u.netloc:
            self._refuse(f"{ENV_URL}={url!r} names no bucket: expected s3://bucket[/prefix]"
                         if u.scheme == "s3" else f"{ENV_URL}={url!r} is not s3://bucket[/prefix]")
        elif not _BUCKET_RE.fullmatch(u.netloc):
            self._refuse(f"{ENV_URL}={url!r}: {u.netloc!r} is not a bucket name ({_BUCKET_RULE})")
        else:
            self.bucket, self.prefix = u.netloc, u.path.strip("/")

    # ---- plumbing ----------------------------------------------------------------------------------

    def where(self) -> str:
        if self.invalid:
            return ""
        return " " + self.url + (f" at {self.endpoint}" if self.endpoint else "")

    def _refuse(self, why: str) -> None:
        self.invalid = True
        self._disable(why)

    def key(self, sig: str) -> str:
        return "/".join(p for p in (self.prefix, sig[:2].upper(), sig) if p)

    def _disable(self, why: str) -> None:
        with self._lock:
            if self.disabled is not None:
                return
            self.disabled = why
        sys.stderr.write(f"kda2: warning: remote cache{self.where()}: {why}; building locally\n")
        sys.stderr.flush()

    def client(self):
        with self._lock:
            if self._client is None:
                import boto3  # only when a remote is configured: a plain build never imports it
                from botocore import UNSIGNED
                from botocore.config import Config
                session = boto3.session.Session(region_name=self._region)
                _no_mfa_prompt(session)
                creds = session.get_credentials()  # boto3's chain; raises on a broken profile (-> warning)
                frozen = creds.get_frozen_credentials() if creds is not None else None
                self.writable = frozen is not None and bool(frozen.access_key and frozen.secret_key)
                self.creds = _describe(creds, frozen, session.profile_name)
                cfg = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                             retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
                             s3={"addressing_style": "path"} if self.endpoint else {},
                             signature_version=None if self.writable else UNSIGNED)
                self._client = session.client("s3", endpoint_url=self.endpoint, config=cfg)
            return self._client

    def _usable(self) -> bool:
        if self.disabled is not None:
            return False
        self.consulted = True
        return True

    def _failed(self, e: BaseException) -> None:
        self._disable(_why(e, self.creds))

    def _stop_pushing(self, e: BaseException) -> None:
        """A put denied: these credentials may read, not write. Fetching goes on; one warning per run."""
        with self._lock:
            if self.push_denied is not None:
                return
            self.push_denied = "read-only credentials"
        sys.stderr.write(f"kda2: warning: remote cache{self.where()}: PutObject denied ({_denial(e)}) with "
                         f"{self.creds}: read-only credentials: fetching, not pushing\n")
        sys.stderr.flush()

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
        if not expected:  # no checksum to verify it by: not one of ours (a push overwrites it), left alone
            _remove(tmp)
            with self._lock:
                self.foreign += 1
            sys.stderr.write(f"kda2: warning: remote cache object s3://{self.bucket}/{key} for {what} was not "
                             f"written by kda2 (no sha256 metadata); not used, rebuilding {what}\n")
            return False
        if actual != expected:
            _remove(tmp)
            with self._lock:
                self.refused += 1
                self._refused_keys.add(key)
            recorded = f"recorded {expected[:16]}…"
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
        if self.writable is False or self.push_denied is not None or not self._usable():
            return
        key = self.key(sig)
        try:
            c = self.client()
            if not self.writable:  # no credentials found: read-only, unsigned
                return
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
                if _code(e) in _DENIED:  # may read, may not write: stop pushing, keep fetching
                    self._stop_pushing(e)
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
        if self.foreign:
            parts.append(f"{self.foreign} not written by kda2")
        if self.push_denied:
            parts.append(f"not pushing ({self.push_denied})")
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
    if (rc.consulted or rc.disabled) and not rc.invalid:  # a refused URL: its one warning said it all
        sys.stdout.write(rc.summary() + "\n")
        sys.stdout.flush()


# ---- helpers -------------------------------------------------------------------------------------

def _code(e: BaseException) -> str:
    resp = getattr(e, "response", None)
    if isinstance(resp, dict):
        err = resp.get("Error") or {}
        return str(err.get("Code") or resp.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return ""


def _message(e: BaseException) -> str:
    resp = getattr(e, "response", None)
    err = (resp.get("Error") or {}) if isinstance(resp, dict) else {}
    return " ".join(str(err.get("Message") or "").split())


def _denial(e: BaseException) -> str:
    """A denied request's code and message, as a warning quotes them ("AccessDenied: Access Denied")."""
    code, msg = _code(e), _message(e)
    return f"{code}{': ' + msg if msg and msg != 'Forbidden' else ''}"


def _describe(creds: Any, frozen: Any, profile: str | None) -> str:
    """Which credentials boto3's chain found, for a warning: the source and the key id's last 4 characters."""
    if frozen is None or not frozen.access_key:
        return ("no credentials (unsigned requests; looked for AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                "AWS_PROFILE and the credentials files, a container or instance role)")
    method = getattr(creds, "method", "") or "explicit"
    source = {"env": "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY from the environment",
              "shared-credentials-file": f"profile {profile!r} of the shared credentials file",
              "config-file": f"profile {profile!r} of the AWS config file",
              "assume-role": f"the role assumed by profile {profile!r}",
              "sso": f"the SSO login of profile {profile!r}",
              "custom-process": f"credential_process of profile {profile!r}",
              "container-role": "the container role", "iam-role": "the instance role",
              "assume-role-with-web-identity": "the web identity role"}.get(method, f"{method} credentials")
    return f"credentials {source} (key id …{frozen.access_key[-4:]})"


def _no_mfa_prompt(session: Any) -> None:
    """An assume-role profile with mfa_serial would prompt on the terminal in the middle of a build (holding
    the client lock): answer it with an error instead, which becomes the usual one warning."""
    def refuse(_prompt: str = "") -> str:
        raise RuntimeError("the profile's role wants an MFA code; a build does not prompt for one "
                           "(use credentials that need none, e.g. cached or exported keys)")
    try:
        provider = session._session.get_component("credential_provider").get_provider("assume-role")
        provider._prompter = refuse
    except Exception:  # another botocore layout: leave it
        pass


def _why(e: BaseException, creds: str = "") -> str:
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
        if code in _DENIED:
            return (f"{op} denied ({_denial(e)})"
                    f"{' with ' + creds if creds else ''}: check those credentials and the bucket policy "
                    f"(without s3:ListBucket a missing key answers 403 too)")
        if code in ("404", "NotFound"):
            return f"{op} answered a bare 404, not NoSuchKey: is this an S3 endpoint?"
        msg = _message(e)
        return f"{op} failed ({code}{': ' + msg if msg else ''})"
    text = " ".join(str(e).split())
    if name == "ParamValidationError" and "bucket name" in text.lower():  # not botocore's regex in a warning
        return f"invalid bucket name ({_BUCKET_RULE})"
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
