"""The C ABI has one home, kda2/artifact/abi.py: the committed header, the C compiler's view of it and
the runtime's ctypes mirror must all agree with its tables.

- the committed kda2/abi.h is exactly `header_text()` (edit the tables, forget `--write`: this fails);
- a real C compile of that header gives the tables' struct size and offsets, enum values, chunk
  constants and workspace sizes (not a restatement: the numbers come out of `cc`);
- the runtime's ctypes struct, pack format and signatures are the tables' and need no file.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
if str(SRC) not in sys.path:  # the package may not be pip-installed
    sys.path.insert(0, str(SRC))

from kda2.artifact import abi as facts  # noqa: E402
from kda2.runtime import abi  # noqa: E402

INCLUDE_DIR = SRC / "kda2" / "codegen" / "include"
CC = shutil.which("cc") or shutil.which("gcc")
CXX = shutil.which("c++") or shutil.which("g++")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler")

KV = [(128, 128), (64, 64), (128, 256), (256, 64), (96, 32)]
#: (N, T, varlen): T per sequence, or the packed total with varlen.
CHUNK_CASES = [(1, 1, False), (1, 64, False), (3, 1000, False), (2, 129, True), (7, 4096, True), (0, 0, False)]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# --- the committed header is the rendered tables -------------------------------------------------------

def test_header_location():
    assert facts.HEADER_PATH == INCLUDE_DIR / "kda2" / "abi.h"
    assert not (SRC / "kda2" / "codegen" / "templates" / "kda2_abi.h").exists(), "the old header is back"


def test_committed_header_equals_header_text():
    committed = facts.HEADER_PATH.read_text(encoding="utf-8")
    assert committed == facts.header_text(), (
        f"{facts.HEADER_PATH} is out of date with kda2/artifact/abi.py; "
        "run `PYTHONPATH=src python -m kda2.artifact.abi --write`")
    assert committed.startswith("// GENERATED from kda2/artifact/abi.py")
    assert "python -m kda2.artifact.abi --write" in committed.splitlines()[1]


def test_check_cli(tmp_path):
    run = [sys.executable, "-m", "kda2.artifact.abi", "--check"]
    ok = subprocess.run(run, env=_env(), capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    stale = tmp_path / "abi.h"
    stale.write_text(facts.header_text().replace("KDA2_ERR_SHAPE = -5", "KDA2_ERR_SHAPE = -55"))
    bad = subprocess.run(run + ["--header", str(stale)], env=_env(), capture_output=True, text=True)
    assert bad.returncode == 1 and "out of date" in bad.stderr and "-55" in bad.stderr
    missing = subprocess.run(run + ["--header", str(tmp_path / "none.h")], env=_env(), capture_output=True, text=True)
    assert missing.returncode == 1


# --- the header, compiled, says what the tables say ----------------------------------------------------

def _probe_source() -> str:
    """A C program printing "key value" for every fact of the header (names only, no numbers)."""
    out = [
        '#include <stddef.h>', '#include <stdio.h>', '#include "kda2/abi.h"',
        'static void p(const char* k, long long v) { printf("%s %lld\\n", k, v); }',
        'int main(void) {',
        '  KDA2RecurrentArgs a;',
        '  p("ABI_VERSION", KDA2_ABI_VERSION);',
        '  p("CHUNK", KDA2_CHUNK);',
        '  p("sizeof", (long long)sizeof(KDA2RecurrentArgs));',
    ]
    out += [f'  p("off.{f.name}", (long long)offsetof(KDA2RecurrentArgs, {f.name}));' for f in facts.ARGS_FIELDS]
    out += [f'  p("size.{f.name}", (long long)sizeof(a.{f.name}));' for f in facts.ARGS_FIELDS]
    out += [f'  p("enum.{e.c_name}", {e.c_name});'
            for e in (*facts.GATE_MODE_TABLE, *facts.FLAG_TABLE, *facts.STATUS_TABLE)]
    for K, V in KV:
        out.append(f'  p("slot.{K}.{V}", kda2_chunk_slot_bytes({K}, {V}));')
        out += [f'  p("slotoff.{K}.{V}.{s.name}", KDA2_CHUNK_OFF_{s.name}({K}, {V}));' for s in facts.CHUNK_SLOT]
    for N, T, varlen in CHUNK_CASES:
        out += ['  a.cu_seqlens = ' + ('(const int64_t*)&a;' if varlen else '0;'),
                f'  a.N = {N}; a.T = {T};',
                f'  p("ids.{N}.{T}.{int(varlen)}", kda2_chunk_ids(&a));']
    out.append('  a.HV = 4;')
    for N, T, split in SPLIT_CASES:
        out += ['  a.cu_seqlens = 0;', f'  a.N = {N}; a.T = {T}; a.split = {split};',
                f'  p("split.{N}.{T}.{split}", kda2_split_bytes(&a, 128, 64));',
                f'  p("trans.{N}.{T}.{split}", kda2_split_trans_offset(&a, 128, 64));',
                f'  p("start.{N}.{T}.{split}", kda2_split_start_offset(&a, 128, 64));',
                f'  p("ready.{N}.{T}.{split}", kda2_ready_offset(&a, 128, 64));',
                f'  p("readyb.{N}.{T}.{split}", kda2_ready_bytes(&a));']
    out += ['  return 0;', '}']
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, int]:
    if CC is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("abi_probe")
    (d / "probe.c").write_text(_probe_source())
    subprocess.run([CC, "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE_DIR}", str(d / "probe.c"),
                    "-o", str(d / "probe")], check=True)
    out = subprocess.run([str(d / "probe")], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


@needs_cc
def test_c_struct_layout_matches_tables(compiled):
    offsets, size = facts.args_layout()
    assert compiled["sizeof"] == size == ctypes.sizeof(abi.KDA2RecurrentArgs) == abi.ARGS_PACK.size
    for f in facts.ARGS_FIELDS:
        assert compiled[f"off.{f.name}"] == offsets[f.name] == getattr(abi.KDA2RecurrentArgs, f.name).offset, f.name
        assert compiled[f"size.{f.name}"] == getattr(abi.KDA2RecurrentArgs, f.name).size, f.name
    assert [name for name, _ in abi.KDA2RecurrentArgs._fields_] == [f.name for f in facts.ARGS_FIELDS]


@needs_cc
def test_c_enums_and_version_match_tables(compiled):
    assert compiled["ABI_VERSION"] == facts.ABI_VERSION == abi.ABI_VERSION
    for m in facts.GATE_MODE_TABLE:
        assert compiled[f"enum.{m.c_name}"] == m.value
    for f in facts.FLAG_TABLE:
        assert compiled[f"enum.{f.c_name}"] == 1 << f.bit
    for s in facts.STATUS_TABLE:
        assert compiled[f"enum.{s.c_name}"] == s.value


@needs_cc
def test_c_chunk_workspace_matches_python(compiled):
    assert compiled["CHUNK"] == facts.CHUNK == abi.CHUNK == 64
    for K, V in KV:
        assert compiled[f"slot.{K}.{V}"] == facts.chunk_slot_bytes(K, V) == abi.chunk_slot_bytes(K, V), (K, V)
        offs = facts.chunk_slot_offsets(K, V)
        for s in facts.CHUNK_SLOT:
            assert compiled[f"slotoff.{K}.{V}.{s.name}"] == offs[s.name], (K, V, s.name)
    for N, T, varlen in CHUNK_CASES:
        ids = compiled[f"ids.{N}.{T}.{int(varlen)}"]
        assert ids == facts.chunk_ids(N, T if varlen else N * T), (N, T, varlen)
        for K, V in KV[:2]:
            assert abi.chunk_workspace_bytes(N, T, 4, K, V, varlen) == (ids * 4 * compiled[f"slot.{K}.{V}"]
                                                                       + facts.ready_bytes(N, T if varlen else N * T, 4))


SPLIT_CASES = [(1, 70000, 0), (1, 70000, 1), (3, 500, 2), (2, 8192, 8)]


@needs_cc
def test_c_split_region_matches_python(compiled):
    """The exact split's region (docs/DESIGN.md §1) sits after the slots: transitions [K][K+V] then start
    states [K][V], fp32, per (sequence, segment, value head); nothing without a split."""
    K, V, HV = 128, 64, 4
    for N, T, split in SPLIT_CASES:
        slots = facts.chunk_ids(N, N * T) * HV * facts.chunk_slot_bytes(K, V)
        want = facts.split_bytes(N, split, HV, K, V)
        assert compiled[f"split.{N}.{T}.{split}"] == want, (N, T, split)
        assert want == (0 if split <= 1 else N * split * HV * K * (K + 2 * V) * 4)
        assert compiled[f"trans.{N}.{T}.{split}"] == slots
        assert compiled[f"start.{N}.{T}.{split}"] == slots + N * split * HV * K * (K + V) * 4
        # the overlap's ready region after it: a 16-byte head (the work counter), an int32 flag per slot, 16-aligned
        ready = facts.ready_bytes(N, N * T, HV)
        assert compiled[f"ready.{N}.{T}.{split}"] == slots + want and compiled[f"readyb.{N}.{T}.{split}"] == ready
        assert ready == 16 + -(-facts.chunk_ids(N, N * T) * HV * 4 // 16) * 16
        assert facts.chunk_workspace_bytes(N, T, HV, K, V, False, split) == slots + want + ready


def test_slot_layout_is_the_documented_one():
    # The slot as the chunk kernels use it: w, qg, kg [64][K] bf16, u^T [V][64] bf16, Aqk [64][64] bf16,
    # last gate row [K] fp32; every piece 16-byte aligned for K, V multiples of 8.
    assert [s.name for s in facts.CHUNK_SLOT] == ["W", "QG", "KG", "UT", "AQK", "GLAST"]
    K, V = 128, 128
    assert facts.chunk_slot_offsets(K, V) == {"W": 0, "QG": 16384, "KG": 32768, "UT": 49152, "AQK": 65536,
                                              "GLAST": 73728}
    assert facts.chunk_slot_bytes(K, V) == 74240
    assert all(o % 16 == 0 for o in facts.chunk_slot_offsets(64, 32).values())


@needs_cxx
def test_header_is_valid_cxx_with_constant_offsets(tmp_path):
    """As nvcc's host pass sees it: C++, extern "C" prototypes, the offset macros usable in static_assert."""
    K, V = 128, 64
    checks = [f"static_assert(KDA2_CHUNK_OFF_{s.name}({K}, {V}) == {o}, \"{s.name}\");"
              for s, o in zip(facts.CHUNK_SLOT, facts.chunk_slot_offsets(K, V).values())]
    checks.append(f"static_assert(KDA2_CHUNK_SLOT_BYTES({K}, {V}) == {facts.chunk_slot_bytes(K, V)}, \"slot\");")
    checks += [f"int (*fp_{f.name})({', '.join(t for t, _ in f.params) or 'void'}) = {f.name};"
               for f in facts.FUNCTIONS_TABLE if f.ret == "int"]
    src = tmp_path / "probe.cpp"
    src.write_text('#include "kda2/abi.h"\n' + "\n".join(checks) + "\n")
    subprocess.run([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{INCLUDE_DIR}", str(src)],
                   check=True)


# --- the runtime's mirror is the tables' ------------------------------------------------------------------

def test_runtime_pack_format_is_the_struct():
    assert abi.ARGS_PACK.size == ctypes.sizeof(abi.KDA2RecurrentArgs)
    # field order: distinct values packed in one go read back field by field
    vals = []
    for i, f in enumerate(facts.ARGS_FIELDS):
        code = facts._scalar(f.ctype)[1]
        vals.append(float(i) + 0.5 if code == "f" else (i + 1) * (1 << 36 if code in "Qq" else 1000))
    a = abi.KDA2RecurrentArgs()
    abi.ARGS_PACK.pack_into(a, 0, *vals)
    assert [getattr(a, f.name) for f in facts.ARGS_FIELDS] == vals


def test_runtime_names_cover_every_table_row():
    for m in facts.GATE_MODE_TABLE:
        assert getattr(abi, f"GATE_{m.name.upper()}") == m.value
        assert abi.GATE_MODE_NAMES[m.value] == m.name
    for f in facts.FLAG_TABLE:
        assert getattr(abi, f"FLAG_{f.name}") == 1 << f.bit
    for s in facts.STATUS_TABLE:
        assert getattr(abi, s.name) == s.value
        if s.value < 0:
            assert abi.describe_rc(s.value) == abi.status_codes()[s.value] == f"{s.c_name}: {s.comment}"
    assert list(abi.FUNCTIONS) == [f.name for f in facts.FUNCTIONS_TABLE]
    assert abi.FUNCTIONS["kda2_launch"] == (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p])
    assert abi.FUNCTIONS["kda2_library_json"] == (ctypes.c_char_p, [])
    assert abi.FUNCTIONS["kda2_workspace_bytes"] == (ctypes.c_int64, [ctypes.c_void_p])


def test_runtime_reads_no_file_and_no_build_package():
    """Importing kda2.runtime and asking for status texts opens no header/template; no build-time package."""
    code = r"""
import sys
opened = []
sys.addaudithook(lambda ev, args: opened.append(str(args[0])) if ev == "open" else None)
sys.modules.update({m: None for m in ["SCons", "tvm", "jinja2", "pydantic", "yaml"]})
import kda2.runtime, kda2.artifact.abi
from kda2.runtime import abi
abi.status_codes(); abi.describe_rc(-3); abi.describe_rc(-99)
bad = [p for p in opened if p.endswith((".h", ".j2", ".cuh")) or "codegen" in p]
assert not bad, bad
"""
    r = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
