"""The feature matrix: which GPU test cases each spec builds, read from the spec YAML itself.

A spec (kernel_specs/<name>.yaml) compiles only some gate modes, state layouts, GVA ratios, ... and
(recurrent family) sequences up to its largest seq_len bucket, so some GPU test cases cannot run on its
library. This module is the one place that says which, and it says it from the spec file, not from a
second hand-kept list:

- `Built` is what a spec builds (family, head dims, features, largest bucket), made either from the
  YAML (`Built.from_spec`) or from a loaded library's manifest (`Built.from_library`);
- `missing(built, case)` is what a case needs that `built` lacks (empty: the case runs);
- `gpu_cases(built)` lists the skippable GPU test cases for that family, keyed like pytest node ids
  without the library parameter (`test_recurrent_gpu.py::test_matches_reference[T1-decode-precomputed-kf]`);
- `matrix()` = {spec name: {case key: what is missing}} for every kernel_specs/*.yaml, only the cases
  a spec is expected NOT to build (`python tests/gpu/feature_matrix.py` prints it);
- `require_built(lib, case)` is what a GPU test calls before running a case. A case the library lacks
  skips (`NotBuilt`, the only skip --require-gpu lets through) when the library's spec YAML does not
  build it either, and FAILS when the YAML says it is built (a stale or wrong build, not a skip).
  A library whose spec has no YAML here skips plainly: under --require-gpu that fails too.

tests/test_feature_matrix.py checks the matrix of the default specs and that editing a spec moves cases
in or out of it. Needs PyYAML only when a spec file is read (the build extra; the H200 image has it).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SPEC_DIR = ROOT / "kernel_specs"
#: The reason prefix of a skip the matrix allows.
NOT_BUILT = "not built into spec"
#: Spec feature fields the matrix reads (kda2.spec.model.Features has these, state_dtype, always fp32, and
#: gva_ratios, ignored since issue 13: every kernel takes any HV / H).
FEATURE_FIELDS = ("gate_modes", "qk_l2norm", "beta_sigmoid", "input_dtypes", "varlen", "state_layouts")


class NotBuilt(pytest.skip.Exception):
    """A skip for a case the spec does not build, confirmed by the spec file: --require-gpu allows it."""


@dataclass(frozen=True)
class Built:
    """What one spec builds, as far as the GPU tests care."""

    spec: str
    family: str
    k: int
    v: int
    gate_modes: tuple[str, ...]
    qk_l2norm: bool
    beta_sigmoid: bool
    input_dtypes: tuple[str, ...]
    varlen: bool
    state_layouts: tuple[str, ...]
    max_bucket: int
    source: str = field(default="", compare=False)  # the spec file or manifest it was read from

    @classmethod
    def from_spec(cls, doc: Mapping[str, Any], where: str = "<spec>") -> "Built":
        """From a spec as parsed YAML; defaults as kda2.spec.model (input_dtypes: [bf16])."""
        try:
            f = doc["features"]
            return cls(spec=str(doc["name"]), family=str(doc["family"]), k=int(doc["head_dims"]["k"]),
                       v=int(doc["head_dims"]["v"]), gate_modes=tuple(f["gate_modes"]),
                       qk_l2norm=bool(f["qk_l2norm"]), beta_sigmoid=bool(f["beta_sigmoid"]),
                       input_dtypes=tuple(f.get("input_dtypes", ["bf16"])), varlen=bool(f["varlen"]),
                       state_layouts=tuple(f["state_layouts"]), max_bucket=max(int(b) for b in doc["seq_len_buckets"]),
                       source=where)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: not a spec the feature matrix can read ({exc!r})") from exc

    @classmethod
    def from_library(cls, lib) -> "Built":
        """From a loaded kda2 Library (its manifest)."""
        f = lib.features
        return cls(spec=lib.spec, family=lib.family, k=lib.k, v=lib.v, gate_modes=tuple(f.gate_modes),
                   qk_l2norm=f.qk_l2norm, beta_sigmoid=f.beta_sigmoid, input_dtypes=tuple(f.input_dtypes),
                   varlen=f.varlen, state_layouts=tuple(f.state_layouts), max_bucket=lib.max_bucket,
                   source=str(lib.manifest_path))


def load_spec(path: Path) -> Built:
    import yaml

    return Built.from_spec(yaml.safe_load(Path(path).read_text()), str(path))


def specs(spec_dir: Path = SPEC_DIR) -> dict[str, Built]:
    """Every spec under spec_dir (default kernel_specs/), by spec name."""
    out: dict[str, Built] = {}
    for path in sorted(Path(spec_dir).glob("*.yaml")):
        b = load_spec(path)
        if b.spec in out:
            raise ValueError(f"{path}: spec name {b.spec!r} is used by two files in {spec_dir}")
        out[b.spec] = b
    return out


def _lacks(built: Built, case) -> dict[str, str]:
    """{what the case needs: the same in words, with what `built` has} for each need `built` does not meet."""
    layout = "v_first" if case.v_first else "k_first"
    checks = [
        (f"gate mode {case.gate}", None, case.gate in built.gate_modes),
        (f"input dtype {getattr(case, 'dtype', 'bf16')}", None, getattr(case, "dtype", "bf16") in built.input_dtypes),
        ("qk_l2norm", None, built.qk_l2norm or not case.l2),
        ("beta_sigmoid", None, built.beta_sigmoid or not case.bsig),
        ("varlen", None, built.varlen or case.cu is None),
        (layout, None, layout in built.state_layouts),
    ]
    if built.family == "recurrent":
        checks.append((f"T={case.longest}", f"T={case.longest} > largest bucket {built.max_bucket}",
                       case.longest <= built.max_bucket))
    return {need: words or need for need, words, ok in checks if not ok}


def missing(built: Built, case) -> tuple[str, ...]:
    """What `case` needs that `built` lacks, in words; () when the case runs on it.

    `case` is a recurrent case (test_recurrent_gpu.Case) or a chunk case (kda2.bench.cases.Case): both have
    gate, l2, bsig, cu, v_first and longest (and `dtype`, else bf16). Any GVA ratio runs (issue 13). Only the recurrent kernels are bounded by the largest
    seq_len bucket (the chunk kernels take any length: kda2.runtime.validate).
    """
    return tuple(_lacks(built, case).values())


def gpu_cases(built: Built) -> dict[str, Any]:
    """The GPU test cases that may skip on a spec of this family, by node id (less the library parameter).

    Cases the tests build from the library's features (pool, prepared) are built here from `built` the same way.
    """
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    if built.family == "recurrent":
        import test_recurrent_gpu as t

        mod = "test_recurrent_gpu.py"
        out = {f"{mod}::test_matches_reference[{c.id}]": c for c in t.CASES}
        out.update({f"{mod}::test_pool_in_place[{pid}]": t.pool_case(built, *args)
                    for pid, args in t.POOL_CASES.items()})
        out[f"{mod}::test_prepared_pool_matches_and_checks"] = t.prepared_case(built)
        return out
    if built.family == "chunk":
        from kda2.bench.cases import CASES

        return {f"test_chunk_gpu.py::test_matches_reference[{c.id}]": c for c in CASES}
    raise ValueError(f"spec {built.spec}: family {built.family!r} has no GPU cases in the feature matrix")


def expected_not_built(built: Built) -> dict[str, tuple[str, ...]]:
    """{case key: what is missing} for the cases `built` is expected NOT to build."""
    return {key: m for key, case in gpu_cases(built).items() if (m := missing(built, case))}


def matrix(spec_dir: Path = SPEC_DIR) -> dict[str, dict[str, tuple[str, ...]]]:
    """{spec name: {case key: what is missing}} for every spec under spec_dir."""
    return {name: expected_not_built(b) for name, b in specs(spec_dir).items()}


def require_built(lib, case, spec_dir: Path = SPEC_DIR) -> None:
    """Return if `lib` builds `case`; else skip (NotBuilt) if its spec file agrees, fail if the spec builds it."""
    lacks = _lacks(Built.from_library(lib), case)
    if not lacks:
        return
    spec = specs(spec_dir).get(lib.spec)
    if spec is None:
        pytest.skip(f"library {lib.manifest_path} lacks {', '.join(lacks.values())}; its spec {lib.spec!r} has no file in "
                    f"{spec_dir}, so the feature matrix cannot confirm that this case is not built")
    unexpected = [words for need, words in lacks.items() if need not in _lacks(spec, case)]
    if unexpected:
        pytest.fail(f"library {lib.manifest_path} lacks {', '.join(unexpected)}, but its spec {spec.source} builds "
                    "that: a stale or wrong build (run `scons`, carry build/ again)", pytrace=False)
    raise NotBuilt(f"{NOT_BUILT} {lib.spec}: {', '.join(lacks.values())} (feature matrix: {spec.source})")


def _main() -> int:
    for name, cases in matrix().items():
        print(f"{name}: {len(cases)} GPU case(s) expected not built")
        for key, what in cases.items():
            print(f"  {key}: {', '.join(what)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    sys.exit(_main())
