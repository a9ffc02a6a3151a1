"""Render stage: variant config + agent reasons + TIR plan -> readable CUDA C++ (Jinja templates).

The render knows nothing of nvcc or SCons; it only turns data into text, deterministically.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from kda2 import __version__
from kda2.variant import variant_id, variant_name

TEMPLATE_DIR = Path(__file__).parent / "templates"
FAMILY_TEMPLATES = {"recurrent": ("recurrent.cu.j2", "kda2_abi.h")}
LIBRARY_TEMPLATES = ("library.cpp.j2", "kda2_abi.h")
GATE_BITS = {"precomputed": 0, "softplus": 1, "lower_bound": 2}  # KDA2GateMode values


@lru_cache(maxsize=1)
def _env():
    import jinja2  # build-time only: the runtime never imports this module

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def kernel_symbol(vid: str) -> str:
    """The extern "C" entry of a variant's cubin."""
    return f"kda2_recurrent_{vid}"


def render_variant(config: Mapping[str, Any], reasons: Sequence[Sequence[str]], plan: Mapping[str, Any],
                   spec_name: str) -> str:
    vid = variant_id(config)
    tmpl = _env().get_template(FAMILY_TEMPLATES[config["family"]][0])
    return tmpl.render(config=dict(config), reasons=[tuple(r) for r in reasons], plan=dict(plan),
                       vid=vid, name=variant_name(config), ns=f"kda2_{vid}", kernel_symbol=kernel_symbol(vid),
                       spec_name=spec_name, kda2_version=__version__)


def render_library(spec_name: str, arch: str, variants: Sequence[Mapping[str, Any]],
                   dispatch: Sequence[Mapping[str, Any]], library_json: str) -> str:
    """The per-(spec, arch) host translation unit: C ABI, dispatch table, embedded cubins.

    `variants` are {"id", "config", "cubin_path"} in library index order (cubin_path as the compiler
    will see it from the build's working directory); `dispatch` rows are {"state_layout", "bucket",
    "index"} sorted by (layout, bucket). `library_json` is a C string literal.
    """
    rows = [dict(v, kernel=kernel_symbol(v["id"]),
                 gate_mask=sum(1 << GATE_BITS[m] for m in v["config"]["gate_modes"])) for v in variants]
    tmpl = _env().get_template(LIBRARY_TEMPLATES[0])
    return tmpl.render(spec_name=spec_name, arch=arch, variants=rows, dispatch=list(dispatch),
                       library_json=library_json, kda2_version=__version__)
