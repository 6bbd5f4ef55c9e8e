// Which OpenBLAS core (kernel set) runs, and making it the best one the CPU can execute.
//
// Debian's OpenBLAS is built with DYNAMIC_ARCH: when it is loaded it picks a core from the CPU's
// family and model, and falls back to an old generic one (SSE3 "Prescott") on CPUs it does not know,
// such as Xeons of family 6 model 207 (AVX-512): 5x slower sgemm than its SkylakeX kernels. It reads
// OPENBLAS_CORETYPE only while it loads, before main(). So when it fell back on a CPU with AVX2 +
// FMA or AVX-512, select_core() sets the variable and has OpenBLAS pick again, through the two
// functions its dynamic-arch build exports for that (gotoblas_dynamic_quit, gotoblas_dynamic_init),
// before any BLAS call. That costs well under a millisecond; restarting the program (exec) was
// measured at 13 ms on `pe-gen --len 16 --dim 64` (16 -> 29 ms). A user's OPENBLAS_CORETYPE is
// never touched.
#include "attn/blas.hpp"

#include <cblas.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fmt/format.h>
#include <string_view>
#include <strings.h>

namespace attn::blas {

namespace {

// For the tests: pretend OpenBLAS picked this core (used only when OPENBLAS_CORETYPE is unset).
constexpr const char* test_pick_var = "ATTN_TEST_OPENBLAS_PICK";

std::string g_picked; // the core OpenBLAS had picked, when select_core() changed it
std::string g_failed; // why select_core() could not change it

// OpenBLAS 0.3.21's x86-64 cores whose kernels use AVX2 (and FMA); every other core it has (Prescott,
// Nehalem, Sandybridge, Core2, Barcelona, Bulldozer, ...) is older and slower on a CPU that has them.
constexpr std::array<std::string_view, 6> avx2_cores = {"Haswell",        "Zen",      "SkylakeX", "Cooperlake",
                                                        "SapphireRapids", "Excavator"};

bool is_avx2_core(std::string_view core) {
  for (std::string_view c : avx2_cores)
    if (core.size() == c.size() && strncasecmp(core.data(), c.data(), c.size()) == 0) return true;
  return false;
}

std::string openblas_pick() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

} // namespace

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
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

void select_core() {
  if (std::getenv("OPENBLAS_CORETYPE")) return; // the user's choice
  const char* test_pick = std::getenv(test_pick_var);
  const std::string picked = test_pick ? test_pick : openblas_pick();
  const std::string core = better_core(cpu_features(), picked, false);
  if (core.empty()) return;
  using Hook = void (*)();
  const auto quit = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (!quit || !init) {
    g_failed = fmt::format("{} would fit this CPU, but this OpenBLAS cannot switch cores", core);
    return;
  }
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE"); // the environment stays as the user gave it
  if (strcasecmp(openblas_pick().c_str(), core.c_str()) == 0)
    g_picked = picked;
  else
    g_failed = fmt::format("asked for {}, OpenBLAS kept {}", core, openblas_pick());
}

std::string core_description() {
  const std::string core = openblas_pick();
  if (!g_picked.empty()) return fmt::format("{} (chosen for this CPU; OpenBLAS picked {})", core, g_picked);
  if (!g_failed.empty()) return fmt::format("{} (OpenBLAS's pick; {})", core, g_failed);
  if (const char* user = std::getenv("OPENBLAS_CORETYPE")) return fmt::format("{} (OPENBLAS_CORETYPE={})", core, user);
  return fmt::format("{} (OpenBLAS's pick)", core);
}

} // namespace attn::blas
