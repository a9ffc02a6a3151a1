"""`kda2 bench` as a user meets it, with no GPU needed: every argument is checked before the GPU is looked for, a run
that stops before measuring says why in the CLI's one line `kda2: error: ...` and writes nothing (no folder, an
earlier run's results in --out untouched), readme-table refuses what is not a benchmark result the same way, and
the help of every option states its default. The GPU probe is replaced, so the tests do not depend on this host."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kda2.bench import _parser, host
from kda2.bench import chunk as bc
from kda2.bench import main as bench_main
from kda2.bench import recurrent as br

REPO = Path(__file__).resolve().parents[1]
EXPECTED = "expected a bench_recurrent.json or bench_chunk.json written by `kda2 bench recurrent|chunk`"


@pytest.fixture
def gpu_probe(monkeypatch) -> list:
    """torch.cuda.is_available (when torch is importable) answers no GPU and records that it was asked."""
    asked: list = []
    try:
        import torch
    except ImportError:   # the runs then stop at the import, which also says it needs a GPU
        return asked
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(True) or False)
    return asked


def one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kda2: error: "), err
    assert out == "", out
    return lines[0]


# ---- a run that stops before measuring ---------------------------------------------------------

BAD = [  # (arguments, what the error line must name: the option and the value)
    (["chunk", "--iters", "0"], ["--iters 0", "1 or more"]),
    (["chunk", "--warmup", "-5"], ["--warmup -5", "0 or more"]),
    (["chunk", "--step-us", "nan"], ["--step-us nan"]),
    (["chunk", "--gates", "softplus,nope", "--warmup", "-1"], ["--gates: unknown gate 'nope'", "--warmup -1"]),
    (["recurrent", "--layouts", "foo"], ["--layouts", "'foo'", "'v_first', 'k_first'"]),
    (["recurrent", "--layouts", "v_first,foo,bar"], ["'foo'", "'bar'"]),
    (["recurrent", "--variant", "a,b,c"], ["--variant", "'a', 'b', 'c'", "12 hex digits", "at most one per state"]),
    (["recurrent", "--variant", "aaaaaaaaaaaa,bbbbbbbbbbbb,cccccccccccc"], ["--variant: 3 ids", "one per state"]),
    (["recurrent", "--shapes", "Z9"], ["--shapes: unknown shape 'Z9'"]),
]


@pytest.mark.parametrize("argv, names", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_arguments_are_refused_before_the_gpu_and_write_nothing(argv, names, tmp_path, monkeypatch, capsys,
                                                                     gpu_probe):
    monkeypatch.chdir(tmp_path)   # no --out: the default folder would be made here
    assert bench_main(argv) == 2
    line = one_error_line(capsys)
    assert all(n in line for n in names), line
    assert gpu_probe == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["chunk", "--iters", "0"], ["chunk", "--warmup", "-5"], ["chunk"],
                                  ["recurrent", "--layouts", "foo"], ["recurrent"]], ids=" ".join)
def test_a_failed_run_keeps_the_results_already_in_out(argv, tmp_path, capsys, gpu_probe):
    """An earlier run's files in --out stay as they were when a run stops on its arguments or for want of a GPU."""
    out = tmp_path / "out"
    out.mkdir()
    names = bc.OUT_FILES if argv[0] == "chunk" else br.OUT_FILES
    for i, name in enumerate(names):
        (out / name).write_text(json.dumps({"kind": f"kda2-bench-{argv[0]}", "rows": [i]}))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert bench_main([*argv, "--out", str(out)]) == 2
    line = one_error_line(capsys)
    assert ("a GPU" in line) == (len(argv) == 1), line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


class _Stop(Exception):
    pass


def _past_the_checks(monkeypatch, tmp_path, layouts=("v_first", "k_first")):
    """A GPU and a library as far as the runs look before they measure; the first measurement (the Timer) stops
    them."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(host, "device", lambda torch: {"name": "a GPU", "l2_bytes": 1 << 20})
    monkeypatch.setattr(host, "versions", lambda torch: {})
    so = tmp_path / "lib.so"
    so.write_bytes(b"\0")
    lib = SimpleNamespace(spec="fake", arch="sm_90a", family="chunk", k=128, v=128, so_path=so, variants=[],
                          manifest_path=tmp_path / "manifest.json",
                          features=SimpleNamespace(state_layouts=list(layouts)))
    monkeypatch.setattr(bc, "pick_library", lambda library, k=128: lib)
    monkeypatch.setattr(br, "pick_library", lambda library: lib)

    def stop(torch):
        raise _Stop

    monkeypatch.setattr(bc, "Timer", stop)
    monkeypatch.setattr(br, "Timer", stop)


@pytest.mark.parametrize("kind", ["chunk", "recurrent"])
def test_a_run_that_measures_writes_a_new_folder_or_replaces_out_as_a_set(kind, tmp_path, monkeypatch, capsys):
    """Without --out: a new ./bench_out/<kind>-<date>-<time>, said on stdout, made only once the run gets to
    measuring. With --out: an earlier run's files there are removed then (so a run stopped half-way or without the
    PNGs never leaves its JSON beside another run's tables and charts); other files stay."""
    _past_the_checks(monkeypatch, tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Stop):
        bench_main([kind, "--no-fla"] + (["--no-cudnn"] if kind == "chunk" else []))
    (made,) = (tmp_path / "bench_out").iterdir()
    assert re.fullmatch(rf"{kind}-\d{{8}}-\d{{6}}", made.name)
    assert capsys.readouterr().out.startswith(f"kda2 bench {kind}: results go to bench_out/{made.name} (--out DIR")
    out = tmp_path / "out"
    out.mkdir()
    names = bc.OUT_FILES if kind == "chunk" else br.OUT_FILES
    for name in (*names, "mine.txt"):
        (out / name).write_text("an earlier run")
    with pytest.raises(_Stop):
        bench_main([kind, "--no-fla", "--out", str(out)] + (["--no-cudnn"] if kind == "chunk" else []))
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_a_layout_or_variant_the_library_lacks_is_refused_before_measuring(tmp_path, monkeypatch, capsys):
    _past_the_checks(monkeypatch, tmp_path, layouts=["k_first"])
    monkeypatch.chdir(tmp_path)
    assert bench_main(["recurrent", "--layouts", "k_first,v_first"]) == 2
    line = one_error_line(capsys)
    assert "--layouts: ['v_first'] not built into fake (allowed ['k_first'])" in line
    assert bench_main(["recurrent", "--variant", "aaaaaaaaaaaa"]) == 2
    assert "--variant aaaaaaaaaaaa: no such variant in fake/sm_90a" in one_error_line(capsys)
    assert not (tmp_path / "bench_out").exists()


