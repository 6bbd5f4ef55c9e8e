// Errors of the toolkit. Library code throws; the shared CLI layer (tools/common) catches once,
// prints "TOOL: error: MESSAGE" and picks the exit status of CONTRACT.md section 4.
#pragma once

#include <stdexcept>
#include <string>

namespace attn {

// A problem that shows only against a file's contents or at run time: exit status 1.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The command line alone is wrong (bad or conflicting flags, output naming an input,
// HDF5 to a terminal): exit status 2.
class UsageError : public Error {
public:
  using Error::Error;
};

// Exit status for an exception caught at the top of a tool.
int exit_status(const Error& e) noexcept;

} // namespace attn
