"""kda2/bench/fla_warm.py: the option sets it warms are exactly the chunk GPU tests' cases and the chunk
benchmark's shape x gate pairs (a set it missed would compile during a timed or time-limited run)."""
import pytest


@pytest.fixture(scope="module")
def fla_warm():
    from kda2.bench import fla_warm

    return fla_warm


def test_tasks_cover_every_case_and_bench_set(fla_warm):
    from kda2.bench.cases import CASES
    from kda2.bench.chunk import GATES, SHAPES

    cases = fla_warm.tasks("cases")
    bench = fla_warm.tasks("bench")
    assert cases == [("case", c.id, 128) for c in CASES] and len(set(cases)) == len(CASES)
    assert sorted(bench) == sorted(("bench", s.id, g, 128) for s in SHAPES for g in GATES) and len(bench) == 12
    assert fla_warm.tasks(None) == cases + bench
    # other head dims (the small / large chunk specs): the same sets again per K
    both = fla_warm.tasks(None, (64, 256))
    assert both == [(*t[:-1], 64) for t in cases + bench] + [(*t[:-1], 256) for t in cases + bench]


def test_head_dims_are_checked(fla_warm, capsys):
    with pytest.raises(SystemExit) as e:
        fla_warm.main(["--head-dims", "64,96"])
    assert e.value.code == 2 and "--head-dims: allowed 64, 128, 256, got 64,96" in capsys.readouterr().err


def test_bad_arguments_are_refused(fla_warm, capsys):
    with pytest.raises(SystemExit) as e:
        fla_warm.main(["--only", "everything"])
    assert e.value.code == 2 and "invalid choice: 'everything'" in capsys.readouterr().err


def test_cases_subset_refuses_unknown_ids(capsys) -> None:
    """--cases takes the GPU tests' --fla-cases ids; a typo fails before any process starts, naming what exists."""
    import pytest

    from kda2.bench import fla_warm

    with pytest.raises(SystemExit) as e:
        fla_warm.main(["--cases", "T63-precomputed-kf,no-such-case"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "no-such-case" in err and "T63-precomputed-kf," not in err.split("allowed:")[0] and "T8192-softplus" in err


def test_cases_beside_bench_sets_and_gate_filter(fla_warm, capsys):
    """What a device call that times the benchmark and checks a few cases warms in one wave: the named cases, the
    benchmark's sets of the asked gates, at every head dim asked; a bad gate is refused naming the allowed ones."""
    two = "T63-precomputed-kf,T300-softplus-gva4-pbf16-vf"
    got = fla_warm.select("bench", two, "softplus", "128,256")
    cases = [t for t in got if t[0] == "case"]
    bench = [t for t in got if t[0] == "bench"]
    assert sorted(cases) == sorted(("case", c, k) for c in two.split(",") for k in (128, 256))
    assert bench and {t[2] for t in bench} == {"softplus"} and {t[3] for t in bench} == {128, 256}
    assert len(bench) == len(fla_warm.tasks("bench", (128, 256))) // 2
    assert fla_warm.select(None, two, None, "128") == [("case", c, 128) for c in two.split(",")]  # cases alone
    assert fla_warm.select("k3", None, "softplus", "128") == []  # the k3 set is bounded-gate only
    with pytest.raises(ValueError, match="--gates: allowed softplus, lower_bound, got softplus,relu"):
        fla_warm.select("bench", None, "softplus,relu", "128")
    assert fla_warm.main(["--only", "bench", "--cases", two, "--gates", "softplus", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "case T300-softplus-gva4-pbf16-vf 128" in out and "bench P1 softplus 128" in out
    assert "lower_bound" not in out and out.rstrip().endswith("fla_warm: 8 option sets (dry run)")
