// OpenBLAS: loaded when something first needs it, and made to run the best core the CPU can execute.
//
// Loaded on demand (dlopen), not linked: most runs never call it (blas::linear and the attention
// kernels are the library's own; OpenBLAS serves attn-score's general scorers, P V of many rows,
// and the random-feature attentions), and loading it took 3-4 ms of every process (Debian's build
// binds ~12000 symbols and starts its thread pool as it loads): pe-gen --len 16 --dim 64 spent
// that much of its 20 ms on a library it never called.
//
// Debian's OpenBLAS is built with DYNAMIC_ARCH: when it is loaded it picks a core from the CPU's
// family and model, and falls back to an old generic one (SSE3 "Prescott") on CPUs it does not know,
// such as Xeons of family 6 model 207 (AVX-512): 5x slower sgemm than its SkylakeX kernels. It reads
// OPENBLAS_CORETYPE only while it picks. So when it fell back on a CPU with AVX2 + FMA or AVX-512,
// the loader sets the variable and has OpenBLAS pick again, through the two functions its
// dynamic-arch build exports for that (gotoblas_dynamic_quit, gotoblas_dynamic_init), before any
// BLAS call: well under a millisecond, where restarting the program (exec) was measured at 13 ms.
// A user's OPENBLAS_CORETYPE is never touched.
#include "attn/core/error.hpp"
#include "attn/kernels/blas.hpp"

#include "kernels/openblas.hpp"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <fmt/format.h>
#include <string_view>
#include <strings.h>

namespace attn::blas {

namespace {

// For the tests: pretend OpenBLAS picked this core (used only when OPENBLAS_CORETYPE is unset), and
// load OpenBLAS by this name instead (one that cannot be loaded: the error a run then reports).
constexpr const char* test_pick_var = "ATTN_TEST_OPENBLAS_PICK";
constexpr const char* test_soname_var = "ATTN_TEST_OPENBLAS_SONAME";

// OpenBLAS 0.3.21's x86-64 cores whose kernels use AVX2 (and FMA); every other core it has (Prescott,
// Nehalem, Sandybridge, Core2, Barcelona, Bulldozer, ...) is older and slower on a CPU that has them.
constexpr std::array<std::string_view, 6> avx2_cores = {"Haswell",        "Zen",      "SkylakeX", "Cooperlake",
                                                        "SapphireRapids", "Excavator"};

bool is_avx2_core(std::string_view core) {
  for (std::string_view c : avx2_cores)
    if (core.size() == c.size() && strncasecmp(core.data(), c.data(), c.size()) == 0) return true;
  return false;
}

template <class F> F symbol(void* handle, const char* name) { return reinterpret_cast<F>(dlsym(handle, name)); }

// A loaded OpenBLAS: its functions, and what the loader did about its core.
struct Loaded {
  OpenBlas fns;
  std::string picked; // the core OpenBLAS had picked, when the loader changed it
  std::string failed; // why the loader could not change it
};

std::string corename(const OpenBlas& o) {
  const char* name = o.get_corename();
  return name ? name : "";
}

// When better_core() names a core, has OpenBLAS switch to it (OPENBLAS_CORETYPE set while it picks
// again; the environment is left as the user gave it).
void select_core(void* handle, Loaded& l) {
  if (std::getenv("OPENBLAS_CORETYPE")) return; // the user's choice
  const char* test_pick = std::getenv(test_pick_var);
  const std::string picked = test_pick ? test_pick : corename(l.fns);
  const std::string core = better_core(cpu_features(), picked, false);
  if (core.empty()) return;
  using Hook = void (*)();
  const auto quit = symbol<Hook>(handle, "gotoblas_dynamic_quit");
  const auto init = symbol<Hook>(handle, "gotoblas_dynamic_init");
  if (!quit || !init) {
    l.failed = fmt::format("{} would fit this CPU, but this OpenBLAS cannot switch cores", core);
    return;
  }
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
  if (strcasecmp(corename(l.fns).c_str(), core.c_str()) == 0)
    l.picked = picked;
  else
    l.failed = fmt::format("asked for {}, OpenBLAS kept {}", core, corename(l.fns));
}

// Loads OpenBLAS, chooses its core, and makes it run single-threaded on the caller's threads: its
// own pool (the pthreads build starts one as it loads, each thread spinning a while before it
// sleeps, and joins it before every fork) is stopped; it starts again only for a multi-threaded call.
Loaded load() {
  const char* test_soname = std::getenv(test_soname_var);
  const char* soname = test_soname ? test_soname : ATTN_OPENBLAS_SONAME;
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error(fmt::format("cannot load OpenBLAS: {}", dlerror()));
  Loaded l;
  l.fns.sgemm = symbol<decltype(l.fns.sgemm)>(handle, "cblas_sgemm");
  l.fns.get_corename = symbol<decltype(l.fns.get_corename)>(handle, "openblas_get_corename");
  const auto set_num_threads = symbol<void (*)(int)>(handle, "openblas_set_num_threads");
  if (!l.fns.sgemm || !l.fns.get_corename || !set_num_threads)
    throw Error(fmt::format("{} is not OpenBLAS: it lacks cblas_sgemm, openblas_get_corename or "
                            "openblas_set_num_threads",
                            soname));
  select_core(handle, l);
  set_num_threads(1);
  if (const auto stop = symbol<int (*)()>(handle, "blas_thread_shutdown_")) stop(); // absent: a serial build
  return l;
}

std::atomic<bool> g_loaded{false};

// The first product may come from inside a parallel region (attention's tasks): the other threads
// wait at the static's guard while one loads.
const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded x = load();
    g_loaded = true;
    return x;
  }();
  return l;
}

} // namespace

