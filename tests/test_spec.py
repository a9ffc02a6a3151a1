"""kda2.spec.model: the default spec loads, and every bad spec fails with one line: file, field, allowed."""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from kda2.spec.model import (Agents, Budget, ChunkAgents, ChunkSpec, ChunkTile, Features, Spec, SpecError, Staging, Tile,
                       load_spec, load_specs, validate_spec)
from kda2.artifact.canonical import canonical_json

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "kernel_specs" / "kimi_linear_recurrent.yaml"
CHUNK = REPO / "kernel_specs" / "kimi_linear_chunk.yaml"
ARCHS = "sm_80, sm_86, sm_89, sm_90, sm_90a"


def base() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT.read_text())


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def error_of(tmp_path: Path, edit: Callable[[dict[str, Any]], Any], name: str = "s.yaml") -> str:
    data = base()
    edit(data)
    path = write(tmp_path / name, data)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def check_line(msg: str, path: Path, *parts: str) -> None:
    assert "\n" not in msg, msg
    assert msg.startswith(f"{path}: "), msg
    for part in parts:
        assert part in msg, (part, msg)


# --- the default spec --------------------------------------------------------------------------

def test_default_spec_loads() -> None:
    spec = load_spec(DEFAULT)
    assert spec.name == "kimi_linear_recurrent"
    assert spec.family == "recurrent"
    assert spec.archs == ["sm_90a", "sm_80"]            # order as given
    assert (spec.head_dims.k, spec.head_dims.v) == (128, 128)
    assert spec.seq_len_buckets == [1, 8, 64, 1024]
    assert spec.features.state_layouts == ["k_first", "v_first"]
    assert spec.features.input_dtypes == ["bf16", "fp16"] and spec.features.bf16_decode_state is True
    assert spec.budget.max_smem_bytes == 232448   # the bulk tile is dynamic; static buffers stay under 48 KB
    assert spec.source == DEFAULT


def test_load_specs_default_dir() -> None:
    specs = load_specs(REPO / "kernel_specs")
    assert "kimi_linear_recurrent" in [s.name for s in specs]


def test_canonical_and_digest(tmp_path: Path) -> None:
    spec = load_spec(DEFAULT)
    canon = spec.canonical()
    assert canon["agents"]["staging"] == {"k_first": ["smem", "direct", "bulk"], "v_first": ["direct", "bulk"]}
    assert "source" not in canon
    assert spec.digest() == hashlib.sha256(canonical_json(canon).encode()).hexdigest()
    # another path, comments and key order: same content, same digest
    data = base()
    text = "# moved\n" + yaml.safe_dump(dict(reversed(list(data.items()))))
    moved = load_spec(write(tmp_path / "elsewhere.yaml", text))
    assert moved.source != spec.source
    assert moved.digest() == spec.digest()
    data["seq_len_buckets"] = [1, 64, 2048]
    assert load_spec(write(tmp_path / "edited.yaml", data)).digest() != spec.digest()


def test_defaults_are_visible_and_filled(tmp_path: Path) -> None:
    assert Tile.model_fields["v_per_warp"].default == [4, 8]
    assert Tile.model_fields["warps"].default == [4]
    assert Tile.model_fields["latency_v_per_warp"].default == []
    assert Staging.model_fields["k_first"].default == ["smem", "direct"]
    assert Staging.model_fields["v_first"].default == ["direct"]
    assert Agents.model_fields["reduce"].default == ["butterfly"]
    assert Features.model_fields["gva_ratios"].default == [1]
    assert Features.model_fields["input_dtypes"].default == ["bf16"]
    assert Features.model_fields["bf16_decode_state"].default is False
    assert Budget.model_fields["allow_spills"].default is False
    data = base()
    del data["agents"], data["features"]["input_dtypes"], data["features"]["bf16_decode_state"]
    del data["budget"]["allow_spills"]
    canon = load_spec(write(tmp_path / "s.yaml", data)).canonical()
    assert canon["agents"] == {"tile": {"v_per_warp": [4, 8], "warps": [4], "latency_v_per_warp": []},
                               "staging": {"k_first": ["smem", "direct"], "v_first": ["direct"]},
                               "reduce": ["butterfly"], "occupancy": ["compiler"], "inputs": ["per_token"],
                               "schedule": ["grid"]}
    assert canon["features"]["gva_ratios"] == [1]
    assert canon["features"]["input_dtypes"] == ["bf16"] and canon["features"]["bf16_decode_state"] is False
    assert canon["budget"]["allow_spills"] is False


