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
    (root / "config").write_text('{"prefix_len": 2}')
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
    os.utime(lone, (NOW - DAY, NOW - DAY))
    gone, stray, left = ct.prune(root, older_than_s=30 * DAY, now=NOW)
    assert [e.path for e in gone] == [p["stale"]] and stray == [lone] and not lone.exists()
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


def test_bad_arguments_and_foreign_directories_are_refused(tmp_path, capsys):
    for bad in ("2X", "", "G"):
        with pytest.raises(ct.CacheToolError, match="a size such as 500M"):
            ct.parse_size(bad)
    assert ct.parse_size("1.5G") == 3 << 29 and ct.parse_size("500M") == 500 << 20 and ct.parse_size("7") == 7
    assert ct.parse_age("30d") == 30 * DAY and ct.parse_age("45m") == 2700
    with pytest.raises(ct.CacheToolError, match="an age such as 30d"):
        ct.parse_age("soon")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keep.txt").write_text("mine")
    assert cli.main(["cache", "prune", "--max-size", "0", "--dir", str(tmp_path / "docs")]) == 2
    assert "not a kda2 / SCons cache" in capsys.readouterr().err and (tmp_path / "docs" / "keep.txt").exists()
    assert cli.main(["cache", "prune", "--dir", str(tmp_path / "docs")]) == 2
    assert cli.main(["cache", "info", "--dry-run"]) == 2
    assert "options of `kda2 cache prune`" in capsys.readouterr().err
