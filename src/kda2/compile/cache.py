"""A CacheDir that never hands out a corrupted entry.

SCons keys cache entries by build signature and copies them back without looking at their bytes, so
a flipped bit in cache/ would silently become a "built" kernel. Here every entry gets a sidecar
`<entry>.sha256`, written (atomically) right after the entry appears; on retrieval the copied file is
hashed and compared. A mismatch deletes the local copy and the bad entry and reports it, and SCons
then builds the target as if the cache had missed. An entry without its sidecar (a push still in
flight from another build sharing this cache) is simply a miss, never deleted.
"""
from __future__ import annotations

import os
import sys

import SCons.CacheDir

from kda2.artifact.manifest import sha256_file


class VerifiedCacheDir(SCons.CacheDir.CacheDir):
    corrupt_seen = 0

    def retrieve(self, node) -> bool:
        if not self.is_enabled():
            return False
        _, cachefile = self.cachepath(node)
        if cachefile is None or not os.path.exists(cachefile):
            return False
        try:
            with open(cachefile + ".sha256") as f:
                expected = f.read().strip()
        except OSError:
            return False  # not yet verifiable: treat as a miss and build
        if not super().retrieve(node):
            return False
        local = node.get_internal_path()
        actual = sha256_file(local)
        if actual == expected:
            return True
        VerifiedCacheDir.corrupt_seen += 1
        sys.stderr.write(f"kda2: warning: cache entry {cachefile} for {local} is corrupt (sha256 {actual[:16]}… "
                         f"!= recorded {expected[:16]}…); removed it, rebuilding {local}\n")
        for p in (local, cachefile):
            try:
                os.remove(p)
            except OSError:
                pass
        return False

    def push(self, node):
        if self.is_readonly() or not self.is_enabled():
            return None
        _, cachefile = self.cachepath(node)
        existed = cachefile is not None and os.path.exists(cachefile)
        result = super().push(node)  # SCons skips the copy when the entry exists already
        # The sidecar records the entry as it lies in the cache, written once by whoever created the
        # entry: a later push of the same key (another checkout, --cache-force) must not re-pair it.
        if cachefile is not None and not existed and os.path.isfile(cachefile) \
                and not os.path.exists(cachefile + ".sha256"):
            tmp = f"{cachefile}.sha256.{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(sha256_file(cachefile) + "\n")
            os.replace(tmp, cachefile + ".sha256")
        return result
