// BPE's merges: pairs of ids to the merge's rank and result, open addressing over a flat array.
#pragma once

#include <cstdint>
#include <vector>

namespace attn::text {

// Pairs of ids (a, b) to a merge: its rank and the id of the merged token.
class PairTable {
public:
  struct Merge {
    std::int32_t rank, id;
  };
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < n + n / 2) cap *= 2; // at most two thirds full
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  void insert(std::int32_t a, std::int32_t b, Merge m) {
    const std::uint64_t key = pack(a, b);
    for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == empty || s.key == key) {
        s = Slot{key, m};
        return;
      }
    }
  }
  void prefetch(std::int32_t a, std::int32_t b) const { __builtin_prefetch(&slots_[mix(pack(a, b)) & mask_]); }
  const Merge* find(std::int32_t a, std::int32_t b) const {
    const std::uint64_t key = pack(a, b);
    for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == empty) return nullptr;
    }
  }

private:
  static constexpr std::uint64_t empty = ~0ull;
  static std::uint64_t pack(std::int32_t a, std::int32_t b) {
    return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b);
  }
  static std::uint64_t mix(std::uint64_t k) {
    k = (k ^ (k >> 30)) * 0xBF58476D1CE4E5B9ull;
    k = (k ^ (k >> 27)) * 0x94D049BB133111EBull;
    return k ^ (k >> 31);
  }
  struct Slot {
    std::uint64_t key = empty;
    Merge merge{0, 0};
  };
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
};

} // namespace attn::text
