// The checksum bench/tokenize_peers.mjs prints, of a tokenize output: FNV-1a over each row's ids
// (4 bytes each, little-endian, up to its length) and 0xFFFFFFFF after each row; and the tokens.
//   ids_checksum FILE.h5
#include "attn/h5/h5io.hpp"

#include <cstdint>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  attn::h5::InputFiles in;
  const attn::TensorI ids = in.open({argv[1], "ids"}).read_ints();
  const attn::TensorI lengths = in.open({argv[1], "lengths"}).read_ints();
  std::uint64_t h = 0xcbf29ce484222325ull, tokens = 0;
  auto mix = [&](std::uint32_t x) {
    for (int k = 0; k < 4; ++k) {
      h ^= (x >> (8 * k)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  const std::int64_t b = ids.dim(0), n = ids.dim(1);
  for (std::int64_t i = 0; i < b; ++i) {
    for (std::int64_t j = 0; j < lengths.data()[i]; ++j) mix(static_cast<std::uint32_t>(ids.data()[i * n + j]));
    mix(0xffffffffu);
    tokens += static_cast<std::uint64_t>(lengths.data()[i]);
  }
  std::printf("%llx %llu\n", static_cast<unsigned long long>(h), static_cast<unsigned long long>(tokens));
}
