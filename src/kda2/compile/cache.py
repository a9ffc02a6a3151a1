"""A CacheDir that never hands out a corrupted entry.

SCons keys cache entries by build signature and copies them back without looking at their bytes, so
a flipped bit in cache/ would silently become a "built" kernel. Here every entry gets a sidecar
`<entry>.sha256`, written (atomically) right after the entry appears; on retrieval the copied file is
hashed and compared. A mismatch deletes the local copy and the bad entry and reports it, and SCons
then builds the target as if the cache had missed. A sidecar's mtime is its entry's last use (set on push and on
every verified retrieval): `kda2 cache prune` removes the least recently used (kda2.tools.cache). An entry without its sidecar (a push still in
flight from another build sharing this cache) is simply a miss, never deleted; the build that then makes the
target again records the sidecar when the entry holds exactly its bytes, so a push that died between the two
does not leave a miss for good.

With KDA2_REMOTE_CACHE set, an S3-compatible object store is a second level (kda2.compile.remote): a
local miss asks the store, whose verified object becomes a local entry with its sidecar before SCons copies
it out as usual; whatever is built and pushed here is pushed there too. A store that fails is switched off
for the run with one warning; the build goes on locally.
"""
from __future__ import annotations

import os
import sys

import SCons.Action
import SCons.CacheDir
import SCons.Util

from kda2.artifact.manifest import sha256_file
from kda2.compile import remote


class VerifiedCacheDir(SCons.CacheDir.CacheDir):
    corrupt_seen = 0
    #: The build tree's path in the SCons top (compile/graph.py declare sets it). SCons keys an entry by the node's
    #: path too (it tells apart the targets of one action); a node under the tree is keyed by its path inside it, so
    #: the routed tree and the every-candidate tree (docs/DESIGN.md §2.5) share entries.
    tree: str | None = None

    def __init__(self, path) -> None:
        super().__init__(path)
        self._sigs: dict = {}

    def cachepath(self, node) -> tuple:
        if not self.is_enabled():
            return None, None
        sig = self._sigs.get(node)
        if sig is None:
            sig = self._sigs[node] = tree_bsig(node, self.tree)
        cachedir = os.path.join(self.path, sig[:self.config["prefix_len"]].upper())
        return cachedir, os.path.join(cachedir, sig)

    def retrieve(self, node) -> bool:
        if not self.is_enabled():
            return False
        _, cachefile = self.cachepath(node)
        if cachefile is None:
            return False
        if os.path.exists(cachefile):
            if self._retrieve_local(node, cachefile):
                return True
            if os.path.exists(cachefile):  # there but not verifiable yet (a push in flight): a miss
                return False
        return self._fetch_remote(node, cachefile) and self._retrieve_local(node, cachefile)

    @staticmethod
    def _fetch_remote(node, cachefile: str) -> bool:
        """A local miss: let the remote (if any) place its verified entry at `cachefile`."""
        rc = remote.get()
        if rc is None or not SCons.Action.execute_actions:  # scons -n must not write into the cache
            return False
        return rc.fetch(os.path.basename(cachefile), cachefile, node.get_internal_path())

    def _retrieve_local(self, node, cachefile: str) -> bool:
        try:
            with open(cachefile + ".sha256") as f:
                expected = f.read().strip()
        except OSError:
            return False  # not yet verifiable: treat as a miss and build
        if not super().retrieve(node):
            return False
        if not SCons.Action.execute_actions:
            # scons -n / -q: SCons reports the retrieval and copies nothing, so the local file is whatever was
            # there (another checkout's output, or none): nothing to verify, and the entry must not be touched
            return True
        local = node.get_internal_path()
        actual = sha256_file(local)
        if actual == expected:
            try:   # the sidecar's mtime is the entry's last use: what `kda2 cache prune` keeps (kda2.tools.cache)
                os.utime(cachefile + ".sha256")
            except OSError:
                pass
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
            _write_sidecar(cachefile, sha256_file(cachefile))
        elif cachefile is not None and existed and not os.path.exists(cachefile + ".sha256"):
            self._pair_orphan(node, cachefile)
        self._push_remote(node, cachefile)
        return result

    @staticmethod
    def _pair_orphan(node, cachefile: str) -> None:
        """An entry with no sidecar that this build has just made again (its retrieval missed): a push still in
        flight elsewhere, or one that died between the entry and its sidecar, which would otherwise miss forever.
        When the entry holds exactly the bytes built here (the same key: the same inputs), record them."""
        try:
            digest = sha256_file(node.get_internal_path())
            if sha256_file(cachefile) == digest:   # else not what this build made: leave it to its writer
                _write_sidecar(cachefile, digest)
        except OSError:
            pass

    @staticmethod
    def _push_remote(node, cachefile: str | None) -> None:
        """Push what was just built (the local entry when it is there and verifies) to the remote, if any."""
        rc = remote.get()
        if rc is None or cachefile is None:
            return
        path = cachefile
        try:
            digest = sha256_file(cachefile)
            with open(cachefile + ".sha256") as f:
                if f.read().strip() != digest:
                    return  # a local entry that does not match its sidecar is not spread any further
        except OSError:  # the local push failed: send the built file itself
            path = node.get_internal_path()
            try:
                digest = sha256_file(path)
            except OSError:
                return
        rc.push(os.path.basename(cachefile), path, digest)


def tree_bsig(node, tree: str | None) -> str:
    """SCons' cache signature of `node` (File.get_cachedir_bsig: its children's, its action's, its path) with the
    path taken inside `tree` when the node lies there."""
    path = node.get_internal_path()
    if tree and path.startswith(tree + os.sep):
        path = path[len(tree) + 1:]
    sigs = [n.get_cachedir_csig() for n in node.children()]
    sigs += [node.get_contents_sig(), path]
    return SCons.Util.hash_collect(sigs)


def _write_sidecar(cachefile: str, digest: str) -> None:
    """`<entry>.sha256` holding `digest`, written atomically (a concurrent reader sees none or all of it)."""
    tmp = f"{cachefile}.sha256.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(digest + "\n")
    os.replace(tmp, cachefile + ".sha256")
