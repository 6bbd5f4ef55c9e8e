// The library's errors and the exit status each maps to (error.hpp).
#include "attn/core/error.hpp"

namespace attn {

int exit_status(const Error& e) noexcept { return dynamic_cast<const UsageError*>(&e) ? 2 : 1; }

} // namespace attn
