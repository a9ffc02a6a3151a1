"""kda2.runtime without a GPU: import hygiene, ABI layout, manifest verification, input validation.

A fake `lib<spec>.<arch>.so` is compiled from a small C file against the real kda2/abi.h: it answers the
ABI's queries from a generated table and records the args of each launch instead of running a kernel,
so the whole path from the torch API to the C struct is checked here; only the kernel itself needs the GPU.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
if str(SRC) not in sys.path:  # the package may not be pip-installed
    sys.path.insert(0, str(SRC))

from kda2.runtime import abi, loader  # noqa: E402
from kda2.runtime.errors import ArtifactError, KDA2InputError, KDA2LaunchError  # noqa: E402

HEADER_DIR = SRC / "kda2" / "codegen" / "include"  # the header is included as "kda2/abi.h"
CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler to build the fake library")

FEATURES = {"gate_modes": ["precomputed", "softplus", "lower_bound"], "qk_l2norm": True, "beta_sigmoid": True,
            "gva_ratios": [1, 2, 4], "varlen": True, "state_dtype": "fp32", "state_layouts": ["k_first", "v_first"]}
FIELDS = [name for name, _ in abi.KDA2RecurrentArgs._fields_]

FAKE_C = r"""
#include <stddef.h>
#include "kda2/abi.h"
static KDA2RecurrentArgs last;
static long long last_max_seqlen = -7;
static void* last_stream = 0;
static int calls = 0, forced_rc = 0;
int kda2_abi_version(void) { return %(abi)d; }
const char* kda2_library_json(void) { return %(json)s; }
int kda2_num_variants(void) { return %(nvar)d; }
int kda2_preload(void) { return 0; }
int kda2_route(int32_t v_first, int64_t max_seqlen, int64_t chains) {
  (void)chains;  /* one batch class per bucket: row r calls variant r */
%(select)s
}
int kda2_select(int32_t v_first, int64_t max_seqlen, int64_t chains) { return kda2_route(v_first, max_seqlen, chains); }
int kda2_launch(int index, const KDA2RecurrentArgs* a, void* s) {
  if (index < 0 || index >= %(nvar)d) return KDA2_ERR_BAD_INDEX;
  last = *a; last_stream = s; calls++; return forced_rc;
}
int kda2_fwd(const KDA2RecurrentArgs* a, int64_t m, void* s) {
  int i = kda2_select(a->state_v_first, m, (int64_t)a->N * a->HV);
  if (i < 0) return i;
  last_max_seqlen = m;
  KDA2RecurrentArgs c = *a;
  c.max_seqlen = m;
  return kda2_launch(i, &c, s);
}
int kda2_recurrent_fwd(const KDA2RecurrentArgs* a, int64_t m, void* s) { return kda2_fwd(a, m, s); }
int64_t kda2_workspace_bytes(const KDA2RecurrentArgs* a) {
  return %(chunk)d ? kda2_ready_offset(a, %(k)d, %(v)d) + kda2_ready_bytes(a) : 0;   /* slots, split, ready */
}
const KDA2RecurrentArgs* kda2_test_last(void) { return &last; }
long long kda2_test_last_max_seqlen(void) { return last_max_seqlen; }
void* kda2_test_last_stream(void) { return last_stream; }
int kda2_test_calls(void) { return calls; }
void kda2_test_force_rc(int rc) { forced_rc = rc; }
size_t kda2_test_layout(size_t* off) {
%(offsets)s
  return sizeof(KDA2RecurrentArgs);
}
"""


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def make_fake_build(root: Path, spec: str = "fake_spec", arch: str = "sm_90a", *, k: int = 128, v: int = 128,
                    features: dict | None = None, buckets=(1, 64, 1024), so_abi: int = abi.ABI_VERSION,
                    so_spec: str | None = None, bad_select: bool = False, family: str = "recurrent",
                    intermediate_buckets: tuple = (), bf16_state_buckets: tuple = ()) -> Path:
    """build/<spec>/<arch>/ with manifest.json, the fake .so and one dummy cubin per variant.

    family chunk: the .so routes lengths above the largest bucket to the last one and sizes the
    workspace with the header's helpers, as a real chunk library does.
    """
    features = dict(FEATURES if features is None else features)
    out = root / spec / arch
    out.mkdir(parents=True, exist_ok=True)
    variants, dispatch, select = [], [], []
    for layout in features["state_layouts"]:
        vf = int(layout == "v_first")
        for b in sorted(buckets):
            idx = len(variants)
            vid = hashlib.sha256(f"{spec}{arch}{layout}{b}".encode()).hexdigest()[:12]
            variants.append({"id": vid, "index": idx, "name": f"fake_{layout}_t{b}",
                             "config": {"bucket": b, "intermediate": b in intermediate_buckets,
                                        "state_dtypes": ["fp32", "bf16"] if b in bf16_state_buckets else ["fp32"]},
                             "cubin": f"{vid}/kernel.cubin", "resources": {}})
            dispatch.append({"state_layout": layout, "bucket": b, "class": "all", "min_chains": 0, "variant": vid,
                             "index": idx})
            chosen = 0 if bad_select else idx
            select.append(f"  if (v_first == {vf} && max_seqlen <= {b}) return {chosen};")
    built_vf = {int(lay == "v_first") for lay in features["state_layouts"]}
    select.append("  if (" + " && ".join(f"v_first != {x}" for x in sorted(built_vf)) + ") return KDA2_ERR_LAYOUT;"
                  if built_vf else "  return KDA2_ERR_LAYOUT;")
    if family == "chunk":  # above the largest bucket: the layout's last variant
        select += [f"  if (v_first == {int(lay == 'v_first')}) return {i * len(buckets) + len(buckets) - 1};"
                   for i, lay in enumerate(features["state_layouts"])]
    select.append("  return KDA2_ERR_BUCKET_OVERFLOW;")
    # as the real build writes it: variant ids in index order, the dispatch table, the ABI version
    so_json = json.dumps({"abi_version": abi.ABI_VERSION, "spec": so_spec or spec, "arch": arch, "family": family,
                          "variants": [x["id"] for x in variants], "dispatch": dispatch})
    offsets = "\n".join(f"  off[{i}] = offsetof(KDA2RecurrentArgs, {f});" for i, f in enumerate(FIELDS))
    src = out / "fake.c"
    src.write_text(FAKE_C % {"abi": so_abi, "json": _c_string(so_json), "nvar": len(variants),
                             "select": "\n".join(select), "offsets": offsets, "chunk": int(family == "chunk"),
                             "k": k, "v": v})
    lib_name = f"lib{spec}.{arch}.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O1", f"-I{HEADER_DIR}", str(src), "-o", str(out / lib_name)],
                   check=True)
    src.unlink()
    files = {lib_name: hashlib.sha256((out / lib_name).read_bytes()).hexdigest()}
    for x in variants:
        cubin = out / x["cubin"]
        cubin.parent.mkdir(exist_ok=True)
        cubin.write_bytes(os.urandom(64))
        files[x["cubin"]] = hashlib.sha256(cubin.read_bytes()).hexdigest()
    manifest = {"schema": loader.MANIFEST_SCHEMA, "spec": spec, "arch": arch, "family": family,
                "abi_version": abi.ABI_VERSION,
                "toolchain": {"nvcc": "fake", "tvm": "fake", "kda2": "0.1.0"}, "k": k, "v": v,
                "features": features, "buckets": list(buckets),
                "library": {"path": lib_name, "sha256": files[lib_name]},
                "dispatch": dispatch, "variants": variants, "files": files}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return out / "manifest.json"


def _rewrite_manifest(path: Path, **changes) -> None:
    m = json.loads(path.read_text())
    m.update(changes)
    path.write_text(json.dumps(m))


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    loader.clear_cache()
    monkeypatch.delenv("KDA2_LIBRARY", raising=False)
    monkeypatch.delenv("KDA2_BUILD_DIR", raising=False)
    yield
    loader.clear_cache()


@pytest.fixture
def fake(tmp_path) -> Path:
    if CC is None:
        pytest.skip("no C compiler to build the fake library")
    return make_fake_build(tmp_path / "build")


def _hooks(lib):
    d = lib._dll
    d.kda2_test_last.restype = ctypes.POINTER(abi.KDA2RecurrentArgs)
    d.kda2_test_last_max_seqlen.restype = ctypes.c_longlong
    d.kda2_test_last_stream.restype = ctypes.c_void_p
    d.kda2_test_layout.restype = ctypes.c_size_t
    d.kda2_test_layout.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
    return d


# --- import hygiene --------------------------------------------------------------------------------

def test_runtime_imports_without_build_dependencies(tmp_path):
    """The deployment promise: kda2.runtime imports (and loads a library) with SCons/TVM/Jinja/pydantic/torch absent."""
    manifest = make_fake_build(tmp_path / "build") if CC else None
    code = textwrap.dedent(f"""
        import sys
        BLOCKED = {{"SCons", "tvm", "tvm_ffi", "jinja2", "pydantic", "yaml", "torch"}}
        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError("blocked import of " + name)
                return None
        sys.meta_path.insert(0, Blocker())
        import kda2, kda2.runtime
        assert callable(kda2.fused_recurrent_kda) and callable(kda2.fused_recurrent_kda_pool)
        assert callable(kda2.load)
        import kda2.runtime.api, kda2.runtime.loader, kda2.runtime.abi, kda2.runtime.library
        if {str(manifest)!r} != "None":
            lib = kda2.load({str(manifest)!r})
            assert lib.k == 128, lib
        bad = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not bad, bad
        print("IMPORT-OK")
    """)
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0 and "IMPORT-OK" in res.stdout, res.stdout + res.stderr


# --- ABI layout ------------------------------------------------------------------------------------

@needs_cc
def test_ctypes_struct_matches_c_header(fake):
    lib = loader.load(fake)
    d = _hooks(lib)
    off = (ctypes.c_size_t * len(FIELDS))()
    size = d.kda2_test_layout(off)
    assert size == ctypes.sizeof(abi.KDA2RecurrentArgs) == abi.ARGS_PACK.size
    for i, name in enumerate(FIELDS):
        assert off[i] == getattr(abi.KDA2RecurrentArgs, name).offset, name


def test_pack_format_equals_field_assignment():
    vals = dict(zip(FIELDS, [*(0x1000 * (i + 1) for i in range(12)), 3, 7, 2, 8, 0.125, -5.0, 2, 0x5B, 1, 0,
                             0xABC000, 1 << 33, 65536, 0xDEF000]))
    assert len(vals) == len(FIELDS) == 26
    a, b = abi.KDA2RecurrentArgs(), abi.KDA2RecurrentArgs()
    for name, val in vals.items():
        setattr(a, name, val)
    abi.ARGS_PACK.pack_into(b, 0, *vals.values())
    assert bytes(a) == bytes(b)


def test_status_messages():
    assert "BUCKET_OVERFLOW" in abi.describe_rc(abi.ERR_BUCKET_OVERFLOW)
    assert "LAYOUT" in abi.describe_rc(-2) and "unknown" in abi.describe_rc(-99)
    assert "CUDA error 2" in abi.describe_rc(2)


# --- loading and verification ----------------------------------------------------------------------

@needs_cc
def test_load_forms_and_cache(fake, monkeypatch):
    lib = loader.load(fake)
    assert (lib.spec, lib.arch, lib.k, lib.v, lib.max_bucket) == ("fake_spec", "sm_90a", 128, 128, 1024)
    assert lib.features.gva_ratios == (1, 2, 4) and "softplus" in lib.features.gate_modes
    assert loader.load(fake.parent) is lib  # the arch directory
    assert loader.load(fake.parent.parent, arch="sm_90a") is lib  # the spec directory + explicit arch
    monkeypatch.setenv("KDA2_BUILD_DIR", str(fake.parents[2]))
    assert loader.load("fake_spec", arch="sm_90a") is lib  # a bare spec name
    assert lib.select(False, 1, 1) == 0 and lib.select(True, 2, 1) == 4
    with pytest.raises(KDA2LaunchError, match="BUCKET_OVERFLOW"):
        lib.select(False, 1025, 1)


@needs_cc
def test_corrupt_file_names_file_and_digests(fake):
    m = json.loads(fake.read_text())
    rel = m["variants"][1]["cubin"]
    target = fake.parent / rel
    target.write_bytes(b"corrupted")
    actual = hashlib.sha256(b"corrupted").hexdigest()
    with pytest.raises(ArtifactError) as ei:
        loader.load(fake)
    msg = str(ei.value)
    assert str(target) in msg and m["files"][rel] in msg and actual in msg and "corrupt" in msg
    lib = loader.load(fake, verify=False)  # an explicit opt-out still loads
    with pytest.raises(ArtifactError, match="corrupt artifact"):  # ... and a later load asking to verify still does
        loader.load(fake)
    target.write_bytes(bytes.fromhex("00"))  # (another wrong byte: checked again, not remembered as checked)
    with pytest.raises(ArtifactError, match="corrupt artifact"):
        loader.load(fake, verify=True)
    assert loader.load(fake, verify=False) is lib


@needs_cc
def test_missing_artifact_says_how_to_build(fake, tmp_path):
    m = json.loads(fake.read_text())
    missing = fake.parent / m["variants"][0]["cubin"]
    missing.unlink()
    with pytest.raises(ArtifactError, match="scons") as ei:
        loader.load(fake)
    assert str(missing) in str(ei.value) and "missing" in str(ei.value)
    with pytest.raises(ArtifactError, match="scons"):
        loader.load(tmp_path / "nowhere" / "manifest.json")
    with pytest.raises(ArtifactError, match="no manifest.json"):
        loader.load(tmp_path)


@needs_cc
def test_bundle_damage_says_revendor_not_rebuild(tmp_path):
    """A bundle (DIR/bundle.json, made by `kda2 vendor`) is repaired by re-vendoring or re-copying it, and
    `kda2 verify DIR` says what is wrong; `scons` advice is for build directories only."""
    root = tmp_path / "vendored"
    manifest = make_fake_build(root, spec="fake_spec", arch="sm_90a")
    digest = hashlib.sha256(manifest.read_bytes()).hexdigest()
    (root / "bundle.json").write_text(json.dumps({"format": 1, "specs": {"fake_spec": {
        "family": "recurrent", "archs": {"sm_90a": {"manifest_sha256": digest}}}}}))
    m = json.loads(manifest.read_text())
    so = manifest.parent / m["library"]["path"]
    raw = bytearray(so.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    so.write_bytes(bytes(raw))  # a changed byte (a bundle's cubins are inside its .so)
    bundle_advice = (re.escape(f"`kda2 verify {root}`") + ".*" +
                     re.escape(f"re-vendor it from its build (`kda2 vendor fake_spec --to {root}`)"))
    with pytest.raises(ArtifactError, match=f"corrupt artifact {re.escape(str(so))}.*{bundle_advice}") as ei:
        loader.load(root, arch="sm_90a")
    assert "scons" not in str(ei.value)
    cubin = manifest.parent / m["variants"][0]["cubin"]
    cubin.unlink()  # a file missing (listed files are checked in sorted order: the cubin's directory first)
    with pytest.raises(ArtifactError, match=f"missing artifact {re.escape(str(cubin))}.*{bundle_advice}") as ei:
        loader.load(manifest)
    assert "scons" not in str(ei.value)
    manifest.write_text("{not json")
    with pytest.raises(ArtifactError, match=f"not valid JSON.*{bundle_advice}"):
        loader.load(manifest)
    manifest.unlink()
    with pytest.raises(ArtifactError, match=f"no manifest.json in .*{bundle_advice}"):
        loader.load(root)


@needs_cc
def test_bad_abi_version_in_manifest(fake):
    _rewrite_manifest(fake, abi_version=1)  # a build from before the chunk family: rebuild
    with pytest.raises(ArtifactError, match=f"abi_version 1.*ABI {abi.ABI_VERSION}"):
        loader.load(fake)


@needs_cc
def test_bad_manifest_schema_and_json(fake):
    _rewrite_manifest(fake, schema=99)
    with pytest.raises(ArtifactError, match="schema 99"):
        loader.load(fake)
    fake.write_text("{not json")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        loader.load(fake)


@needs_cc
def test_library_abi_mismatch(tmp_path):
    manifest = make_fake_build(tmp_path / "build", so_abi=1)
    with pytest.raises(ArtifactError, match=r"kda2_abi_version\(\) = 1"):
        loader.load(manifest)


@needs_cc
def test_library_json_must_match_manifest(tmp_path):
    manifest = make_fake_build(tmp_path / "build", so_spec="other_spec")
    with pytest.raises(ArtifactError, match="mixes two builds"):
        loader.load(manifest)


@needs_cc
def test_dispatch_table_must_match_library(tmp_path):
    manifest = make_fake_build(tmp_path / "build", bad_select=True)
    with pytest.raises(ArtifactError, match="dispatch"):
        loader.load(manifest)


@needs_cc
def test_manifest_paths_cannot_escape(fake):
    m = json.loads(fake.read_text())
    m["files"]["../../../etc/passwd"] = "0" * 64
    fake.write_text(json.dumps(m))
    with pytest.raises(ArtifactError, match="leaves the build directory"):
        loader.load(fake)


@needs_cc
def test_changed_manifest_in_same_process(fake):
    loader.load(fake)
    _rewrite_manifest(fake, toolchain={"nvcc": "other"})
    with pytest.raises(ArtifactError, match="restart the process"):
        loader.load(fake)


@needs_cc
def test_default_library_discovery(tmp_path, monkeypatch):
    build = tmp_path / "build"
    m1 = make_fake_build(build, spec="spec_a", arch="sm_90a")
    make_fake_build(build, spec="spec_a", arch="sm_80")
    monkeypatch.setattr(loader, "current_capability", lambda *a: (9, 0))
    monkeypatch.setenv("KDA2_BUILD_DIR", str(build))
    assert loader.default_library().manifest_path == m1.resolve()  # sm_90a preferred over sm_80
    with pytest.raises(ArtifactError, match=r"has no build for sm_75 .*sm_75 is not an arch a spec may list "
                                            r"\(allowed: sm_80, "):
        loader.load(build / "spec_a", arch="sm_75")
    with pytest.raises(ArtifactError, match=r"has no build for sm_86 .*add sm_86 to the spec's archs and rebuild"):
        loader.load(build / "spec_a", arch="sm_86")
    loader.clear_cache()
    m2 = make_fake_build(build, spec="spec_b", arch="sm_90a")
    with pytest.raises(ArtifactError, match="more than one") as ei:
        loader.default_library()
    assert "spec_a" in str(ei.value) and "spec_b" in str(ei.value) and "KDA2_LIBRARY" in str(ei.value)
    monkeypatch.setenv("KDA2_LIBRARY", str(m2))
    assert loader.default_library().spec == "spec_b"
    loader.clear_cache()
    monkeypatch.setattr(loader, "current_capability", lambda *a: (8, 6))  # spec_a has sm_80, spec_b has not
    monkeypatch.delenv("KDA2_LIBRARY")
    assert loader.default_library().arch == "sm_80"


def test_arch_preference():
    from kda2.runtime.device import arch_preference
    assert arch_preference((9, 0)) == ["sm_90a", "sm_90", "sm_80"]
    assert arch_preference((8, 9)) == ["sm_89", "sm_80"]
    assert arch_preference((8, 0)) == ["sm_80"]
    assert arch_preference((10, 0)) == []


@needs_cc
def test_launch_raw_passes_struct_and_maps_errors(fake):
    lib = loader.load(fake)
    d = _hooks(lib)
    args = abi.KDA2RecurrentArgs(q=0x1000, o=0x2000, N=3, T=1, H=2, HV=4, scale=0.5, lower_bound=-5.0,
                                 gate_mode=abi.GATE_LOWER_BOUND, flags=abi.FLAG_QK_L2NORM, state_v_first=1,
                                 max_seqlen=1)  # kda2_fwd fills max_seqlen in: equal here, so bytes compare
    lib.launch_raw(args, 1, 0xABC)
    last = d.kda2_test_last().contents
    assert bytes(last) == bytes(args)
    assert d.kda2_test_last_max_seqlen() == 1 and d.kda2_test_last_stream() == 0xABC
    d.kda2_test_force_rc(700)  # cudaErrorIllegalAddress
    with pytest.raises(KDA2LaunchError, match="CUDA error 700") as ei:
        lib.launch_raw(args, 1, 0)
    assert ei.value.code == 700
    d.kda2_test_force_rc(0)
    with pytest.raises(KDA2LaunchError, match="BUCKET_OVERFLOW"):
        lib.launch_raw(args, 5000, 0)
    with pytest.raises(KDA2LaunchError, match="BAD_INDEX"):
        lib.launch_variant(99, args, 0)


# --- torch API validation (CPU tensors; the device check comes last so everything else is reachable) ----

def _inputs(torch, B=2, T=3, H=2, HV=4, K=128, V=128, g_dtype=None, beta_dtype=None):
    bf = torch.bfloat16
    return dict(q=torch.randn(B, T, H, K, dtype=bf), k=torch.randn(B, T, H, K, dtype=bf),
                v=torch.randn(B, T, HV, V, dtype=bf), g=torch.randn(B, T, HV, K, dtype=g_dtype or torch.float32),
                beta=torch.rand(B, T, HV, dtype=beta_dtype or torch.float32))


@pytest.fixture
def api_env(fake):
    torch = pytest.importorskip("torch")
    from kda2.runtime import api
    lib = loader.load(fake)
    api._init_torch()
    api._fast.clear()  # verdicts cached under a stubbed device check must not leak between tests
    yield torch, api, lib, _hooks(lib)
    api._fast.clear()


def _expect(api, lib, d, match, *args, pool=False, poisoned=(), **kw):
    """Call, expect KDA2InputError matching `match`, and prove nothing was launched or written."""
    calls = d.kda2_test_calls()
    fn = api.fused_recurrent_kda_pool if pool else api.fused_recurrent_kda
    with pytest.raises(KDA2InputError, match=match):
        fn(*args, library=lib, **kw)
    assert d.kda2_test_calls() == calls
    for t in poisoned:
        assert bool(t.isnan().all()), "a poisoned buffer was written on a failed call"


def test_validation_errors(api_env):
    torch, api, lib, d = api_env
    x = _inputs(torch)
    B, T, H, HV, K, V = 2, 3, 2, 4, 128, 128
    out = torch.full((B, T, HV, V), math.nan, dtype=torch.bfloat16)
    fso = torch.full((B, HV, K, V), math.nan)
    base = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    e = lambda match, *a, **kw: _expect(api, lib, d, match, *a, poisoned=(out, fso), **kw)  # noqa: E731

    e(r"q dtype: got float16; allowed: bf16 .*add fp16 to features.input_dtypes", x["q"].half(), *base[1:], out=out)
    e(r"q dtype: got float32; allowed: bf16 .*cast q/k/v to bf16 or fp16", x["q"].float(), *base[1:], out=out)
    e(r"k shape: got \[2, 3, 2, 64\]", x["q"], x["k"][..., :64].contiguous(), *base[2:], out=out)
    q64 = torch.randn(B, T, H, 64, dtype=torch.bfloat16)
    e(r"unsupported head dims K=64, V=128: spec fake_spec \(sm_90a\) is built for K=128, V=128.*head_dims \{k: 64, "
      r"v: 128\}", q64, q64, *base[2:])
    e(r"unsupported head dims K=128, V=64", *base[:2], torch.randn(B, T, HV, 64, dtype=torch.bfloat16), *base[3:])
    e(r"HV % H == 0", *base[:2], torch.randn(B, T, 3, V, dtype=torch.bfloat16), *base[3:])
    q8 = torch.randn(B, T, 8, K, dtype=torch.bfloat16)
    e(r"v heads: got HV=4 with H=8; allowed: HV >= H", q8, q8, *base[2:])
    e(r"g dtype: got float16; allowed: float32 or bfloat16", *base[:3], x["g"].half(), x["beta"])
    e(r"beta shape.*per-channel", *base[:4], torch.rand(B, T, HV, V))
    e(r"beta dtype: got float64", *base[:4], x["beta"].double())
    e(r"v: got a non-contiguous", *base[:2], x["v"].transpose(1, 2).contiguous().transpose(1, 2), *base[3:])
    e(r"k device: got meta", x["q"], x["k"].to("meta"), *base[2:])
    e(r"out dtype: got float32", *base, out=torch.empty(B, T, HV, V))
    e(r"A_log: got None.*softplus", *base, use_gate_in_kernel=True)
    e(r"A_log shape: got \[3\]", *base, use_gate_in_kernel=True, A_log=torch.zeros(3))
    e(r"A_log dtype: got int32; allowed: float32, bfloat16 or float16", *base, use_gate_in_kernel=True,
      A_log=torch.zeros(HV, dtype=torch.int32))
    e(r"dt_bias dtype: got float64; allowed: float32, bfloat16 or float16", *base, use_gate_in_kernel=True, A_log=torch.zeros(HV),
      dt_bias=torch.zeros(HV * K, dtype=torch.float64))
    e(r"dt_bias shape", *base, use_gate_in_kernel=True, A_log=torch.zeros(HV), dt_bias=torch.zeros(HV))
    e(r"lower_bound: got 1.0", *base, use_gate_in_kernel=True, lower_bound=1.0)
    e(r"allow_neg_eigval=True requires use_beta_sigmoid_in_kernel", *base, allow_neg_eigval=True)
    e(r"initial_state dtype: got bfloat16", *base, initial_state=torch.zeros(B, HV, K, V, dtype=torch.bfloat16))
    e(r"initial_state shape: got \[2, 4, 128, 129\]", *base, initial_state=torch.zeros(B, HV, K, V + 1))
    e(r"final_state_out: got a tensor with output_final_state=False", *base, final_state_out=fso)
    e(r"final_state_out shape", *base, output_final_state=True, final_state_out=torch.zeros(B, HV, K, 1))
    # varlen
    cu = torch.tensor([0, 1, 3], dtype=torch.int64)
    e(r"B == 1", *base, cu_seqlens=cu)
    one = {n: t[:1] for n, t in x.items()}
    b1 = (one["q"], one["k"], one["v"], one["g"], one["beta"])
    e(r"cu_seqlens dtype: got int16", *b1, cu_seqlens=cu.to(torch.int16))
    e(r"cu_seqlens values.*from 0 to the token count T=3", *b1, cu_seqlens=torch.tensor([0, 2, 1]))
    e(r"cu_seqlens values", *b1, cu_seqlens=torch.tensor([0, 1, 4]))
    e(r"max_seqlen: got 1; allowed: >= the longest sequence \(2\)", *b1, cu_seqlens=cu, cu_seqlens_cpu=cu, max_seqlen=1)
    e(r"cu_seqlens_cpu given without cu_seqlens", *base, cu_seqlens_cpu=cu)
    e(r"cu_seqlens_cpu values: got \[0, 2, 4\]", *b1, cu_seqlens=cu, cu_seqlens_cpu=torch.tensor([0, 2, 4]))
    # scalars that are not numbers are named, not left to float() / int()
    e(r"max_seqlen: got 'a'; allowed: None or a non-negative int", *b1, cu_seqlens=cu, max_seqlen="a")
    e(r"max_seqlen: got 2.5; allowed: None or an int", *b1, cu_seqlens=cu, cu_seqlens_cpu=cu, max_seqlen=2.5)
    e(r"lower_bound: got 'abc'; allowed: a finite negative float", *base, use_gate_in_kernel=True, lower_bound="abc")
    e(r"scale: got 'x'; allowed: None \(K \*\* -0.5\) or a float", *base, scale="x")
    e(r"scale: got list \[1\]; allowed", *base, scale=[1])
    e(r"initial_state shape: got \[2, 4, 128, 128\]; allowed: \[3, 4, 128, 128\]",
      *[torch.cat([t, t[:, :1]], 1)[:1] for t in b1], cu_seqlens=torch.tensor([0, 1, 2, 4]),
      initial_state=torch.zeros(2, HV, K, V))
    # bucket overflow: dense T and the longest varlen sequence
    long = _inputs(torch, B=1, T=1025)
    e(r"T=1025 exceeds the largest seq_len bucket 1024 of spec fake_spec \(sm_90a\); add a larger bucket",
      *long.values())
    e(r"T=5000 exceeds the largest seq_len bucket 1024", *b1, cu_seqlens=cu, max_seqlen=5000)
    # everything valid: the last check is the device
    e(r"q device: got cpu; allowed: a CUDA device", *base, out=out, output_final_state=True, final_state_out=fso)
    with pytest.raises(TypeError, match="unexpected keyword"):
        api.fused_recurrent_kda(*base, library=lib, bogus=1)


def test_validation_errors_pool(api_env):
    torch, api, lib, d = api_env
    x = _inputs(torch)
    base = tuple(x.values())
    pool = torch.full((5, 4, 128, 128), math.nan)
    idx = torch.tensor([0, 3], dtype=torch.int32)
    e = lambda match, *a, **kw: _expect(api, lib, d, match, *a, pool=True, poisoned=(pool,), **kw)  # noqa: E731
    e(r"state_pool shape: got \[4, 128, 128\]", *base, pool[0], idx)
    e(r"state_pool shape: got \[5, 4, 128, 64\]", *base, pool[..., :64].contiguous(), idx)
    e(r"state_pool dtype: got bfloat16", *base, pool.bfloat16(), idx)
    e(r"ssm_state_indices shape: got \[3\]; allowed: \[2\]", *base, pool, torch.tensor([0, 1, 2], dtype=torch.int32))
    e(r"ssm_state_indices dtype: got float32", *base, pool, idx.float())
    e(r"q device: got cpu", *base, pool, idx)


def _no_gpu(*_):
    """current_capability on a host without a GPU (the driver library cannot be found)."""
    try:
        raise RuntimeError("libcuda.so.1 not found")
    except RuntimeError as exc:
        raise ArtifactError("cannot determine the GPU's compute capability (RuntimeError: libcuda.so.1 not found); "
                            "no CUDA device is visible") from exc


def test_no_device_message_says_what_the_user_can_pass(tmp_path, monkeypatch):
    """Without a GPU the arch cannot be chosen: the message names kda2.load(<this build>, arch=...) (the calls take
    no arch=, but library=) and that the tensors must be on a CUDA device."""
    from kda2.runtime import device
    generic = str(device.no_device_error(RuntimeError("no driver")))
    assert "kda2.load(" in generic and "arch='sm_90a'" in generic and "library=lib" in generic
    assert "take no arch=" in generic and "device 'cuda'" in generic
    build = tmp_path / "build"
    for spec, arch in (("rec", "sm_80"), ("rec", "sm_90a"), ("chk", "sm_90a")):
        (build / spec / arch).mkdir(parents=True)
        (build / spec / arch / "manifest.json").write_text(json.dumps({"family": "chunk" if spec == "chk"
                                                                       else "recurrent"}))
    monkeypatch.setattr(loader, "current_capability", _no_gpu)
    with pytest.raises(ArtifactError) as ei:
        loader.load(build / "rec")  # a spec directory: the arch would be chosen for the GPU
    msg = str(ei.value)
    assert "no CUDA device is visible" in msg and "libcuda.so.1 not found" in msg
    assert f"lib = kda2.load('{build / 'rec'}', arch='sm_90a') (built: sm_80, sm_90a)" in msg
    assert "library=lib" in msg and "Pass arch=" not in msg
    monkeypatch.setenv("KDA2_BUILD_DIR", str(build))
    with pytest.raises(ArtifactError) as ei:
        loader.default_library("chunk")
    assert f"lib = kda2.load('{build / 'chk'}', arch='sm_90a') (built chunk libraries: chk/sm_90a)" in str(ei.value)


def test_input_errors_are_not_hidden_by_the_library_lookup(tmp_path, monkeypatch):
    """No GPU (the default library cannot be chosen): wrong arguments still get their own error, checked without
    a library; only a call whose arguments look right gets the no-device error."""
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    import kda2
    (tmp_path / "build" / "rec" / "sm_90a").mkdir(parents=True)
    (tmp_path / "build" / "rec" / "sm_90a" / "manifest.json").write_text(json.dumps({"family": "recurrent"}))
    (tmp_path / "build" / "chk" / "sm_90a").mkdir(parents=True)
    (tmp_path / "build" / "chk" / "sm_90a" / "manifest.json").write_text(json.dumps({"family": "chunk"}))
    monkeypatch.setenv("KDA2_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(loader, "current_capability", _no_gpu)
    x = _inputs(torch)
    q, k, v, g, beta = x.values()
    rec, chunk = kda2.fused_recurrent_kda, kda2.chunk_kda
    for fn in (rec, chunk):
        for match, args, kw in (
                (r"^q: got None; allowed: a torch.Tensor on a CUDA device$", (None, k, v, g, beta), {}),
                (r"^q: got list; allowed: a torch.Tensor", ([[1.0]], k, v, g, beta), {}),
                (r"^q: got numpy.ndarray; allowed: a torch.Tensor on a CUDA device \(convert a numpy array with "
                 r"torch.from_numpy\(x\).cuda\(\)\)$", (q.float().numpy(), k, v, g, beta), {}),
                (r"^q shape: got \[3, 2, 128\]; allowed: a tensor \[B, T, H, K\]$", (q[0], k, v, g, beta), {}),
                (r"^k shape: got \[2, 3, 2, 64\]", (q, k[..., :64].contiguous(), v, g, beta), {}),
                (r"^q dtype: got float32; allowed: bf16 or fp16 .*cast q/k/v", (q.float(), k, v, g, beta), {}),
                (r"^beta dtype: got float64", (q, k, v, g, beta.double()), {}),
                (r"^initial_state: got numpy.ndarray", (q, k, v, g, beta), {"initial_state": np.zeros(3)})):
            with pytest.raises(KDA2InputError, match=match) as ei:
                fn(*args, **kw)
            assert ei.value.__suppress_context__, "the failed lookup must not be shown as the cause"
        with pytest.raises(TypeError, match=r"got unexpected keyword arguments \['use_gate_in_kernl'\]"):
            fn(q, k, v, g, beta, use_gate_in_kernl=True)
        with pytest.raises(ArtifactError, match=r"no CUDA device is visible.*library=lib"):
            fn(q, k, v, g, beta)  # right arguments (on CPU): the real problem is the missing GPU
    pool, idx = torch.zeros(5, 4, 128, 128), torch.tensor([0, 3], dtype=torch.int32)
    with pytest.raises(KDA2InputError, match=r"^state_pool: got None; allowed: a torch.Tensor"):
        kda2.fused_recurrent_kda_pool(q, k, v, g, beta, None, idx)
    with pytest.raises(KDA2InputError, match=r"^ssm_state_indices: got list"):
        kda2.prepare_pool(q, k, v, g, beta, pool, [0, 3])
    with pytest.raises(KDA2InputError, match=r"^v: got numpy.ndarray"):
        kda2.prepare_pool(q, k, v.float().numpy(), g, beta, pool, idx)
    with pytest.raises(ArtifactError, match=r"no CUDA device is visible"):
        kda2.fused_recurrent_kda_pool(q, k, v, g, beta, pool, idx)


def test_non_tensor_arguments_are_named_by_type(api_env):
    """With a library: an array of the right shape but the wrong type says so (not "shape")."""
    torch, api, lib, d = api_env
    np = pytest.importorskip("numpy")
    x = _inputs(torch)
    base = tuple(x.values())

    class DLPackArray:  # what CuPy / JAX arrays look like to the runtime
        def __dlpack__(self, stream=None):
            raise NotImplementedError

    e = lambda match, *a, **kw: _expect(api, lib, d, match, *a, **kw)  # noqa: E731
    e(r"^q: got numpy.ndarray; allowed: a torch.Tensor on a CUDA device \(convert a numpy array with "
      r"torch.from_numpy\(x\).cuda\(\)\)$", x["q"].float().numpy(), *base[1:])
    e(r"^v: got numpy.ndarray; allowed: a torch.Tensor on a CUDA device", *base[:2], x["v"].float().numpy(), *base[3:])
    e(r"^k: got list; allowed: a torch.Tensor on a CUDA device$", x["q"], x["k"].tolist(), *base[2:])
    e(r"^g: got .*DLPackArray; allowed: a torch.Tensor on a CUDA device \(.*torch.from_dlpack\(x\)\)$",
      *base[:3], DLPackArray(), x["beta"])
    e(r"^q: got None; allowed: a torch.Tensor on a CUDA device$", None, *base[1:])
    e(r"^state_pool: got numpy.ndarray; allowed: a torch.Tensor on a CUDA device", *base,
      np.zeros((5, 4, 128, 128)), torch.zeros(2, dtype=torch.int32), pool=True)


def test_feature_not_compiled(tmp_path):
    torch = pytest.importorskip("torch")
    if CC is None:
        pytest.skip("no C compiler")
    from kda2.runtime import api
    api._init_torch()
    feats = dict(FEATURES, gate_modes=["precomputed", "softplus"], qk_l2norm=False, beta_sigmoid=False,
                 varlen=False, state_layouts=["v_first"])
    lib = loader.load(make_fake_build(tmp_path / "build", spec="narrow", features=feats))
    d = _hooks(lib)
    x = _inputs(torch)
    base = tuple(x.values())
    e = lambda match, *a, **kw: _expect(api, lib, d, match, *a, **kw)  # noqa: E731
    e(r"gate mode 'lower_bound' .* not compiled into spec narrow.*compiled: precomputed .*softplus", *base,
      use_gate_in_kernel=True, lower_bound=-5.0, state_v_first=True)
    e(r"qk_l2norm is not compiled", *base, use_qk_l2norm_in_kernel=True, state_v_first=True)
    e(r"beta_sigmoid is not compiled", *base, use_beta_sigmoid_in_kernel=True, state_v_first=True)
    e(r"state layout k_first is not built.*pass state_v_first=True", *base)
    one = [t[:1] for t in base]
    e(r"varlen is not compiled", *one, cu_seqlens=torch.tensor([0, 3]), state_v_first=True)


class _FakeCuda:
    """Lets the full API path run on CPU tensors into the fake library (device checks stubbed)."""

    def __init__(self, monkeypatch, api, lib):
        from kda2.runtime import validate
        monkeypatch.setattr(validate, "require_cuda", lambda dev: None)
        monkeypatch.setattr(api, "_raw_stream", lambda idx: 0x5EED)
        lib._checked_devices.add(None)  # CPU tensors have device index None


def test_api_fills_args_struct(api_env, monkeypatch):
    torch, api, lib, d = api_env
    _FakeCuda(monkeypatch, api, lib)
    x = _inputs(torch, B=2, T=3, H=2, HV=4, g_dtype=torch.bfloat16, beta_dtype=torch.bfloat16)
    A_log, dt_bias = torch.zeros(4), torch.zeros(4 * 128)
    h0 = torch.zeros(2, 4, 128, 128)
    o, ht = api.fused_recurrent_kda(*x.values(), A_log=A_log, dt_bias=dt_bias, initial_state=h0,
                                    output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                    use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True, lower_bound=-3.0,
                                    library=lib)
    a = d.kda2_test_last().contents
    assert o.shape == x["v"].shape and o.dtype == torch.bfloat16 and ht.shape == (2, 4, 128, 128)
    ptrs = {"q": x["q"], "k": x["k"], "v": x["v"], "g": x["g"], "beta": x["beta"], "A_log": A_log,
            "dt_bias": dt_bias, "o": o, "h0": h0, "ht": ht}
    for name, t in ptrs.items():
        assert getattr(a, name) == t.data_ptr(), name
    assert a.cu_seqlens is None and a.state_indices is None
    assert (a.N, a.T, a.H, a.HV, a.gate_mode, a.state_v_first) == (2, 3, 2, 4, abi.GATE_LOWER_BOUND, 0)
    assert a.scale == pytest.approx(128 ** -0.5) and a.lower_bound == -3.0
    assert a.flags == (abi.FLAG_QK_L2NORM | abi.FLAG_BETA_SIGMOID | abi.FLAG_NEG_EIGVAL | abi.FLAG_G_BF16
                       | abi.FLAG_BETA_BF16 | abi.FLAG_HAS_A_LOG | abi.FLAG_HAS_DT_BIAS)
    assert d.kda2_test_last_max_seqlen() == 3 and d.kda2_test_last_stream() == 0x5EED

    # precomputed gate: A_log/dt_bias ignored as in FLA; no final state -> ht NULL; V-first; custom scale
    o2, ht2 = api.fused_recurrent_kda(*_inputs(torch).values(), A_log=A_log, scale=0.25, state_v_first=True,
                                      library=lib, out=o)
    a = d.kda2_test_last().contents
    assert ht2 is None and o2 is o and a.ht is None and a.h0 is None and a.A_log is None
    assert (a.gate_mode, a.flags, a.state_v_first, a.scale) == (abi.GATE_PRECOMPUTED, 0, 1, 0.25)

    # varlen with int32 cu_seqlens (converted), longest sequence from the host copy picks the bucket
    one = [t[:1] for t in _inputs(torch, B=1, T=70).values()]
    cu = torch.tensor([0, 2, 67, 70], dtype=torch.int32)
    _, ht3 = api.fused_recurrent_kda(*one, use_gate_in_kernel=True, A_log=A_log, cu_seqlens=cu,
                                     output_final_state=True, library=lib)
    a = d.kda2_test_last().contents
    assert (a.N, a.T, a.gate_mode) == (3, 70, abi.GATE_SOFTPLUS) and ht3.shape == (3, 4, 128, 128)
    assert a.cu_seqlens not in (None, cu.data_ptr()) and d.kda2_test_last_max_seqlen() == 65
    api.fused_recurrent_kda(*one, cu_seqlens=cu.long(), max_seqlen=999, library=lib)
    assert d.kda2_test_last_max_seqlen() == 999

    # pool form: h0 == ht == pool, indices passed through (int64 converted)
    pool = torch.zeros(7, 4, 128, 128)
    idx = torch.tensor([5, -1], dtype=torch.int32)
    o4 = api.fused_recurrent_kda_pool(*_inputs(torch).values(), pool, idx, library=lib)
    a = d.kda2_test_last().contents
    assert a.h0 == a.ht == pool.data_ptr() and a.state_indices == idx.data_ptr() and o4.shape == (2, 3, 4, 128)
    api.fused_recurrent_kda_pool(*_inputs(torch).values(), pool, idx.long(), library=lib)
    assert d.kda2_test_last().contents.state_indices != idx.data_ptr()

    # legacy alias, with FLA's DeprecationWarning at the caller's line
    with pytest.warns(DeprecationWarning, match="`transpose_state_layout` is deprecated") as w:
        api.fused_recurrent_kda(*_inputs(torch).values(), transpose_state_layout=True, library=lib)
    assert w[0].filename == __file__
    assert d.kda2_test_last().contents.state_v_first == 1


def test_launch_error_surfaces(api_env, monkeypatch):
    torch, api, lib, d = api_env
    _FakeCuda(monkeypatch, api, lib)
    d.kda2_test_force_rc(700)
    try:
        with pytest.raises(KDA2LaunchError, match="CUDA error 700"):
            api.fused_recurrent_kda(*_inputs(torch).values(), library=lib)
    finally:
        d.kda2_test_force_rc(0)


def test_zero_tokens_launch_nothing(api_env, monkeypatch):
    torch, api, lib, d = api_env
    _FakeCuda(monkeypatch, api, lib)
    calls = d.kda2_test_calls()
    h0 = torch.randn(2, 4, 128, 128)
    o, ht = api.fused_recurrent_kda(*_inputs(torch, T=0).values(), initial_state=h0, output_final_state=True,
                                    library=lib)
    assert o.shape == (2, 0, 4, 128) and torch.equal(ht, h0) and d.kda2_test_calls() == calls


def test_per_call_overhead_is_small(api_env, monkeypatch):
    """Python overhead of one decode call into the fake library (no GPU): a regression guard, loose bound."""
    import time
    torch, api, lib, d = api_env
    _FakeCuda(monkeypatch, api, lib)
    x = _inputs(torch, B=1, T=1, H=32, HV=32)
    pool = torch.zeros(2, 32, 128, 128)
    idx = torch.zeros(1, dtype=torch.int32)
    out = torch.empty_like(x["v"])
    fn = api.fused_recurrent_kda_pool
    args = (*x.values(), pool, idx)
    for _ in range(200):
        fn(*args, library=lib, out=out, use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True)
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args, library=lib, out=out, use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True)
    us = (time.perf_counter() - t0) / n * 1e6
    print(f"fused_recurrent_kda_pool Python overhead: {us:.1f} us/call")
    assert us < 200


def test_fast_path_revalidates_what_it_does_not_cache(api_env, monkeypatch):
    """A cached verdict covers shapes/dtypes/devices/options only: contiguity and pointers are per call."""
    torch, api, lib, d = api_env
    _FakeCuda(monkeypatch, api, lib)
    x = _inputs(torch, B=2, T=1)
    pool = torch.zeros(4, 4, 128, 128)
    idx = torch.tensor([3, 1], dtype=torch.int32)
    kw = dict(use_gate_in_kernel=True, A_log=torch.zeros(4), library=lib)
    out = torch.empty_like(x["v"])
    api.fused_recurrent_kda_pool(*x.values(), pool, idx, out=out, **kw)
    first = bytes(d.kda2_test_last().contents)
    assert len(api._fast) == 1
    api.fused_recurrent_kda_pool(*x.values(), pool, idx, out=out, **kw)  # cached: the same struct
    assert bytes(d.kda2_test_last().contents) == first
    y = _inputs(torch, B=2, T=1)  # same signature, new tensors: new pointers
    api.fused_recurrent_kda_pool(*y.values(), pool, idx, **kw)
    assert d.kda2_test_last().contents.q == y["q"].data_ptr() != x["q"].data_ptr()
    calls = d.kda2_test_calls()
    v_nc = torch.empty(2, 1, 4, 256, dtype=torch.bfloat16)[..., :128]  # same shape, not contiguous
    with pytest.raises(KDA2InputError, match="non-contiguous"):
        api.fused_recurrent_kda_pool(x["q"], x["k"], v_nc, x["g"], x["beta"], pool, idx, **kw)
    with pytest.raises(KDA2InputError, match="beta dtype"):  # (device indices are in the key the same way)
        api.fused_recurrent_kda_pool(*list(x.values())[:4], x["beta"].double(), pool, idx, **kw)
    with pytest.raises(KDA2InputError, match="lower_bound"):
        api.fused_recurrent_kda_pool(*x.values(), pool, idx, lower_bound=3.0, **kw)
    assert d.kda2_test_calls() == calls
    # dense form: cached too, final state allocated per call
    _, ht1 = api.fused_recurrent_kda(*x.values(), output_final_state=True, **kw)
    _, ht2 = api.fused_recurrent_kda(*x.values(), output_final_state=True, **kw)
    assert ht1.data_ptr() != ht2.data_ptr() and d.kda2_test_last().contents.ht == ht2.data_ptr()
    assert len(api._fast) == 3  # pool with out=, pool without, dense


# --- chunk_kda (family chunk) -------------------------------------------------------------------------

@pytest.fixture
def chunk_env(tmp_path):
    torch = pytest.importorskip("torch")
    if CC is None:
        pytest.skip("no C compiler to build the fake library")
    from kda2.runtime import api, chunk
    lib = loader.load(make_fake_build(tmp_path / "build", spec="fake_chunk", family="chunk",
                                      features=dict(FEATURES, gva_ratios=[1, 2]), buckets=(2048, 8192, 65536)))
    api._init_torch()
    api._fast.clear()
    chunk.release_workspaces()
    yield torch, chunk, lib, _hooks(lib)
    chunk.release_workspaces()


def _expect_chunk(chunk, lib, d, match, *args, err=KDA2InputError, **kw):
    calls = d.kda2_test_calls()
    with pytest.raises(err, match=match):
        chunk.chunk_kda(*args, library=lib, **kw)
    assert d.kda2_test_calls() == calls


def test_chunk_workspace_formula_matches_the_header(chunk_env):
    """The Python formula (what chunk_kda allocates) equals the header's, compiled into the fake .so."""
    torch, chunk, lib, d = chunk_env
    args = abi.KDA2RecurrentArgs()
    for N, T, HV, varlen in ((1, 1, 1, False), (2, 64, 32, False), (2, 65, 32, False), (8, 2048, 32, False),
                             (1, 65536, 32, False), (6, 8195, 64, True), (1, 0, 4, True), (3, 127, 8, True)):
        args.N, args.T, args.HV, args.cu_seqlens = N, T, HV, 0x100 if varlen else None
        want = chunk.workspace_bytes(N, T, HV, 128, 128, varlen)
        assert lib.workspace_bytes(args) == want == abi.chunk_workspace_bytes(N, T, HV, 128, 128, varlen)
    # slot: w, qg, kg (64 x K bf16), u^T (V x 64 bf16), Aqk (64 x 64 bf16), last gate row (K fp32)
    assert abi.chunk_slot_bytes(128, 128) == 49152 + 16384 + 8192 + 512 == 74240
    # 1026 chunk ids x 32 heads of slots, then the ready region: a 16-byte head and an int32 flag per slot
    assert abi.chunk_workspace_bytes(1, 65536, 32, 128, 128, False) == (1024 + 2) * 32 * 74240 + 16 + 1026 * 32 * 4