// Linux hands out the AMX tiles' state (XFEATURE_XTILEDATA, 18) only to a process that asks for it
// (ARCH_REQ_XCOMP_PERM); without leave, the first tile instruction is a SIGILL. Asked once.
bool amx_granted() {
#if defined(__linux__) && defined(__x86_64__)
  static const bool granted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  return granted;
#else
  return false;
#endif
}

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  unsigned a = 0, b = 0, c = 0, d = 0; // F16C by CPUID (leaf 1, ECX bit 29): clang 14's builtin lacks it
  f.f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  // AVX512_BF16 by CPUID (leaf 7, subleaf 1, EAX bit 5), as F16C above
  f.avx512bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
  // AMX by CPUID (leaf 7, EDX): AMX-TILE (bit 24) with AMX-BF16 (22) or AMX-INT8 (25)
  const bool tile = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24));
  f.amx_bf16 = tile && (d & (1u << 22));
  f.amx_int8 = tile && (d & (1u << 25));
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512 = f.avx512f && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
#endif
  return f;
}

std::string better_core(const CpuFeatures& cpu, std::string_view openblas_core, bool user_set) {
  if (user_set || is_avx2_core(openblas_core)) return "";
  if (cpu.avx512 && cpu.fma) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  return "";
}

const OpenBlas& openblas() { return loaded().fns; }

bool openblas_loaded() { return g_loaded; }

void load_openblas() { (void)loaded(); }

std::string core_description() {
  const Loaded& l = loaded();
  const std::string core = corename(l.fns);
  if (!l.picked.empty()) return fmt::format("{} (chosen for this CPU; OpenBLAS picked {})", core, l.picked);
  if (!l.failed.empty()) return fmt::format("{} (OpenBLAS's pick; {})", core, l.failed);
  if (const char* user = std::getenv("OPENBLAS_CORETYPE")) return fmt::format("{} (OPENBLAS_CORETYPE={})", core, user);
  return fmt::format("{} (OpenBLAS's pick)", core);
}

} // namespace attn::blas
