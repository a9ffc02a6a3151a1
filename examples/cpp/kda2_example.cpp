// kda2_example: drive a built KDA² library (lib<spec>.<arch>.so) from C++ through its C ABI, the way a C++
// inference server would: dlopen, check the ABI version, read the library's JSON, make one real call on
// CUDA-runtime memory and check the result against a float64 CPU reference of the KDA recurrence.
//
//   kda2_example <lib.so> [--seed N] [--n N] [--t T] [--h H] [--hv HV] [--k K] [--v V]
//                [--layout auto|k_first|v_first] [--gate auto|precomputed|softplus] [--device D]
//
// The call: a recurrent library runs one decode step (T = 1, N sequences, each continuing from a random
// initial state); a chunk library runs a short dense prefill (T = 100 tokens: one full 64-token chunk and a
// partial one) with the workspace sized by kda2_workspace_bytes(). Inputs: q, k (unit norm, as a model with
// QK l2norm would produce them), v in bf16; g as a log decay (precomputed gate, fp32, g <= 0) or, for a
// library built without that gate mode, raw fp32 g with A_log / dt_bias (softplus gate); beta fp32 in (0, 1);
// flags otherwise 0. Outputs o (bf16) and the final state (fp32) are poisoned with 0xFF bytes (NaN) first.
//
// Exit status: 0 pass; 1 wrong or unwritten output; 2 usage (an unknown option, a value out of range, a
// shape rule such as HV % H == 0), library or ABI problem (including a kda2 status from the checks that touch
// no device: kda2_select and the N = 0 probe); 3 no usable CUDA device (the library was loaded and checked,
// but nothing can run); 4 a CUDA or kda2 call on the device failed.
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime_api.h>

#include "kda2/abi.h"

namespace {

constexpr double kTolerance = 5e-3;  // relative L2 error of o and of the final state (as tests/gpu)
constexpr int kExitOk = 0, kExitWrong = 1, kExitSetup = 2, kExitNoDevice = 3, kExitCall = 4;

// ---- the library's entry points, resolved with dlsym ----------------------------------------------
struct Kda2 {
  decltype(&kda2_abi_version) abi_version = nullptr;
  decltype(&kda2_library_json) library_json = nullptr;
  decltype(&kda2_num_variants) num_variants = nullptr;
  decltype(&kda2_select) select = nullptr;
  decltype(&kda2_workspace_bytes) workspace_bytes = nullptr;
  decltype(&kda2_preload) preload = nullptr;
  decltype(&kda2_fwd) fwd = nullptr;
};

// KDA2Status name of a kda2 return code; positive codes are CUresult values of the CUDA driver API,
// named through libcuda's own cuGetErrorName when the driver is there.
std::string status_name(int rc) {
  switch (rc) {
    case KDA2_OK: return "KDA2_OK";
    case KDA2_ERR_BUCKET_OVERFLOW: return "KDA2_ERR_BUCKET_OVERFLOW";
    case KDA2_ERR_LAYOUT: return "KDA2_ERR_LAYOUT";
    case KDA2_ERR_FEATURE: return "KDA2_ERR_FEATURE";
    case KDA2_ERR_BAD_INDEX: return "KDA2_ERR_BAD_INDEX";
    case KDA2_ERR_SHAPE: return "KDA2_ERR_SHAPE";
    case KDA2_ERR_DRIVER: return "KDA2_ERR_DRIVER";
    case KDA2_ERR_NO_CONTEXT: return "KDA2_ERR_NO_CONTEXT";
    case KDA2_ERR_WORKSPACE: return "KDA2_ERR_WORKSPACE";
    default: break;
  }
  if (rc < 0) return "unknown KDA2Status " + std::to_string(rc);
  std::string name = "CUresult " + std::to_string(rc);
  // libcuda.so.1 is opened only to name the code (and left open: the program exits right after).
  if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    using GetName = int (*)(int, const char**);
    if (auto get = reinterpret_cast<GetName>(dlsym(cuda, "cuGetErrorName"))) {
      const char* s = nullptr;
      if (get(rc, &s) == 0 && s) name += std::string(" (") + s + ")";
    }
  }
  return name;
}