def test_spec_is_frozen() -> None:
    spec = load_spec(DEFAULT)
    with pytest.raises(Exception):
        spec.name = "other"  # type: ignore[misc]


# --- file-level errors -------------------------------------------------------------------------

def test_malformed_yaml(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "name: x\nfamily: recurrent\n  archs: [sm_80\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:3:"), msg
    assert "malformed YAML" in msg


def test_unclosed_list_is_malformed(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "archs: [sm_80\n")
    with pytest.raises(SpecError, match=r"bad\.yaml:\d+:\d+: malformed YAML: "):
        load_spec(path)


@pytest.mark.parametrize("old, new, where, problem", [
    ("  varlen: true", "\tvarlen: true", ":14:1:", "line 14 is indented with a tab; allowed: spaces only"),
    ("  varlen: true", "  \tvarlen: true", ":14:3:", "line 14 is indented with a tab; allowed: spaces only"),
    ("  varlen: true", "  varlen:\ttrue", ":14:10:", "a tab at column 10; allowed: spaces only"),
])
def test_a_tab_is_named(tmp_path: Path, old: str, new: str, where: str, problem: str) -> None:
    """PyYAML's "found character '\\t' that cannot start any token" hides the cause: YAML takes spaces only."""
    text = DEFAULT.read_text()
    assert text.splitlines()[13] == old  # line 14
    path = write(tmp_path / "tab.yaml", text.replace(old, new))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}{where} malformed YAML: {problem} ("), msg


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "Yes", "ON"])
def test_yaml11_booleans_are_refused(tmp_path: Path, word: str) -> None:
    """The loader is strict: a YAML 1.1 yes/no/on/off is not a boolean (`varlen: 'yes'` was refused while
    `varlen: yes` passed); only true/false (YAML 1.2) are."""
    path = write(tmp_path / "s.yaml", DEFAULT.read_text().replace("  varlen: true", f"  varlen: {word}"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    check_line(str(info.value), path, "features.varlen: expected true or false", "allowed: true, false",
               f"(got '{word}')")
    for word in ("True", "TRUE", "false"):
        text = DEFAULT.read_text().replace("  varlen: true", f"  varlen: {word}")
        assert load_spec(write(tmp_path / "ok.yaml", text)).features.varlen is (word != "false")


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "dup.yaml", DEFAULT.read_text() + "name: other\n")
    with pytest.raises(SpecError, match=r"malformed YAML: duplicate key 'name'"):
        load_spec(path)


@pytest.mark.parametrize("text, problem", [
    ("", "empty file"),
    ("# only a comment\n", "empty file"),
    ("- a\n- b\n", "top level must be a mapping"),
    ("just a string\n", "top level must be a mapping"),
])
def test_empty_or_not_a_mapping(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    check_line(str(info.value), path, problem, "allowed: mapping with keys name, family")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "nope.yaml")


# --- field errors ------------------------------------------------------------------------------

def test_unknown_top_level_field(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d.update(tile_size=4))
    check_line(msg, tmp_path / "s.yaml", "tile_size: unknown field 'tile_size'",
               "allowed: name, family, archs, targets, head_dims, features, seq_len_buckets, agents, budget")


def test_unknown_nested_field(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d["agents"]["tile"].update(v_per_wrap=[4]))
    check_line(msg, tmp_path / "s.yaml", "agents.tile.v_per_wrap: unknown field 'v_per_wrap'",
               "allowed: v_per_warp, warps")
    msg = error_of(tmp_path, lambda d: d["budget"].update(max_regs=64))
    check_line(msg, tmp_path / "s.yaml", "budget.max_regs", "allowed: max_candidates, max_registers")


def test_bad_arch(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d.update(archs=["sm_90a", "sm_75"]))
    check_line(msg, tmp_path / "s.yaml", "archs[1]: not an allowed value", f"allowed: {ARCHS}",
               "(got 'sm_75')")


def test_duplicate_arch(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d.update(archs=["sm_80", "sm_80"]))
    check_line(msg, tmp_path / "s.yaml", "archs: duplicate value 'sm_80'", ARCHS)


def test_empty_archs(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d.update(archs=[]))
    check_line(msg, tmp_path / "s.yaml", "archs: must not be empty", ARCHS, "(got [])")


def test_empty_buckets(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d.update(seq_len_buckets=[]))
    check_line(msg, tmp_path / "s.yaml", "seq_len_buckets: must not be empty",
               "allowed: non-empty list of int in [1, 1048576]")


@pytest.mark.parametrize("buckets", [[1, 64, 64], [64, 1], [1, 1024, 512]])
def test_non_increasing_buckets(tmp_path: Path, buckets: list[int]) -> None:
    msg = error_of(tmp_path, lambda d: d.update(seq_len_buckets=buckets))
    check_line(msg, tmp_path / "s.yaml", "seq_len_buckets: must be strictly increasing",
               "allowed: non-empty list of int in [1, 1048576]", f"(got {buckets})")


@pytest.mark.parametrize("bucket", [0, -1, 1048577])
def test_bucket_out_of_range(tmp_path: Path, bucket: int) -> None:
    msg = error_of(tmp_path, lambda d: d.update(seq_len_buckets=[bucket]))
    check_line(msg, tmp_path / "s.yaml", "seq_len_buckets[0]: out of range",
               "allowed: int in [1, 1048576]", f"(got {bucket})")


def test_recurrent_spec_with_chunk_agents_names_the_family(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d.update(family="chunk"))  # recurrent agents section kept
    assert msg == (f"{tmp_path / 's.yaml'}: agents.tile: agents key 'tile' is for family recurrent specs; "
                   "allowed: chunk")
    msg = error_of(tmp_path, lambda d: d["agents"].update(chunk={"block_v": [32]}))
    assert msg == (f"{tmp_path / 's.yaml'}: agents.chunk: agents key 'chunk' is for family chunk specs; "
                   "allowed: tile, staging, reduce, occupancy, inputs, schedule")


def test_unknown_family(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d.update(family="parallel"))
    check_line(msg, tmp_path / "s.yaml", "family: not an allowed value", "(got 'parallel')")


@pytest.mark.parametrize("edit, parts", [
    (lambda d: d.update(name="Kimi-Linear"), ("name:", "allowed: string matching ^[a-z]")),
    (lambda d: d["head_dims"].update(k=96), ("head_dims.k:", "allowed: 32, 64, 128, 256", "(got 96)")),
    (lambda d: d.update(head_dims=128), ("head_dims: expected a mapping", "allowed: mapping with keys k, v")),
    (lambda d: d["features"].update(gate_modes=["sigmoid"]),
     ("features.gate_modes[0]:", "allowed: precomputed, softplus, lower_bound")),
    (lambda d: d["features"].update(state_dtype="bf16"), ("features.state_dtype:", "allowed: fp32")),
    (lambda d: d["features"].update(gva_ratios=[1, 0]), ("features.gva_ratios[1]:", "allowed: int >= 1")),
    (lambda d: d["features"].update(qk_l2norm=1), ("features.qk_l2norm:", "allowed: true, false", "(got 1)")),
    (lambda d: d["features"].update(state_layouts=[]), ("features.state_layouts: must not be empty",)),
    (lambda d: d["agents"]["tile"].update(v_per_warp=[3]), ("agents.tile.v_per_warp[0]:", "allowed: 2, 4, 8, 16")),
    (lambda d: d["agents"]["tile"].update(warps=[16]), ("agents.tile.warps[0]:", "allowed: 1, 2, 4, 8")),
    (lambda d: d["agents"]["staging"].update(v_first=["tma"]), ("agents.staging.v_first[0]:", "allowed: direct, bulk")),
    (lambda d: d["agents"]["staging"].update(k_first=["tma"]),
     ("agents.staging.k_first[0]:", "allowed: smem, direct, bulk")),
    # smem staging is k_first only (recurrent.cuh static_assert): refused here, not by a plan with no v_first variant
    (lambda d: d["agents"]["staging"].update(v_first=["direct", "smem"]),
     ("agents.staging.v_first[1]: smem staging is built for k_first tiles only", "allowed: direct, bulk",
      "(got 'smem')")),
    # bulk alone serves decode buckets on bulk archs only (plan/agents/recurrent.py bulk_ok): named here, not by a
    # plan with no variant for bucket 64
    (lambda d: d["agents"]["staging"].update(v_first=["bulk"]),
     ("agents.staging.v_first: bulk staging is planned for decode buckets (<= 16)", "so bucket 64 would get no "
      "v_first variant", "allowed: a list with direct", '(got ["bulk"])')),
    (lambda d: d.update(seq_len_buckets=[1, 8], agents={"staging": {"k_first": ["bulk"]}}),
     ("agents.staging.k_first:", "so arch sm_80 would get no k_first variant", "allowed: a list with smem or direct")),
    (lambda d: d["agents"].update(reduce=["tree"]), ("agents.reduce[0]:", "allowed: butterfly, scatter")),
    (lambda d: d["budget"].update(max_registers=300), ("budget.max_registers: out of range",
                                                       "allowed: int in [24, 255]", "(got 300)")),
    (lambda d: d["budget"].update(max_registers="64"), ("budget.max_registers: expected an integer",)),
    (lambda d: d["budget"].update(max_smem_bytes=300000), ("budget.max_smem_bytes:", "int in [0, 232448]")),
    (lambda d: d["budget"].update(max_candidates=0), ("budget.max_candidates:", "allowed: int >= 1")),
    (lambda d: d["budget"].pop("max_candidates"), ("budget.max_candidates: required field is missing",)),
    (lambda d: d.pop("budget"), ("budget: required field is missing", "mapping with keys max_candidates")),
])
def test_field_errors(tmp_path: Path, edit: Callable[[dict[str, Any]], Any], parts: tuple[str, ...]) -> None:
    check_line(error_of(tmp_path, edit), tmp_path / "s.yaml", *parts)


def test_every_error_is_printed(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d.update(archs=["sm_75"], seq_len_buckets=[])
        d["budget"]["max_registers"] = 9
    msg = error_of(tmp_path, edit)
    path = tmp_path / "s.yaml"
    assert msg == (f"{path}: archs[0]: not an allowed value; allowed: {ARCHS} (got 'sm_75'); "
                   "also seq_len_buckets: must not be empty; allowed: non-empty list of int in [1, 1048576] (got []); "
                   "also budget.max_registers: out of range; allowed: int in [24, 255] (got 9)"), msg
    assert "more error" not in msg


def _rename(section: tuple[str, ...], old: str, new: str) -> Callable[[dict[str, Any]], Any]:
    def edit(d: dict[str, Any]) -> None:
        for key in section:
            d = d.setdefault(key, {})
        d[new] = d.pop(old, [16])
    return edit


@pytest.mark.parametrize("spec, section, old, new, allowed", [
    (DEFAULT, (), "head_dims", "head_dim", "name, family, archs, targets, head_dims, features"),
    (CHUNK, ("agents", "chunk"), "block_v", "blockv", "block_v, stages, state_mma"),
    (DEFAULT, ("budget",), "max_registers", "max_register", "max_candidates, max_registers, max_smem_bytes"),
    (DEFAULT, ("features",), "gate_modes", "gate_mode", "gate_modes, qk_l2norm, beta_sigmoid"),
], ids=["top", "agents.chunk", "budget", "features"])
def test_mistyped_field_is_named_first_with_a_suggestion(tmp_path: Path, spec: Path, section: tuple[str, ...],
                                                          old: str, new: str, allowed: str) -> None:
    """A misspelt key is the cause, the "missing" field it leaves behind only its effect: the unknown field comes
    first, names the known field it is close to, and the missing one follows (nothing hidden behind a count)."""
    data = yaml.safe_load(spec.read_text())
    _rename(section, old, new)(data)
    path = write(tmp_path / "s.yaml", data)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    where = ".".join(section + (new,))
    check_line(msg, path, f"{where}: unknown field {new!r} (did you mean {old!r}?); allowed: {allowed}")
    assert msg.startswith(f"{path}: {where}: unknown field"), msg
    if old != "block_v":  # block_v has a default: nothing goes missing
        assert f"; also {'.'.join(section + (old,))}: required field is missing; allowed: " in msg, msg
    assert "more error" not in msg


def test_bulk_only_staging_for_decode_on_bulk_archs(tmp_path: Path) -> None:
    data = dict(base(), archs=["sm_90a"], targets=["h200"], seq_len_buckets=[1, 8],
                agents={"staging": {"k_first": ["bulk"], "v_first": ["bulk"]}})
    assert load_spec(write(tmp_path / "s.yaml", data)).agents.staging.v_first == ["bulk"]
    data["features"]["state_layouts"] = ["k_first"]  # a layout the spec does not build is not planned
    data.update(seq_len_buckets=[1, 64], agents={"staging": {"v_first": ["bulk"]}})
    assert load_spec(write(tmp_path / "s.yaml", data)).seq_len_buckets == [1, 64]


def test_unknown_field_without_a_close_match_suggests_nothing(tmp_path: Path) -> None:
    msg = error_of(tmp_path, lambda d: d.update(tile_size=4))
    assert msg == (f"{tmp_path / 's.yaml'}: tile_size: unknown field 'tile_size'; allowed: name, family, archs, "
                   "targets, head_dims, features, seq_len_buckets, agents, budget"), msg


# --- directories -------------------------------------------------------------------------------

def test_load_specs_sorted_and_duplicate_names(tmp_path: Path) -> None:
    for name in ("zeta", "alpha"):
        data = base()
        data["name"] = name
        write(tmp_path / f"{name}.yaml", data)
    assert [s.name for s in load_specs(tmp_path)] == ["alpha", "zeta"]
    data = base()
    data["name"] = "alpha"
    write(tmp_path / "copy.yaml", data)
    with pytest.raises(SpecError) as info:
        load_specs(tmp_path)
    msg = str(info.value)
    assert "\n" not in msg
    assert "name: duplicate spec name 'alpha'" in msg
    assert "alpha.yaml" in msg and "copy.yaml" in msg


def test_load_specs_reports_the_bad_file(tmp_path: Path) -> None:
    write(tmp_path / "good.yaml", base())
    bad = copy.deepcopy(base())
    bad["name"] = "other"
    bad["archs"] = ["sm_70"]
    write(tmp_path / "bad.yaml", bad)
    with pytest.raises(SpecError, match=r"bad\.yaml: archs\[0\]"):
        load_specs(tmp_path)


def test_spec_model_validates_directly() -> None:
    spec = Spec.model_validate(base())
    assert spec.source is None
    assert spec.digest() == load_spec(DEFAULT).digest()


# --- family chunk ------------------------------------------------------------------------------

def chunk_error(tmp_path: Path, edit: Callable[[dict[str, Any]], Any]) -> str:
    data = yaml.safe_load(CHUNK.read_text())
    edit(data)
    path = write(tmp_path / "c.yaml", data)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    check_line(msg, path)
    return msg


def test_chunk_spec_loads() -> None:
    spec = load_spec(CHUNK)
    assert isinstance(spec, ChunkSpec) and isinstance(spec, Spec)
    assert (spec.name, spec.family, spec.archs) == ("kimi_linear_chunk", "chunk", ["sm_90a", "sm_80"])
    assert (spec.head_dims.k, spec.head_dims.v) == (128, 128)
    assert spec.features.gate_modes == ["precomputed", "softplus", "lower_bound"]
    assert spec.features.gva_ratios == [1] and spec.features.varlen  # the default: every ratio runs
    assert spec.features.state_layouts == ["k_first", "v_first"]
    assert spec.seq_len_buckets == [2048, 8192, 65536]
    assert spec.agents.chunk.block_v == [16, 32, 64] and spec.agents.chunk.stages == [1, 2]
    assert (spec.budget.max_registers, spec.budget.max_smem_bytes, spec.budget.allow_spills,
            spec.budget.max_candidates) == (255, 232448, False, 6)
    assert spec.canonical()["agents"] == {"chunk": {"block_v": [16, 32, 64], "stages": [1, 2],
                                                    "state_mma": ["mma_sync", "wgmma"], "prep_wu": ["levels", "bfs"],
                                                    "fused": [False, True]}}
    assert validate_spec(yaml.safe_load(CHUNK.read_text())).digest() == spec.digest()
    assert [s.name for s in load_specs(REPO / "kernel_specs")].count("kimi_linear_chunk") == 1


def test_chunk_defaults(tmp_path: Path) -> None:
    assert ChunkTile.model_fields["block_v"].default == [32, 64]
    assert ChunkTile.model_fields["stages"].default == [2]
    assert ChunkAgents.model_fields["chunk"].default == ChunkTile()
    data = yaml.safe_load(CHUNK.read_text())
    del data["agents"]
    assert load_spec(write(tmp_path / "c.yaml", data)).canonical()["agents"] == {
        "chunk": {"block_v": [32, 64], "stages": [2], "state_mma": ["mma_sync"], "prep_wu": ["levels"],
                  "fused": [False]}}


@pytest.mark.parametrize("edit, parts", [
    (lambda d: d["agents"]["chunk"].update(block_v=[48]),
     ("agents.chunk.block_v[0]: not an allowed value", "allowed: 16, 32, 64, 128", "(got 48)")),
    (lambda d: d["agents"]["chunk"].update(stages=[3]), ("agents.chunk.stages[0]:", "allowed: 1, 2", "(got 3)")),
    (lambda d: d["agents"]["chunk"].update(block_v=[]), ("agents.chunk.block_v: must not be empty",)),
    (lambda d: d["agents"]["chunk"].update(block_v=[32, 32]), ("agents.chunk.block_v: duplicate value 32",)),
    (lambda d: d["agents"]["chunk"].update(warps=[4]),
     ("agents.chunk.warps: unknown field 'warps'", "allowed: block_v, stages")),
    (lambda d: d["agents"].update(tile={"warps": [4]}),
     ("agents.tile: agents key 'tile' is for family recurrent specs", "allowed: chunk")),
    (lambda d: d["agents"].update(reduce=["scatter"]), ("agents.reduce: agents key 'reduce' is for family recurrent",)),
    # K != V: refused by the spec, before any TIR stage or nvcc (the prep's q/k/v tiles share one layout)
    (lambda d: d["head_dims"].update(k=256), ("head_dims.v: the chunk kernels need K = V", "allowed: 256",
                                              "(got 128)")),
    (lambda d: d["head_dims"].update(v=64), ("head_dims.v: the chunk kernels need K = V", "allowed: 128",
                                             "(got 64)")),
    # a head dim no chunk kernel builds (the recurrent family does)
    (lambda d: d["head_dims"].update(k=32, v=32), ("head_dims.k: not built by the chunk kernels",
                                                   "allowed: 64, 128, 256", "CHUNK_HEAD_DIMS", "(got 32)")),
    (lambda d: d["head_dims"].update(v=32), ("head_dims.v: not built by the chunk kernels", "(got 32)")),
    (lambda d: d.update(family="parallel"), ("family: not an allowed value", "allowed: recurrent, chunk")),
    # the fused twin: K = V = 128 only, and beside the two-kernel candidates, never alone
    (lambda d: d["head_dims"].update(k=64, v=64),
     ("agents.chunk.fused: the fused kernel is built for K = V = 128 only", "allowed: [false] at k = 64",
      "(got [false, true])")),
    (lambda d: d["agents"]["chunk"].update(fused=[True]),
     ("agents.chunk.fused: a fused twin is planned beside the two-kernel candidates", "allowed: [false] or [false, true]")),
    (lambda d: d["agents"]["chunk"].update(fused=["yes"]), ("agents.chunk.fused[0]:", "(got 'yes')")),
])
def test_chunk_field_errors(tmp_path: Path, edit: Callable[[dict[str, Any]], Any], parts: tuple[str, ...]) -> None:
    msg = chunk_error(tmp_path, edit)
    for part in parts:
        assert part in msg, (part, msg)


def test_models_refuse_the_other_family() -> None:
    """Validating with the wrong class directly (not through load_spec) names the right one."""
    data = yaml.safe_load(CHUNK.read_text())
    data["agents"] = {}
    with pytest.raises(Exception, match="validated by ChunkSpec"):
        Spec.model_validate(data)
    with pytest.raises(Exception, match="validated by Spec"):
        ChunkSpec.model_validate(dict(base(), agents={}))
