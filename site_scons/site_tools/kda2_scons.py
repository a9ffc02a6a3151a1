"""SCons tool `kda2_scons`: glue only. All logic lives in kda2.build."""
import os
import sys


def _import_kda2():
    try:
        import kda2  # noqa: F401  installed (pip install -e .)
    except ImportError:  # running from a checkout without install
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))


def generate(env):
    _import_kda2()
    from kda2.compile import graph
    from kda2.compile.cache import VerifiedCacheDir

    env.AddMethod(lambda env, **kw: graph.declare(env, **kw), "KDA2Build")
    env.AddMethod(lambda env, path: env.CacheDir(path, VerifiedCacheDir), "KDA2CacheDir")


def exists(env):
    return True