// What a KDA2Status means (kda2/abi.h); empty for CUresult codes (their name says it).
std::string status_meaning(int rc) {
  switch (rc) {
    case KDA2_OK: return "success";
    case KDA2_ERR_BUCKET_OVERFLOW: return "max_seqlen is above the largest sequence-length bucket built (recurrent libraries)";
    case KDA2_ERR_LAYOUT: return "the state layout is not built into this library";
    case KDA2_ERR_FEATURE: return "a gate mode or flag the call asks for is not compiled into this library";
    case KDA2_ERR_BAD_INDEX: return "no variant with that index";
    case KDA2_ERR_SHAPE: return "H/HV/N/T/max_seqlen are inconsistent (H, HV >= 1, HV % H == 0, 0 <= N <= 65535, T >= 0)";
    case KDA2_ERR_DRIVER: return "libcuda.so.1 could not be opened (no NVIDIA driver)";
    case KDA2_ERR_NO_CONTEXT: return "no current CUDA context (initialise CUDA first), or too many";
    case KDA2_ERR_WORKSPACE: return "the workspace is NULL or smaller than kda2_workspace_bytes() (chunk libraries)";
    case KDA2_ERR_DTYPE: return "the input dtype or a gate parameter dtype is not built into this library";
    default: return rc < 0 ? "not a status of this ABI version" : "";
  }
}

// "NAME: meaning" of a kda2 return code.
std::string status_text(int rc) {
  const std::string meaning = status_meaning(rc);
  return status_name(rc) + (meaning.empty() ? "" : ": " + meaning);
}

[[noreturn]] void die(int code, const std::string& msg) {
  std::fprintf(stderr, "kda2_example: %s\n", msg.c_str());
  std::exit(code);
}

