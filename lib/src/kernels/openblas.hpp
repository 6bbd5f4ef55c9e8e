// The OpenBLAS functions the library calls, from the copy blas_core.cpp loads on first use.
#pragma once

#include <cblas.h>

namespace attn::blas {

struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_get_corename) get_corename = nullptr;
};

// OpenBLAS, loaded (with its core chosen, single-threaded) by the first call; throws Error when it
// cannot be loaded.
const OpenBlas& openblas();

} // namespace attn::blas
