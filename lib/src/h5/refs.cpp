// Tensor references (FILE[:NAME]) and HDF5 object paths.
#include "attn/h5/h5io.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

namespace attn::h5 {

namespace fs = std::filesystem;

TensorRef parse_tensor_ref(std::string_view arg) {
  TensorRef ref;
  std::error_code ec;
  const auto colon = arg.find(':');
  if (colon == std::string_view::npos || (arg != "-" && fs::is_regular_file(std::string(arg), ec))) {
    ref.path = std::string(arg);
  } else {
    ref.path = std::string(arg.substr(0, colon));
    ref.name = std::string(arg.substr(colon + 1));
  }
  if (ref.path.empty()) throw UsageError(fmt::format("'{}' names no file (expected PATH[:NAME])", arg));
  return ref;
}

std::string list_names(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < 12; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 12) s += fmt::format(", ... ({} in all)", names.size());
  return s;
}

// "/a/b" for "a/b", "/a/b/", "//a//b"; "/" for "" and "/".
std::string normalize_path(std::string_view name) {
  std::string out;
  std::size_t i = 0;
  while (i < name.size()) {
    while (i < name.size() && name[i] == '/') ++i;
    std::size_t j = i;
    while (j < name.size() && name[j] != '/') ++j;
    if (j > i) {
      out.push_back('/');
      out.append(name.substr(i, j - i));
    }
    i = j;
  }
  return out.empty() ? "/" : out;
}

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string join_path(const std::string& group, std::string_view member) {
  return normalize_path(member.starts_with('/') ? std::string(member) : group + "/" + std::string(member));
}

bool is_under(const std::string& path, const std::string& group) {
  if (group == "/") return path != "/";
  return path.size() > group.size() && path.compare(0, group.size(), group) == 0 && path[group.size()] == '/';
}

} // namespace attn::h5