def test_chunk_kda_validation_errors(chunk_env):
    torch, chunk, lib, d = chunk_env
    x = _inputs(torch, H=2, HV=4)
    base = tuple(x.values())
    e = lambda match, *a, **kw: _expect_chunk(chunk, lib, d, match, *a, **kw)  # noqa: E731
    # the checks fused_recurrent_kda makes
    e(r"q dtype: got float16; allowed: bf16 \(input dtypes built into spec fake_chunk .*add fp16 to "
      r"features.input_dtypes", x["q"].half(), *base[1:])
    e(r"v heads: got HV=3 with H=2; allowed: HV >= H >= 1 with HV % H == 0", *_inputs(torch, H=2, HV=3).values())
    e(r"A_log: got None.*softplus", *base, use_gate_in_kernel=True)
    e(r"lower_bound: got 1.0", *base, use_gate_in_kernel=True, lower_bound=1.0)
    e(r"allow_neg_eigval=True requires use_beta_sigmoid_in_kernel", *base, allow_neg_eigval=True)
    e(r"initial_state shape", *base, initial_state=torch.zeros(2, 4, 128, 127))
    e(r"final_state_out: got a tensor with output_final_state=False", *base, final_state_out=torch.zeros(2, 4, 128, 128))
    # chunk_kda's own: safe_gate as FLA checks it, FLA keywords kda2 does not implement
    e(r"lower_bound: got None; allowed: a float in \[-5, 0\) with safe_gate=True", *base, safe_gate=True,
      use_gate_in_kernel=True, A_log=torch.zeros(4))
    e(r"lower_bound: got -6.0; allowed: a float in the safe range \[-5, 0\)", *base, safe_gate=True,
      use_gate_in_kernel=True, lower_bound=-6.0)
    e(r"chunk_size=32: .*pass chunk_size=64", *base, chunk_size=32)
    e(r"chunk_size: got 16; allowed: 64", *base, chunk_size=16)
    e(r"split: got True; allowed: None \(the library's choice\) or an int", *base, split=True)
    e(r"return_intermediate_states=True is not supported", *base, return_intermediate_states=True)
    e(r"cp_context .* not supported", *base, cp_context=object())
    e(r"chunk_kda\(\) got unexpected keyword arguments \['bogus'\]", *base, bogus=1, err=TypeError)
    e(r"pass either state_v_first or the deprecated transpose_state_layout", *base, state_v_first=True,
      transpose_state_layout=True)
    # safe_gate without the in-kernel gate is not checked (as in FLA); everything valid: the device is last
    e(r"q device: got cpu; allowed: a CUDA device", *base, safe_gate=True, lower_bound=-9.0, chunk_size=64,
      disable_recompute=True)
    # 16-byte rows for the kernels' vector loads: a contiguous view that starts 2 bytes into the storage
    q_off = torch.zeros(x["q"].numel() + 1, dtype=torch.bfloat16)[1:].view(x["q"].shape)
    e(r"q data pointer: got 0x[0-9a-f]+ \(storage offset 1\); allowed: a 16-byte aligned address", q_off, *base[1:])
    h_off = torch.zeros(2 * 4 * 128 * 128 + 1)[1:].view(2, 4, 128, 128)
    e(r"initial_state data pointer: .*allowed: a 8-byte aligned address", *base, initial_state=h_off)
    # no bucket limit: a chunk library runs any length (the device check is what stops this CPU call)
    e(r"q device: got cpu", *_inputs(torch, B=1, T=70000, H=2, HV=4).values())


