"""The code half of every build node's signature (docs/DESIGN.md §4, "cache keys").

SCons signs a Python function action by that function's own bytecode, so an edit to anything it calls
(the render, the ptxas checks, a planner helper) would leave old outputs "up to date" and let a shared
cache hand them out. Like Triton's `triton_key()`, but per stage: a node's signature holds the sha256
of the *source* of every kda2 module its action can execute, found by following import statements
transitively (module level and inside functions), plus the versions of the third-party distributions
those modules import. An edit to one stage's code then re-runs that stage only; the content decider
stops the cascade at the first output that comes out byte-identical.

Not followed: imports inside a module-level `__getattr__` (the lazy attribute hook of `kda2/__init__`,
which exists so that `import kda2` stays light; no build action reaches it). The module holding that
hook is still hashed.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import sys
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable

import kda2

PACKAGE = "kda2"
ROOT = Path(kda2.__file__).resolve().parent
#: Bumped when the way a code digest is computed changes.
SCHEMA = 1


def module_file(name: str) -> Path | None:
    """The file of kda2 module `name` (a package's __init__.py), or None if there is none."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    parts = name.split(".")[1:]
    if not parts:
        return ROOT / "__init__.py"
    rel = Path(*parts)
    for cand in (ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _module_name(path: Path) -> str:
    rel = path.resolve().relative_to(ROOT).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _with_parents(name: str) -> list[str]:
    """Importing a.b.c runs a/__init__, a/b/__init__ and a/b/c."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imports(node: ast.AST, module: str, is_package: bool) -> tuple[set[str], set[str]]:
    """(kda2 modules, third-party top-level names) that import statements under `node` may load."""
    ours: set[str] = set()
    theirs: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.FunctionDef) and n.name == "__getattr__" and n is not node:
            continue
        if isinstance(n, ast.Import):
            for alias in n.names:
                (ours if alias.name.split(".")[0] == PACKAGE else theirs).add(alias.name)
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = package.rsplit(".", n.level - 1)[0] if n.level > 1 else package
                target = f"{base}.{n.module}" if n.module else base
            else:
                target = n.module or ""
            if target.split(".")[0] != PACKAGE:
                theirs.add(target)
                continue
            ours.add(target)
            for alias in n.names:  # `from kda2.x import y`: y may be a submodule
                if module_file(f"{target}.{alias.name}") is not None:
                    ours.add(f"{target}.{alias.name}")
        stack.extend(ast.iter_child_nodes(n))
    return ours, {t.split(".")[0] for t in theirs if t}


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_bytes(), filename=str(path))


def closure(roots: Iterable[str]) -> tuple[list[Path], set[str]]:
    """Every kda2 module file reachable from the modules `roots`, sorted, and the third-party
    top-level packages they import."""
    todo = [p for r in roots for p in _with_parents(r)]
    seen: dict[str, Path] = {}
    third: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name)
        if path is None:
            raise ImportError(f"signature: kda2 module {name!r} has no source file under {ROOT}")
        seen[name] = path
        ours, theirs = _imports(_parse(path), name, path.name == "__init__.py")
        third |= theirs
        todo.extend(p for m in ours for p in _with_parents(m) if p not in seen)
    return sorted(set(seen.values())), third


def function_closure(fn: Callable) -> tuple[list[Path], set[str]]:
    """The code an action function can run: its module's file, that module's top-level imports and
    the imports inside the function, transitively."""
    path = Path(inspect.getsourcefile(fn)).resolve()
    module = _module_name(path)
    tree = _parse(path)
    top = ast.Module(body=[s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))], type_ignores=[])
    fn_node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == fn.__name__)
    roots: set[str] = {module}
    third: set[str] = set()
    for node in (top, fn_node):
        ours, theirs = _imports(node, module, path.name == "__init__.py")
        roots |= ours
        third |= theirs
    files, more = closure(roots - {module})
    return sorted(set(files) | {path}), third | more


@functools.lru_cache(maxsize=None)
def _distribution_versions(names: frozenset[str]) -> tuple[tuple[str, str], ...]:
    dists = metadata.packages_distributions()
    out = set()
    for name in names:
        if name in sys.stdlib_module_names or name == "__future__":
            continue
        for dist in dists.get(name, ()):
            try:
                out.add((dist, metadata.version(dist)))
            except metadata.PackageNotFoundError:
                out.add((dist, "absent"))
    return tuple(sorted(out))


def digest(files: Iterable[Path], third_party: Iterable[str] = ()) -> str:
    """sha256 over the files' paths (relative to the package) and bytes, and third-party versions."""
    h = hashlib.sha256(f"kda2-code-{SCHEMA}\0".encode())
    for path in sorted(set(files)):
        rel = path.resolve().relative_to(ROOT).as_posix() if path.resolve().is_relative_to(ROOT) else path.name
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    for dist, version in _distribution_versions(frozenset(third_party)):
        h.update(f"{dist}=={version}\0".encode())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def action_digest(fn: Callable) -> str:
    """The code digest of one build action (cached per process: SCons reads the tree once)."""
    files, third = function_closure(fn)
    return digest(files, third)


def describe(fn: Callable) -> list[str]:
    """The files an action's digest covers, relative to the package (for `kda2 inspect` and tests)."""
    files, third = function_closure(fn)
    return [p.relative_to(ROOT).as_posix() for p in files] + [f"{d}=={v}" for d, v in
                                                               _distribution_versions(frozenset(third))]
