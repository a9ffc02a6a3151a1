"""The kernel and library objects' header dependencies (compile/graph.py): declared from the templates the sources
are rendered from, the whole #include closure, so that a header edit rebuilds exactly the objects including it and a
parallel build records them with their objects (scanned from the re-rendered sources instead, a `-j2` build after an
edit to build code left `scons -q` out of date: docs/DESIGN.md §4)."""
from __future__ import annotations

import re
from pathlib import Path

import SCons.Environment

from kda2.codegen.render import FAMILY_TEMPLATES, INCLUDE_DIR, LIBRARY_TEMPLATES, TEMPLATE_DIR
from kda2.compile import graph

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def closure(path: Path) -> set[str]:
    """The headers under INCLUDE_DIR that `path` includes, transitively, by a plain text walk."""
    seen: set[str] = set()
    todo = [path]
    while todo:
        for name in INCLUDE.findall(todo.pop().read_text()):
            if name not in seen and (INCLUDE_DIR / name).is_file():
                seen.add(name)
                todo.append(INCLUDE_DIR / name)
    return seen


def test_each_template_depends_on_its_whole_include_closure() -> None:
    env = SCons.Environment.Environment(tools=[])
    templates = [*(t for ts in FAMILY_TEMPLATES.values() for t in ts), *LIBRARY_TEMPLATES]
    found = {t: {str(Path(h.abspath).relative_to(INCLUDE_DIR)) for h in graph._headers(env, TEMPLATE_DIR / t)}
             for t in templates}
    for t in templates:
        assert found[t] == closure(TEMPLATE_DIR / t), t
    # the families do not share their kernel headers: an edit to one rebuilds none of the other's kernels
    assert "kda2/chunk.cuh" in found["chunk.cu.j2"] and "kda2/chunk.cuh" not in found["recurrent.cu.j2"]
    assert "kda2/recurrent.cuh" not in found["chunk.cu.j2"] and "kda2/wgmma.cuh" in found["chunk.cu.j2"]
    assert found["library.cpp.j2"] == {"kda2/abi.h"}