def test_chunk_and_recurrent_libraries_are_not_mixed(chunk_env, tmp_path):
    torch, chunk, lib, d = chunk_env
    from kda2.runtime import api
    rec = loader.load(make_fake_build(tmp_path / "rb"))
    x = tuple(_inputs(torch).values())
    with pytest.raises(KDA2InputError, match=r"spec fake_spec \(sm_90a\) is family 'recurrent'; chunk_kda needs a "
                                             r"chunk library.*or call fused_recurrent_kda with this one"):
        chunk.chunk_kda(*x, library=rec)
    with pytest.raises(KDA2InputError, match=r"family 'chunk'; fused_recurrent_kda needs a recurrent library.*"
                                             r"or call chunk_kda with this one"):
        api.fused_recurrent_kda(*x, library=lib)
    pool, idx = torch.zeros(3, 4, 128, 128), torch.zeros(2, dtype=torch.int32)
    with pytest.raises(KDA2InputError, match="fused_recurrent_kda needs a recurrent library"):
        api.fused_recurrent_kda_pool(*x, pool, idx, library=lib)


def test_chunk_kda_fills_args_and_reuses_the_workspace(chunk_env, monkeypatch):
    torch, chunk, lib, d = chunk_env
    from kda2.runtime import api
    _FakeCuda(monkeypatch, api, lib)
    x = _inputs(torch, B=2, T=100, H=2, HV=4, g_dtype=torch.bfloat16)
    A_log, dt_bias, h0 = torch.zeros(4), torch.zeros(4 * 128), torch.zeros(2, 4, 128, 128)
    o, ht = chunk.chunk_kda(*x.values(), initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True,
                            use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
                            library=lib)
    a = d.kda2_test_last().contents
    for name, t in {"q": x["q"], "k": x["k"], "v": x["v"], "g": x["g"], "beta": x["beta"], "A_log": A_log,
                    "dt_bias": dt_bias, "o": o, "h0": h0, "ht": ht}.items():
        assert getattr(a, name) == t.data_ptr(), name
    assert (a.N, a.T, a.H, a.HV, a.gate_mode, a.state_v_first) == (2, 100, 2, 4, abi.GATE_SOFTPLUS, 0)
    assert a.flags == (abi.FLAG_QK_L2NORM | abi.FLAG_BETA_SIGMOID | abi.FLAG_G_BF16 | abi.FLAG_HAS_A_LOG
                       | abi.FLAG_HAS_DT_BIAS)
    assert a.state_indices is None and a.cu_seqlens is None
    need = abi.chunk_workspace_bytes(2, 100, 4, 128, 128, False)
    assert a.workspace and a.workspace_bytes >= need and a.max_seqlen == 100 == d.kda2_test_last_max_seqlen()
    assert d.kda2_test_last_stream() == 0x5EED
    ws = (a.workspace, a.workspace_bytes)
    # same shape: the cached workspace again (no allocation); a larger one grows it once
    chunk.chunk_kda(*x.values(), library=lib, state_v_first=True, scale=0.5)
    a = d.kda2_test_last().contents
    assert (a.workspace, a.workspace_bytes) == ws and (a.state_v_first, a.scale, a.h0, a.ht) == (1, 0.5, None, None)
    big = _inputs(torch, B=1, T=70000, H=2, HV=4)  # above the largest bucket (65536): the last variant runs
    chunk.chunk_kda(*big.values(), library=lib)
    a = d.kda2_test_last().contents
    assert a.workspace_bytes >= abi.chunk_workspace_bytes(1, 70000, 4, 128, 128, False) > ws[1]
    assert d.kda2_test_last_max_seqlen() == 70000
    assert lib.select(False, 70000, 1) == lib.select(False, 65536, 1)


