"""`kda2 cache info | prune` (kda2.tools.cache) on a cache laid out as the build lays it out: entries and sidecars
under two-hex directories, a sidecar's mtime the entry's last use."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from kda2.tools import cache as ct
from kda2.tools import cli

NOW = 2_000_000_000.0
DAY = 86400.0


def make_cache(root: Path, entries: dict[str, tuple[int, float, bool]]) -> dict[str, Path]:
    """entries: name -> (size, last used, has sidecar); returns name -> entry path."""
    (root / "00").mkdir(parents=True)
    (root / "config").write_text('{"prefix_len": 2}')   # what SCons writes
    paths = {}
    for i, (name, (size, used, paired)) in enumerate(entries.items()):
        sig = f"{i:02x}" * 32
        p = root / sig[:2].upper() / sig
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(b"x" * size)
        os.utime(p, (used, used))
        if paired:
            side = p.with_name(p.name + ".sha256")
            side.write_text("0" * 64)
            os.utime(side, (used, used))
        paths[name] = p
    return paths


def test_prune_to_a_size_removes_the_least_recently_used_whole(tmp_path):
    root = tmp_path / "cache"
    p = make_cache(root, {"old": (1000, NOW - 9 * DAY, True), "mid": (1000, NOW - 5 * DAY, True),
                          "new": (1000, NOW - DAY, True), "hot": (1000, NOW - 60, True)})
    gone, stray, left = ct.prune(root, max_bytes=2200, now=NOW)
    assert [e.path for e in gone] == [p["old"], p["mid"]] and left == 2 * 1064
    for name in ("old", "mid"):
        assert not p[name].exists() and not p[name].with_name(p[name].name + ".sha256").exists()
    assert p["new"].exists() and p["hot"].exists()


def test_prune_by_age_keeps_what_was_used_and_what_is_in_flight(tmp_path):
    """--older-than removes what has not been used for that long; a young entry without its sidecar (a push in
    flight) and anything used within the grace period stay even under a size bound they break; an old unpaired
    entry (a push that died) and a sidecar without its entry go."""
    root = tmp_path / "cache"
    p = make_cache(root, {"stale": (10, NOW - 40 * DAY, True), "used": (10, NOW - 2 * DAY, True),
                          "dead_push": (10, NOW - 3 * DAY, False), "in_flight": (10, NOW - 5, False)})
    lone = root / "00" / ("ab" * 32 + ".sha256")
    lone.write_text("0" * 64)
    os.utime(lone, (NOW - 40 * DAY, NOW - 40 * DAY))
    gone, stray, left = ct.prune(root, older_than_s=30 * DAY, now=NOW)
    assert [e.path for e in gone] == [p["stale"]] and [x.path for x in stray] == [lone] and not lone.exists()
    gone, _, left = ct.prune(root, max_bytes=0, now=NOW)
    assert {e.path for e in gone} == {p["dead_push"], p["used"]} and left == 10
    assert p["in_flight"].exists()


def test_dry_run_removes_nothing_and_info_counts(tmp_path):
    root = tmp_path / "cache"
    p = make_cache(root, {"a": (100, NOW - 9 * DAY, True), "b": (100, NOW - DAY, False)})
    before = sorted(x.name for x in root.rglob("*"))
    gone, _, left = ct.prune(root, older_than_s=DAY / 2, dry_run=True, now=NOW)
    assert {e.path for e in gone} == {p["a"], p["b"]} and left == 0
    assert sorted(x.name for x in root.rglob("*")) == before
    text = ct.info(root)
    assert "2 entries" in text and "1 without their sha256 sidecar" in text


def test_prune_touches_only_what_the_build_writes(tmp_path):
    """A `.git` directory has a `config` file and short subdirectories; a cache can hold a link or a file of the
    user's: none of them is removed, no link is followed; a dead push's temporary directory and a dead fetch's
    temporaries are, once past the grace period and the age asked for."""
    git = tmp_path / "repo" / ".git"
    (git / "info").mkdir(parents=True)
    (git / "config").write_text("[core]\n")
    (git / "info" / "exclude").write_text("keep")
    with pytest.raises(ct.CacheToolError, match="not a kda2 / SCons cache"):
        ct.prune(git, max_bytes=0, now=NOW)
    assert (git / "info" / "exclude").exists()

    root = tmp_path / "cache"
    make_cache(root, {"a": (10, NOW - 9 * DAY, True)})
    outside = tmp_path / "results"
    outside.mkdir()
    (outside / "bench.csv").write_text("mine")
    (root / "AB").symlink_to(outside)
    (root / "00" / "notes.txt").write_text("mine")
    dead = root / "00" / "tmpk3j2x9q_"
    dead.mkdir()
    (dead / ("cd" * 32)).write_bytes(b"y" * 100)
    fetch = root / "00" / ("ef" * 32 + ".remote.123.456")
    fetch.write_bytes(b"z" * 7)
    for p in (dead / ("cd" * 32), dead, fetch, root / "00" / "notes.txt"):
        os.utime(p, (NOW - 3 * DAY, NOW - 3 * DAY))
    entries, stray, other = ct.scan(root)
    assert len(entries) == 1 and {x.path for x in stray} == {dead, fetch} and other == 1
    assert sum(x.size for x in stray) == 107
    _, stray, _ = ct.prune(root, older_than_s=30 * DAY, now=NOW)
    assert stray == [] and dead.exists()            # younger than the age asked for
    gone, stray, _ = ct.prune(root, max_bytes=0, now=NOW)
    assert len(gone) == 1 and {x.path for x in stray} == {dead, fetch} and not dead.exists() and not fetch.exists()
    assert (outside / "bench.csv").exists() and (root / "00" / "notes.txt").exists() and (root / "AB").is_symlink()


def test_bad_arguments_and_foreign_directories_are_refused(tmp_path, capsys):
    for bad in ("2X", "", "G"):
        with pytest.raises(ct.CacheToolError, match="a size such as 500M"):
            ct.parse_size(bad)
    assert ct.parse_size("1.5G") == 3 << 29 and ct.parse_size("500M") == 500 << 20 and ct.parse_size("7") == 7
    assert ct.parse_age("30d") == 30 * DAY and ct.parse_age("45m") == 2700 and ct.parse_age("2w") == 14 * DAY
    for bad in ("soon", "6M", "1D"):   # M is not months, nor minutes: lower-case units only
        with pytest.raises(ct.CacheToolError, match="an age such as 30d"):
            ct.parse_age(bad)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keep.txt").write_text("mine")
    assert cli.main(["cache", "prune", "--max-size", "0", "--dir", str(tmp_path / "docs")]) == 2
    assert "not a kda2 / SCons cache" in capsys.readouterr().err and (tmp_path / "docs" / "keep.txt").exists()
    assert cli.main(["cache", "prune", "--dir", str(tmp_path / "docs")]) == 2
    assert cli.main(["cache", "info", "--dry-run"]) == 2
    assert "options of `kda2 cache prune`" in capsys.readouterr().err


def test_default_directory_is_the_builds(tmp_path, monkeypatch, capsys):
    """Without --dir, the cache the checkout's build uses (SConstruct, run there): $KDA2_CACHE_DIR relative to the
    checkout, else its cache/ — not the current directory's."""
    monkeypatch.delenv("KDA2_CACHE_DIR", raising=False)
    assert ct.default_dir(tmp_path) == tmp_path / "cache"
    monkeypatch.setenv("KDA2_CACHE_DIR", "shared/c")
    assert ct.default_dir(tmp_path) == tmp_path / "shared" / "c"
    monkeypatch.setenv("KDA2_CACHE_DIR", str(tmp_path / "abs"))
    assert ct.default_dir("/elsewhere") == tmp_path / "abs"
    make_cache(tmp_path / "abs", {"a": (5, NOW, True)})
    monkeypatch.chdir("/")
    assert cli.main(["cache", "info", "-C", str(tmp_path)]) == 0 and "1 entries" in capsys.readouterr().out


def test_info_reports_file_sizes_and_the_blocks_they_take(tmp_path):
    """Most entries are smaller than a block, so the disk holds more than their sizes add up to: `info` names both,
    the second as the filesystem counts it (st_blocks), and --max-size stays on the first."""
    root = tmp_path / "cache"
    p = make_cache(root, {"a": (1, NOW - DAY, True), "b": (5000, NOW - DAY, True)})
    disk = sum(os.stat(f).st_blocks * 512 for e in p.values() for f in (e, e.with_name(e.name + ".sha256")))
    entries, _, _ = ct.scan(root)
    assert sum(e.size for e in entries) == 1 + 5000 + 2 * 64 and sum(e.disk for e in entries) == disk
    text = ct.info(root)
    assert f"2 entries, {ct._human(5129)} ({ct._human(disk)} on disk" in text