// Every CUDA runtime call goes through this: on failure, name the call and the error and exit.
void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    die(kExitCall, std::string(what) + " failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}
#define CUDA_CHECK(call) cuda_check((call), #call)

// Every kda2 call that returns a status goes through this: the status's name and meaning, then `hint`.
void kda2_check(int rc, const char* what, const std::string& hint = "", int code = kExitCall) {
  if (rc != KDA2_OK) die(code, std::string(what) + " returned " + status_text(rc) + hint);
}

// ---- a minimal JSON reader: the raw text of a top-level member ----------------------------------------
// Enough for the library JSON and manifest.json: skips strings (with escapes) and nested values.
bool json_member(const std::string& js, const std::string& key, std::string* out) {
  int depth = 0;
  size_t i = 0;
  auto skip_string = [&](size_t p) {  // p at the opening quote; returns the index after the closing one
    for (++p; p < js.size(); ++p) {
      if (js[p] == '\\') ++p;
      else if (js[p] == '"') return p + 1;
    }
    return p;
  };
  while (i < js.size()) {
    const char c = js[i];
    if (c == '"') {
      const size_t end = skip_string(i);
      if (depth == 1) {  // a key of the top-level object if a ':' follows
        size_t j = end;
        while (j < js.size() && std::isspace(static_cast<unsigned char>(js[j]))) ++j;
        if (j < js.size() && js[j] == ':' && js.compare(i + 1, end - i - 2, key) == 0 && end - i - 2 == key.size()) {
          size_t s = j + 1;
          while (s < js.size() && std::isspace(static_cast<unsigned char>(js[s]))) ++s;
          size_t e = s;
          int d = 0;
          while (e < js.size()) {
            if (js[e] == '"') { e = skip_string(e); continue; }
            if (js[e] == '{' || js[e] == '[') ++d;
            else if (js[e] == '}' || js[e] == ']') { if (d == 0) break; --d; }
            else if (js[e] == ',' && d == 0) break;
            ++e;
          }
          while (e > s && std::isspace(static_cast<unsigned char>(js[e - 1]))) --e;
          *out = js.substr(s, e - s);
          return true;
        }
      }
      i = end;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') --depth;
    ++i;
  }
  return false;
}

std::string json_string(const std::string& js, const std::string& key) {
  std::string raw;
  if (!json_member(js, key, &raw) || raw.size() < 2 || raw.front() != '"') return "";
  return raw.substr(1, raw.size() - 2);
}

// The raw text of each element of a JSON array (`raw` as json_member returns it), in order.
std::vector<std::string> json_array(const std::string& raw) {
  std::vector<std::string> items;
  if (raw.size() < 2 || raw.front() != '[') return items;
  int depth = 0;
  size_t start = 1;
  auto push = [&](size_t end) {
    size_t s = start, e = end;
    while (s < e && std::isspace(static_cast<unsigned char>(raw[s]))) ++s;
    while (e > s && std::isspace(static_cast<unsigned char>(raw[e - 1]))) --e;
    if (e > s) items.push_back(raw.substr(s, e - s));
  };
  for (size_t i = 1; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '"') {
      for (++i; i < raw.size() && raw[i] != '"'; ++i)
        if (raw[i] == '\\') ++i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    } else if ((c == ',' && depth == 0) || (c == ']' && depth == 0)) {
      push(i);
      start = i + 1;
    }
  }
  return items;
}

long json_int(const std::string& js, const std::string& key, long fallback) {
  std::string raw;
  if (!json_member(js, key, &raw)) return fallback;
  char* end = nullptr;
  const long v = std::strtol(raw.c_str(), &end, 10);
  return (end && *end == '\0' && !raw.empty()) ? v : fallback;
}

// ---- bf16 ---------------------------------------------------------------------------------------------
uint16_t to_bf16(float x) {  // round to nearest even (inputs are finite)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// The sequence-length buckets the library's dispatch table (kda2_library_json's "dispatch") routes for a
// state layout, ascending and without repeats.
std::vector<long> layout_buckets(const std::string& json, const std::string& layout) {
  std::string raw;
  std::vector<long> buckets;
  if (!json_member(json, "dispatch", &raw)) return buckets;
  for (const std::string& row : json_array(raw)) {
    const long b = json_int(row, "bucket", -1);
    if (json_string(row, "state_layout") == layout && b >= 0) buckets.push_back(b);
  }
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  return buckets;
}

// The state layouts the library's dispatch table routes ("k_first, v_first"), or "" when it lists none.
std::string routed_layouts(const std::string& json) {
  std::string out;
  for (const char* layout : {"k_first", "v_first"})
    if (!layout_buckets(json, layout).empty()) out += (out.empty() ? "" : ", ") + std::string(layout);
  return out;
}

// ---- options --------------------------------------------------------------------------------------------
constexpr int kMaxN = 65535;              // kda2_fwd's limit on N (the launch grid; KDA2_ERR_SHAPE above it)
constexpr long kMaxTokens = 1L << 20;     // N * T: what this example's float64 CPU reference is meant for

struct Options {
  std::string lib;
  uint64_t seed = 20261130;
  int n = -1, t = -1, h = 2, hv = -1, k = -1, v = -1, device = 0;
  std::string layout = "auto", gate = "auto";
};

const char* const kUsage =
    "usage: kda2_example <lib<spec>.<arch>.so> [--seed N] [--n N] [--t T] [--h H] [--hv HV] [--k K] [--v V]\n"
    "                    [--layout auto|k_first|v_first] [--gate auto|precomputed|softplus] [--device D]\n";

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr, "kda2_example: %s\n%s", msg.c_str(), kUsage);
  std::exit(kExitSetup);
}