def test_inputs_that_require_grad_are_warned_once(chunk_env, monkeypatch):
    """kda2 is forward-only: with autograd recording and an input that requires grad (a model's nn.Parameter
    A_log outside torch.no_grad()), the first call says so once; under no_grad nothing is said; the call runs."""
    import warnings

    torch, chunk, lib, d = chunk_env
    from kda2.runtime import api, validate
    _FakeCuda(monkeypatch, api, lib)
    monkeypatch.setattr(validate, "forward_only_warned", False)
    x = _inputs(torch, B=1, T=100, H=2, HV=4)
    A_log = torch.nn.Parameter(torch.zeros(4))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.no_grad():
            chunk.chunk_kda(*x.values(), use_gate_in_kernel=True, A_log=A_log, library=lib)
        chunk.chunk_kda(*x.values(), library=lib)  # nothing requires grad
        assert not w
        o, _ = chunk.chunk_kda(*x.values(), use_gate_in_kernel=True, A_log=A_log, library=lib)
        chunk.chunk_kda(*x.values(), use_gate_in_kernel=True, A_log=A_log, library=lib)
    assert len(w) == 1 and "chunk_kda computes the forward only" in str(w[0].message) and w[0].filename == __file__
    assert not o.requires_grad


def test_chunk_kda_takes_flas_positional_order(chunk_env, monkeypatch):
    """FLA 0.6's chunk_kda(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel,
    use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, safe_gate, lower_bound, disable_recompute,
    return_intermediate_states, state_v_first, cu_seqlens, cu_seqlens_cpu, cp_context, use_graph, max_num_seqs):
    a call written for FLA with every argument positional means the same here (the 15th was state_v_first, so
    disable_recompute=True ran the states transposed), and FLA's graph keywords are taken."""
    torch, chunk, lib, d = chunk_env
    from kda2.runtime import api
    _FakeCuda(monkeypatch, api, lib)
    x = _inputs(torch, B=1, T=100, H=2, HV=4)
    cu = torch.tensor([0, 40, 100])
    chunk.chunk_kda(*x.values(), 0.5, None, False, False, False, False, False, False, None, True, False, False, cu,
                    cu, None, True, 8, library=lib)
    a = d.kda2_test_last().contents
    assert (a.state_v_first, a.scale, a.N, a.cu_seqlens) == (0, 0.5, 2, cu.data_ptr())
    chunk.chunk_kda(*x.values(), 0.5, None, False, False, False, False, False, False, None, False, False, True,
                    library=lib)
    assert d.kda2_test_last().contents.state_v_first == 1
    with pytest.raises(KDA2InputError, match=r"max_num_seqs: got 0; allowed: None or an int >= 1"):
        chunk.chunk_kda(*x.values(), max_num_seqs=0, library=lib)
    with pytest.warns(DeprecationWarning, match="`transpose_state_layout` is deprecated") as w:
        chunk.chunk_kda(*x.values(), transpose_state_layout=True, library=lib)
    assert w[0].filename == __file__ and d.kda2_test_last().contents.state_v_first == 1

    # varlen: T is the packed total, max_seqlen the longest sequence (from the host copy, or the hint)
    one = [t[:1] for t in _inputs(torch, B=1, T=300, H=2, HV=4).values()]
    cu = torch.tensor([0, 10, 290, 300], dtype=torch.int32)
    _, ht3 = chunk.chunk_kda(*one, cu_seqlens=cu, output_final_state=True, library=lib)
    a = d.kda2_test_last().contents
    assert (a.N, a.T, a.max_seqlen) == (3, 300, 280) and ht3.shape == (3, 4, 128, 128)
    assert a.cu_seqlens not in (None, cu.data_ptr())  # converted to int64
    assert a.workspace_bytes >= abi.chunk_workspace_bytes(3, 300, 4, 128, 128, True)
    chunk.chunk_kda(*one, cu_seqlens=cu.long(), max_seqlen=4096, library=lib)
    assert d.kda2_test_last().contents.max_seqlen == 4096 == d.kda2_test_last_max_seqlen()
    chunk.chunk_kda(*one, cu_seqlens=cu.long(), cu_seqlens_cpu=cu.long(), library=lib)
    assert d.kda2_test_last().contents.max_seqlen == 280


