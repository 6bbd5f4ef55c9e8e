// The folder of files a fuzz target hands the library (the Hugging Face readers take paths, not
// bytes): one per process, removed at exit; and the input written into one of its files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <unistd.h>

namespace fuzz {

struct ScratchDir {
  std::filesystem::path dir;
  explicit ScratchDir(const std::string& prefix)
      : dir(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

// `file` holding exactly the size bytes at data.
inline void write_bytes(const std::filesystem::path& file, const std::uint8_t* data, std::size_t size) {
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

} // namespace fuzz