def test_good_arguments_pass_the_checks():
    assert bc.check_arguments(None, None, "v_first", 20, 3, None, 128, "auto", None) == []
    assert bc.check_arguments(["k3", "B2T64H4"], ["softplus"], "k_first", 1, 0, 0.5, 64, "off", -2.0) == []
    assert br.check_arguments(None, None, None) == []
    assert br.check_arguments(["k_first", "v_first"], ["D2", "N128T4"], ["0123456789ab", "cdefcdefcdef"]) == []


# ---- readme-table --------------------------------------------------------------------------------

NOT_RESULTS = {  # file contents (None: no file) -> what the error line says is wrong
    "missing": (None, "cannot read it (No such file or directory)"),
    "not JSON": ("{'kind': 1", "not JSON (Expecting property name enclosed in double quotes, line 1 column 2)"),
    "array": ("[]", "a JSON array"),
    "empty object": ("{}", "it has no kind"),
    "other kind": ('{"kind": "kda2-tune", "rows": []}', "its kind is 'kda2-tune'"),
    "kind not a string": ('{"kind": ["kda2-bench-chunk"]}', "its kind is ['kda2-bench-chunk']"),
    "binary": (b"\x89PNG\r\n\x1a\n\xff", "not a text file"),
    "stopped run": ('{"kind": "kda2-bench-chunk", "error": "torch.cuda is not available"}',
                    "kda2 bench chunk run stopped before measuring anything (torch.cuda is not available)"),
}


@pytest.mark.parametrize("case", list(NOT_RESULTS))
def test_readme_table_refuses_what_is_not_a_result_in_one_line(case, tmp_path, capsys):
    text, why = NOT_RESULTS[case]
    path = tmp_path / "bench_x.json"
    if text is not None:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert bench_main(["readme-table", str(path)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"kda2: error: {path}: ") and why in line and EXPECTED in line, line


def test_readme_table_of_either_result(tmp_path, capsys):
    row = dict(id="D2", kind="decode", N=64, T=1, H=32, layout="v_first", impl="kda2", ms_median=0.0714, pct_copy=89.)
    recurrent = {"kind": "kda2-bench-recurrent", "device": {"name": "NVIDIA H200"}, "rows": [row]}
    chunk = {"kind": "kda2-bench-chunk", "device": {"name": "NVIDIA H200"}, "rows": []}
    for result, want in ((recurrent, "| D2 N=64 T=1 v_first | 71.4 |"), (chunk, "Chunk KDA prefill on NVIDIA H200")):
        path = tmp_path / "r.json"
        path.write_text(json.dumps(result))
        assert bench_main(["readme-table", str(path)]) == 0
        out, err = capsys.readouterr()
        assert want in out and err == ""


def test_the_cli_exit_status_and_line(tmp_path):
    """Through `kda2` itself: exit 2 and the one line, as its other commands fail (kda2.tools.cli)."""
    for argv in (["readme-table", tmp_path / "none.json"], ["chunk", "--warmup", "-5"]):
        p = subprocess.run([sys.executable, "-m", "kda2.tools.cli", "bench", *map(str, argv)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
        assert p.stderr.startswith("kda2: error: ") and "Traceback" not in p.stderr + p.stdout
    assert list(tmp_path.iterdir()) == []


# ---- help ----------------------------------------------------------------------------------------

def _commands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("command", ["recurrent", "chunk"])
def test_every_option_states_its_default_and_the_commands_what_they_write(command):
    p = _commands()[command]
    assert p.description and f"bench_{command}.json" in p.description
    for a in p._actions:
        if a.option_strings and a.dest != "help":
            assert "default" in (a.help or ""), (command, a.option_strings, a.help)
    (out,) = [a for a in p._actions if "--out" in a.option_strings]
    assert f"./bench_out/{command}-<UTC date>-<time>" in out.help and "Nothing is written before" in out.help


def test_readme_table_says_what_json_it_takes():
    p = _commands()["readme-table"]
    (arg,) = [a for a in p._actions if a.dest == "json"]
    assert p.description and "bench_recurrent.json or bench_chunk.json" in arg.help