def test_chunk_kda_zero_tokens_and_launch_errors(chunk_env, monkeypatch):
    torch, chunk, lib, d = chunk_env
    from kda2.runtime import api
    _FakeCuda(monkeypatch, api, lib)
    calls = d.kda2_test_calls()
    h0 = torch.randn(2, 4, 128, 128)
    o, ht = chunk.chunk_kda(*_inputs(torch, T=0).values(), initial_state=h0, output_final_state=True, library=lib)
    assert o.shape == (2, 0, 4, 128) and torch.equal(ht, h0) and d.kda2_test_calls() == calls
    d.kda2_test_force_rc(abi.ERR_WORKSPACE)
    try:
        with pytest.raises(KDA2LaunchError, match="KDA2_ERR_WORKSPACE"):
            chunk.chunk_kda(*_inputs(torch).values(), library=lib)
    finally:
        d.kda2_test_force_rc(0)


@needs_cc
def test_default_library_per_family(tmp_path, monkeypatch):
    build = tmp_path / "build"
    rec = make_fake_build(build, spec="rec", arch="sm_90a")
    chk = make_fake_build(build, spec="chk", arch="sm_90a", family="chunk")
    monkeypatch.setattr(loader, "current_capability", lambda *a: (9, 0))
    monkeypatch.setenv("KDA2_BUILD_DIR", str(build))
    assert loader.default_library().spec == "rec" and loader._default.spec == "rec"
    assert loader.default_library("chunk").spec == "chk" and loader.default_library().spec == "rec"
    assert [p.parent.parent.name for p in loader.discover(build, family="chunk")] == ["chk"]
    loader.clear_cache()
    monkeypatch.setenv("KDA2_LIBRARY", str(rec))
    assert loader.default_library().spec == "rec"
    with pytest.raises(ArtifactError, match=r"KDA2_LIBRARY=.* is a recurrent library \(spec rec\), but this call "
                                            r"needs a chunk library"):
        loader.default_library("chunk")
    loader.clear_cache()
    monkeypatch.delenv("KDA2_LIBRARY")
    monkeypatch.setenv("KDA2_BUILD_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactError, match="no built chunk library") as e:
        loader.default_library("chunk")
    assert "KDA2_BUILD_DIR=" in str(e.value) and "KDA2_LIBRARY=" in str(e.value)   # both ways to point elsewhere
    assert chk.is_file()


@pytest.mark.parametrize("manifest", sorted((ROOT / "build").glob("*/*/manifest.json")) or [None],
                         ids=lambda p: "/".join(p.parts[-3:-1]) if p else "none")
def test_real_build_loads_on_cpu(manifest):
    """A real build (if one is in ./build) verifies, loads and cross-checks without a GPU or driver."""
    if manifest is None:
        pytest.skip("no build/<spec>/<arch>/manifest.json (run `scons` first)")
    lib = loader.load(manifest)
    assert lib.family in ("recurrent", "chunk") and lib.k > 0 and lib.v > 0
    for entry in lib.dispatch:
        assert lib.select(entry["state_layout"] == "v_first", entry["bucket"], entry["min_chains"]) == entry["index"]
    layout = lib.features.state_layouts[0]
    if lib.family == "chunk":  # any length: above the largest bucket, the last bucket's variant
        last = next(d["index"] for d in lib.dispatch if d["state_layout"] == layout and d["bucket"] == lib.max_bucket)
        assert lib.select(layout == "v_first", lib.max_bucket + 1, 0) == last
        args = abi.KDA2RecurrentArgs(N=2, T=3000, H=4, HV=8)
        assert lib.workspace_bytes(args) == abi.chunk_workspace_bytes(2, 3000, 8, lib.k, lib.v, False)
    else:
        with pytest.raises(KDA2LaunchError, match="BUCKET_OVERFLOW"):
            lib.select(layout == "v_first", lib.max_bucket + 1, 0)
        assert lib.workspace_bytes(abi.KDA2RecurrentArgs(N=2, T=3000, H=4, HV=8)) == 0


def test_a_cached_library_still_answers_arch(tmp_path):
    """kda2.load(path, arch=...) refuses a library built for another arch whether or not this process loaded that path
    before (the cache once returned it regardless: a server pinning an arch got whichever was loaded first)."""
    m = make_fake_build(tmp_path / "build", spec="pinned", arch="sm_90a")
    lib = loader.load(m)
    assert loader.load(m, arch="sm_90a") is lib
    for asked in ("sm_80", "sm_100a"):
        with pytest.raises(ArtifactError, match=rf"built for arch 'sm_90a', not the requested '{asked}'"):
            loader.load(m, arch=asked)