Options parse(int argc, char** argv) {
  Options o;
  static const char* const kValued[] = {"--seed", "--n", "--t", "--h", "--hv", "--k", "--v", "--layout", "--gate",
                                        "--device"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage("drives a built KDA2 library through its C ABI");
    if (a.size() < 2 || a[0] != '-') {
      if (!o.lib.empty()) usage("more than one library given: " + o.lib + " and " + a);
      o.lib = a;
      continue;
    }
    bool known = false;
    for (const char* k : kValued) known = known || a == k;
    if (!known) {
      const size_t eq = a.find('=');
      usage("unknown option " + a +
            (eq != std::string::npos ? " (write the value after a space: " + a.substr(0, eq) + " " + a.substr(eq + 1) + ")" : ""));
    }
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string val = argv[++i];
    auto num = [&](long lo, long hi) {
      char* end = nullptr;
      errno = 0;
      const long x = std::strtol(val.c_str(), &end, 0);
      if (val.empty() || !end || *end || errno == ERANGE || x < lo || x > hi)
        usage(a + ": got '" + val + "'; allowed: an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
      return x;
    };
    if (a == "--seed") o.seed = static_cast<uint64_t>(num(0, LONG_MAX));
    else if (a == "--n") o.n = static_cast<int>(num(1, kMaxN));
    else if (a == "--t") o.t = static_cast<int>(num(1, 1L << 30));
    else if (a == "--h") o.h = static_cast<int>(num(1, 1L << 16));
    else if (a == "--hv") o.hv = static_cast<int>(num(1, 1L << 16));
    else if (a == "--k") o.k = static_cast<int>(num(1, 1L << 16));
    else if (a == "--v") o.v = static_cast<int>(num(1, 1L << 16));
    else if (a == "--device") o.device = static_cast<int>(num(0, 1L << 16));
    else if (a == "--layout") o.layout = val;
    else o.gate = val;  // --gate
  }
  if (o.lib.empty()) usage("no library given");
  if (o.layout != "auto" && o.layout != "k_first" && o.layout != "v_first")
    usage("--layout: got '" + o.layout + "'; allowed: auto, k_first or v_first");
  if (o.gate != "auto" && o.gate != "precomputed" && o.gate != "softplus")
    usage("--gate: got '" + o.gate + "'; allowed: auto, precomputed or softplus");
  // The shape rules of kda2/abi.h the example can check before loading anything.
  const int hv = o.hv > 0 ? o.hv : o.h;
  if (hv % o.h != 0)
    usage("--h " + std::to_string(o.h) + " with --hv " + std::to_string(hv) +
          ": HV must be a multiple of H (HV % H == 0: value head hv reads q/k head hv / (HV / H))");
  return o;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// ---- the float64 reference (DESIGN §1), per sequence and value head, token by token ---------------------
//   S <- diag(exp g_t) S;  S <- S + beta_t k_t (v_t - k_t^T S)^T;  o_t = scale q_t^T S
// States are [N, HV, K, V] (k_first) or [N, HV, V, K] (v_first); the reference keeps S as [K][V].
struct Problem {
  int N, T, H, HV, K, V;
  bool v_first, softplus;
  float scale;
  std::vector<float> q, k, v;  // bf16-rounded values, as the kernel sees them
  std::vector<float> g, beta, A_log, dt_bias, h0;
};

double gate_value(const Problem& p, size_t tok, int hv, int kk) {
  const double x = p.g[(tok * p.HV + hv) * p.K + kk];
  if (!p.softplus) return x;
  const double y = x + p.dt_bias[static_cast<size_t>(hv) * p.K + kk];
  const double sp = y > 20.0 ? y : std::log1p(std::exp(y));  // FLA's softplus (threshold 20)
  return -std::exp(static_cast<double>(p.A_log[hv])) * sp;
}

void reference(const Problem& p, std::vector<double>* o, std::vector<double>* ht) {
  const int K = p.K, V = p.V, ratio = p.HV / p.H;
  o->assign(static_cast<size_t>(p.N) * p.T * p.HV * V, 0.0);
  ht->assign(static_cast<size_t>(p.N) * p.HV * K * V, 0.0);
  std::vector<double> S(static_cast<size_t>(K) * V), kS(V);
  for (int n = 0; n < p.N; ++n)
    for (int hv = 0; hv < p.HV; ++hv) {
      const int h = hv / ratio;
      const size_t sbase = (static_cast<size_t>(n) * p.HV + hv) * K * V;
      for (int a = 0; a < K; ++a)
        for (int b = 0; b < V; ++b)
          S[a * V + b] = p.v_first ? p.h0[sbase + static_cast<size_t>(b) * K + a] : p.h0[sbase + static_cast<size_t>(a) * V + b];
      for (int t = 0; t < p.T; ++t) {
        const size_t tok = static_cast<size_t>(n) * p.T + t;
        const float* q = &p.q[(tok * p.H + h) * K];
        const float* kv = &p.k[(tok * p.H + h) * K];
        const float* vv = &p.v[(tok * p.HV + hv) * V];
        const double beta = p.beta[tok * p.HV + hv];
        for (int a = 0; a < K; ++a) {
          const double decay = std::exp(gate_value(p, tok, hv, a));
          for (int b = 0; b < V; ++b) S[a * V + b] *= decay;
        }
        for (int b = 0; b < V; ++b) kS[b] = 0.0;
        for (int a = 0; a < K; ++a)
          for (int b = 0; b < V; ++b) kS[b] += static_cast<double>(kv[a]) * S[a * V + b];
        for (int a = 0; a < K; ++a)
          for (int b = 0; b < V; ++b) S[a * V + b] += beta * kv[a] * (vv[b] - kS[b]);
        double* out = &(*o)[(tok * p.HV + hv) * V];
        for (int a = 0; a < K; ++a)
          for (int b = 0; b < V; ++b) out[b] += static_cast<double>(q[a]) * S[a * V + b];
        for (int b = 0; b < V; ++b) out[b] *= p.scale;
      }
      for (int a = 0; a < K; ++a)
        for (int b = 0; b < V; ++b)
          (*ht)[p.v_first ? sbase + static_cast<size_t>(b) * K + a : sbase + static_cast<size_t>(a) * V + b] = S[a * V + b];
    }
}

// ||x - ref||_2 / ||ref||_2 over all elements (non-finite x counts as infinite error).
double relative_l2(const std::vector<double>& x, const std::vector<double>& ref, size_t* nonfinite) {
  double num = 0.0, den = 0.0;
  *nonfinite = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) { ++*nonfinite; continue; }
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (*nonfinite) return INFINITY;
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

template <typename T>
void* upload(const std::vector<T>& host, cudaStream_t stream, std::vector<void*>* owned) {
  void* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, host.size() * sizeof(T)));
  owned->push_back(d);
  CUDA_CHECK(cudaMemcpyAsync(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);

  // ---- 1. load the library and check its ABI (no GPU needed) --------------------------------------------
  void* so = dlopen(opt.lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!so) die(kExitSetup, std::string("cannot load the library: ") + dlerror());
  Kda2 api;
  auto sym = [&](const char* name) {
    void* p = dlsym(so, name);
    if (!p) die(kExitSetup, opt.lib + " does not export " + name + " (not a KDA2 library, or an ABI 1 build)");
    return p;
  };
  api.abi_version = reinterpret_cast<decltype(api.abi_version)>(sym("kda2_abi_version"));
  const int abi = api.abi_version();
  std::printf("library: %s\n", opt.lib.c_str());
  if (abi != KDA2_ABI_VERSION)
    die(kExitSetup, "ABI mismatch: the library says kda2_abi_version() = " + std::to_string(abi) +
                        ", this program was compiled against KDA2_ABI_VERSION " + std::to_string(KDA2_ABI_VERSION) +
                        " (kda2/abi.h); rebuild one of them");
  std::printf("abi_version: %d (header KDA2_ABI_VERSION %d): ok\n", abi, KDA2_ABI_VERSION);
  api.library_json = reinterpret_cast<decltype(api.library_json)>(sym("kda2_library_json"));
  api.num_variants = reinterpret_cast<decltype(api.num_variants)>(sym("kda2_num_variants"));
  api.select = reinterpret_cast<decltype(api.select)>(sym("kda2_select"));
  api.workspace_bytes = reinterpret_cast<decltype(api.workspace_bytes)>(sym("kda2_workspace_bytes"));
  api.preload = reinterpret_cast<decltype(api.preload)>(sym("kda2_preload"));
  api.fwd = reinterpret_cast<decltype(api.fwd)>(sym("kda2_fwd"));

  const char* json_c = api.library_json();
  if (!json_c) die(kExitSetup, "kda2_library_json() returned NULL");
  const std::string json = json_c;
  std::printf("library json: %s\n", json.c_str());
  const std::string family = json_string(json, "family"), spec = json_string(json, "spec"),
                    arch = json_string(json, "arch");
  if (json_int(json, "abi_version", -1) != abi)
    die(kExitSetup, "the library JSON's abi_version disagrees with kda2_abi_version()");
  if (family != "recurrent" && family != "chunk") die(kExitSetup, "unknown library family '" + family + "'");
  const bool chunk = family == "chunk";

  // Head dims: the library JSON ("k"/"v"), else the manifest.json built beside the library, else --k/--v. The
  // library's kernels are compiled for its K and V (kda2_fwd has no K/V to check), so --k/--v must agree.
  long jk = json_int(json, "k", -1), jv = json_int(json, "v", -1);
  std::string dims_from = "library json";
  if (jk <= 0 || jv <= 0) {
    const size_t slash = opt.lib.rfind('/');
    dims_from = (slash == std::string::npos ? "." : opt.lib.substr(0, slash)) + "/manifest.json";
    const std::string manifest = read_file(dims_from);
    jk = json_int(manifest, "k", -1);
    jv = json_int(manifest, "v", -1);
  }
  int K = opt.k, V = opt.v;
  if (jk > 0 && jv > 0) {
    for (const auto& [flag, given, built] : {std::make_tuple("--k", opt.k, jk), std::make_tuple("--v", opt.v, jv)})
      if (given > 0 && given != built)
        usage(std::string(flag) + " " + std::to_string(given) + ": the library is built for " + (flag[2] == 'k' ? "K" : "V") +
              "=" + std::to_string(built) + " (" + dims_from + "); leave it out or pass " + std::to_string(built));
    K = static_cast<int>(jk);
    V = static_cast<int>(jv);
  } else if (K < 0 || V < 0) {
    die(kExitSetup, "head dims unknown: neither the library JSON nor " + dims_from +
                        " says \"k\"/\"v\"; pass --k and --v");
  } else {
    dims_from = "--k/--v";
  }
  const int N = opt.n > 0 ? opt.n : (chunk ? 2 : 4);
  const int T = opt.t > 0 ? opt.t : (chunk ? 100 : 1);
  const int H = opt.h, HV = opt.hv > 0 ? opt.hv : opt.h;
  if (static_cast<long>(N) * T > kMaxTokens)
    usage("N x T = " + std::to_string(N) + " x " + std::to_string(T) + " tokens: more than this example's float64 CPU "
          "reference is meant for (at most " + std::to_string(kMaxTokens) + ")");
  std::printf("family %s, spec %s, arch %s, %d variants; K=%d V=%d (from %s)\n", family.c_str(), spec.c_str(),
              arch.c_str(), api.num_variants(), K, V, dims_from.c_str());

  // Layout: the one asked for, else k_first when the library routes it, else v_first.
  int v_first = opt.layout == "v_first" ? 1 : 0;
  // The variant kda2_fwd will call: the dispatch row of this length and batch class (N * HV state chains).
  const int64_t chains = static_cast<int64_t>(N) * HV;
  int index = api.select(v_first, T, chains);
  if (index == KDA2_ERR_LAYOUT && opt.layout == "auto") index = api.select(v_first = 1, T, chains);
  if (index < 0) {
    // What the library's own dispatch table (kda2_library_json) says about the refusal.
    const std::string layout = v_first ? "v_first" : "k_first";
    std::string detail;
    if (index == KDA2_ERR_BUCKET_OVERFLOW) {
      const std::vector<long> buckets = layout_buckets(json, layout);
      if (!buckets.empty()) {
        std::string list;
        for (long b : buckets) list += (list.empty() ? "" : ", ") + std::to_string(b);
        detail = "; T=" + std::to_string(T) + " is over the largest " + layout + " bucket, " +
                 std::to_string(buckets.back()) + " (buckets " + list + "): pass --t " + std::to_string(buckets.back()) +
                 " or less, or use a chunk library for longer sequences";
      }
    } else if (index == KDA2_ERR_LAYOUT) {
      const std::string routed = routed_layouts(json);
      detail = "; the library routes " + (routed.empty() ? std::string("no layout") : routed) +
               (routed.empty() ? "" : ": pass --layout auto or one of them");
    }
    die(kExitSetup, "kda2_select(" + layout + ", max_seqlen " + std::to_string(T) + ", chains " +
                        std::to_string(chains) + ") returned " + status_text(index) + detail);
  }

  KDA2RecurrentArgs args;
  std::memset(&args, 0, sizeof(args));
  args.N = N;
  args.T = T;
  args.H = H;
  args.HV = HV;
  args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(K)));
  args.lower_bound = 0.0f;
  args.state_v_first = v_first;

  // Gate: a call with N = 0 is checked against the variant's features (gate mode, flags, layout, shape)
  // and returns before anything touches the device, so it probes what the library was built with.
  bool softplus = opt.gate == "softplus";
  auto set_gate = [&](bool sp) {
    args.gate_mode = sp ? KDA2_GATE_SOFTPLUS : KDA2_GATE_PRECOMPUTED;
    args.flags = sp ? (KDA2_HAS_A_LOG | KDA2_HAS_DT_BIAS) : 0;
  };
  auto probe = [&]() {
    KDA2RecurrentArgs a = args;
    a.N = 0;
    return api.fwd(&a, T, nullptr);
  };
  set_gate(softplus);
  int rc = probe();
  if (rc == KDA2_ERR_FEATURE && opt.gate == "auto") {
    set_gate(softplus = true);
    rc = probe();
  }
  // The probe touches no device: a refusal says what the library cannot take (exit 2, as kda2_select's).
  kda2_check(rc, "kda2_fwd (feature probe, N = 0)",
             std::string(" (gate ") + (softplus ? "softplus" : "precomputed") + ", layout " +
                 (v_first ? "v_first" : "k_first") + ", H=" + std::to_string(H) + " HV=" + std::to_string(HV) + ")" +
                 (rc == KDA2_ERR_FEATURE && opt.gate != "auto" ? "; try --gate auto" : ""),
             kExitSetup);
  const int64_t ws_bytes = api.workspace_bytes(&args);
  if (ws_bytes < 0) kda2_check(static_cast<int>(ws_bytes), "kda2_workspace_bytes", "", kExitSetup);
  std::printf("call: N=%d T=%d H=%d HV=%d layout %s gate %s flags 0x%x scale %.6g -> variant %d, workspace %lld bytes\n",
              N, T, H, HV, v_first ? "v_first" : "k_first", softplus ? "softplus" : "precomputed", args.flags,
              static_cast<double>(args.scale), index, static_cast<long long>(ws_bytes));
  std::fflush(stdout);

  // ---- 2. CUDA: the runtime's primary context is the current context the library launches in ---------
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    die(kExitNoDevice, std::string("no usable CUDA device (cudaGetDeviceCount: ") +
                           (err != cudaSuccess ? std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err)
                                               : std::string("0 devices")) +
                           "); the library loaded and its ABI checked out, but kda2_fwd needs a GPU");
  if (opt.device >= count)
    die(kExitNoDevice, "--device " + std::to_string(opt.device) + " but only " + std::to_string(count) + " device(s)");
  CUDA_CHECK(cudaSetDevice(opt.device));
  CUDA_CHECK(cudaFree(nullptr));  // make sure the primary context exists and is current on this thread
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));
  std::printf("device %d: %s (sm_%d%d)\n", opt.device, prop.name, prop.major, prop.minor);
  const std::string arch_hint = " (the library is built for " + arch + ", device " + std::to_string(opt.device) +
                                " is sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
  kda2_check(api.preload(), "kda2_preload", arch_hint);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // ---- 3. inputs -----------------------------------------------------------------------------------------
  Problem p{N, T, H, HV, K, V, v_first != 0, softplus, args.scale, {}, {}, {}, {}, {}, {}, {}, {}};
  std::mt19937_64 rng(opt.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const size_t tokens = static_cast<size_t>(N) * T;
  std::vector<uint16_t> q16(tokens * H * K), k16(tokens * H * K), v16(tokens * HV * V);
  auto unit_rows = [&](std::vector<uint16_t>* dst, std::vector<float>* val, size_t rows, int dim) {
    val->resize(rows * dim);
    std::vector<double> row(dim);
    for (size_t r = 0; r < rows; ++r) {
      double norm = 0.0;
      for (int i = 0; i < dim; ++i) norm += (row[i] = normal(rng)) * row[i];
      norm = std::sqrt(norm);
      for (int i = 0; i < dim; ++i) {
        (*dst)[r * dim + i] = to_bf16(static_cast<float>(row[i] / norm));
        (*val)[r * dim + i] = from_bf16((*dst)[r * dim + i]);
      }
    }
  };
  unit_rows(&q16, &p.q, tokens * H, K);
  unit_rows(&k16, &p.k, tokens * H, K);
  p.v.resize(v16.size());
  for (size_t i = 0; i < v16.size(); ++i) p.v[i] = from_bf16(v16[i] = to_bf16(static_cast<float>(normal(rng))));
  p.g.resize(tokens * HV * K);
  for (auto& x : p.g) {
    const double r = normal(rng);
    x = static_cast<float>(softplus ? r : -std::log1p(std::exp(-r)) / 16.0);  // precomputed: logsigmoid / 16 <= 0
  }
  p.beta.resize(tokens * HV);
  for (auto& x : p.beta) x = static_cast<float>(1.0 / (1.0 + std::exp(-normal(rng))));
  if (softplus) {
    p.A_log.resize(HV);
    for (auto& x : p.A_log) x = static_cast<float>(0.5 * normal(rng));
    p.dt_bias.resize(static_cast<size_t>(HV) * K);
    for (auto& x : p.dt_bias) x = static_cast<float>(normal(rng));
  }
  const size_t state_elems = static_cast<size_t>(N) * HV * K * V;
  p.h0.resize(state_elems);
  for (auto& x : p.h0) x = static_cast<float>(0.1 * normal(rng));

  std::vector<void*> owned;
  args.q = upload(q16, stream, &owned);
  args.k = upload(k16, stream, &owned);
  args.v = upload(v16, stream, &owned);
  args.g = upload(p.g, stream, &owned);
  args.beta = upload(p.beta, stream, &owned);
  if (softplus) {
    args.A_log = static_cast<const float*>(upload(p.A_log, stream, &owned));
    args.dt_bias = static_cast<const float*>(upload(p.dt_bias, stream, &owned));
  }
  args.h0 = static_cast<const float*>(upload(p.h0, stream, &owned));
  void *o_dev = nullptr, *ht_dev = nullptr, *ws_dev = nullptr;
  const size_t o_bytes = tokens * HV * V * sizeof(uint16_t), ht_bytes = state_elems * sizeof(float);
  CUDA_CHECK(cudaMalloc(&o_dev, o_bytes));
  owned.push_back(o_dev);
  CUDA_CHECK(cudaMalloc(&ht_dev, ht_bytes));
  owned.push_back(ht_dev);
  // Poison: 0xFFFF is a bf16 NaN and 0xFFFFFFFF an fp32 NaN, so an element the kernel leaves unwritten shows.
  CUDA_CHECK(cudaMemsetAsync(o_dev, 0xFF, o_bytes, stream));
  CUDA_CHECK(cudaMemsetAsync(ht_dev, 0xFF, ht_bytes, stream));
  args.o = o_dev;
  args.ht = static_cast<float*>(ht_dev);
  if (ws_bytes > 0) {
    CUDA_CHECK(cudaMalloc(&ws_dev, static_cast<size_t>(ws_bytes)));
    owned.push_back(ws_dev);
  }
  args.workspace = ws_dev;
  args.workspace_bytes = ws_bytes;

  // ---- 4. the call ---------------------------------------------------------------------------------------
  kda2_check(api.fwd(&args, T, stream), "kda2_fwd", arch_hint);
  CUDA_CHECK(cudaGetLastError());
  std::vector<uint16_t> o16(tokens * HV * V);
  std::vector<float> ht(state_elems);
  CUDA_CHECK(cudaMemcpyAsync(o16.data(), o_dev, o_bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaMemcpyAsync(ht.data(), ht_dev, ht_bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::printf("kda2_fwd: %s\n", status_name(KDA2_OK).c_str());

  // ---- 5. check against the float64 reference ------------------------------------------------------------
  std::vector<double> o_ref, ht_ref;
  reference(p, &o_ref, &ht_ref);
  std::vector<double> o_got(o16.size()), ht_got(ht.begin(), ht.end());
  for (size_t i = 0; i < o16.size(); ++i) o_got[i] = from_bf16(o16[i]);
  size_t bad_o = 0, bad_ht = 0;
  const double err_o = relative_l2(o_got, o_ref, &bad_o), err_ht = relative_l2(ht_got, ht_ref, &bad_ht);
  std::printf("o [%zu x %d x %d] bf16: relative L2 error %.3e%s\n", tokens, HV, V, err_o,
              bad_o ? (" (" + std::to_string(bad_o) + " elements NaN/Inf: unwritten)").c_str() : "");
  std::printf("final state [%d x %d x %d x %d] fp32: relative L2 error %.3e%s\n", N, HV, v_first ? V : K,
              v_first ? K : V, err_ht, bad_ht ? (" (" + std::to_string(bad_ht) + " elements NaN/Inf: unwritten)").c_str() : "");
  const double worst = std::fmax(err_o, err_ht);
  const bool pass = !bad_o && !bad_ht && worst <= kTolerance;
  std::printf("max relative error: %.3e (tolerance %.0e): %s\n", worst, kTolerance, pass ? "PASS" : "FAIL");

  CUDA_CHECK(cudaStreamDestroy(stream));
  for (void* d : owned) CUDA_CHECK(cudaFree(d));
  return pass ? kExitOk : kExitWrong;
}
