"""KDA²: declarative build system for Kimi Delta Attention CUDA kernels.

The top-level package stays import-light: the runtime API (`fused_recurrent_kda`, `chunk_kda`) is loaded
lazily so that `import kda2` in a deployment needs neither SCons, TVM, Jinja nor pydantic.
"""
__version__ = "0.1.0"

__all__ = ["__version__", "chunk_kda", "fused_recurrent_kda", "fused_recurrent_kda_pool", "load", "monitor",
           "prepare_pool"]


def __getattr__(name: str):
    if name in ("chunk_kda", "fused_recurrent_kda", "fused_recurrent_kda_pool", "load", "monitor", "prepare_pool"):
        from kda2 import runtime
        return getattr(runtime, name)
    raise AttributeError(f"module 'kda2' has no attribute {name!r}")
