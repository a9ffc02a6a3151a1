"""KDA² runtime: load built kernel libraries and call them (FLA-compatible API).

Imports only the standard library, numpy-free ctypes and (lazily) cuda.pathfinder / torch: no SCons,
TVM, Jinja or pydantic, so a deployment needs just the artifacts plus cuda-python (torch optional).
"""
from kda2.runtime.abi import ABI_VERSION, KDA2RecurrentArgs
from kda2.runtime.api import fused_recurrent_kda, fused_recurrent_kda_pool
from kda2.runtime.chunk import chunk_kda
from kda2.runtime.errors import ArtifactError, KDA2Error, KDA2InputError, KDA2LaunchError
from kda2.runtime.library import Features, Library
from kda2.runtime.loader import default_library, discover, find_manifests, load
from kda2.runtime.prepared import PreparedPool, prepare_pool
from kda2.runtime import monitor  # noqa: E402,I001  last: it hooks the modules above (KDA2_MONITOR=1)

__all__ = [
    "ABI_VERSION", "ArtifactError", "chunk_kda", "Features", "KDA2Error", "KDA2InputError", "KDA2LaunchError",
    "KDA2RecurrentArgs", "Library", "default_library", "discover", "find_manifests", "fused_recurrent_kda",
    "fused_recurrent_kda_pool", "load", "monitor", "PreparedPool", "prepare_pool",
]
