// BPE's merges: pairs of ids to the merge's rank and result, open addressing over a flat array,
// built here or viewed in place in a cache file's mapping (table_cache.hpp).
#pragma once

#include "table_cache.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace attn::text {

// Pairs of ids (a, b) to a merge: its rank and the id of the merged token.
class PairTable {
public:
  struct Merge {
    std::int32_t rank, id;
  };
  PairTable() = default;
  PairTable(const PairTable&) = delete; // its view points into its own vector
  PairTable& operator=(const PairTable&) = delete;
  PairTable(PairTable&&) noexcept = default;
  PairTable& operator=(PairTable&&) noexcept = default;

  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < n + n / 2) cap *= 2; // at most two thirds full
    owned_.assign(cap, Slot{});
    slots_ = owned_;
    mask_ = cap - 1;
    id_limit_ = -1;
  }
  void insert(std::int32_t a, std::int32_t b, Merge m) {
    const std::uint64_t key = pack(a, b);
    for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = owned_[i];
      if (s.key == empty || s.key == key) {
        s = Slot{key, m};
        return;
      }
    }
  }
  void prefetch(std::int32_t a, std::int32_t b) const { __builtin_prefetch(&slots_[mix(pack(a, b)) & mask_]); }
  const Merge* find(std::int32_t a, std::int32_t b) const {
    const std::uint64_t key = pack(a, b);
    for (std::size_t i = mix(key) & mask_, probes = 0; probes <= mask_; i = (i + 1) & mask_, ++probes) {
      const Slot& s = slots_[i];
      if (s.key == key) {
        if (id_limit_ >= 0 && !(s.merge.id >= 0 && s.merge.id < id_limit_))
          throw BadTables("a merge names a token that is not in the vocabulary");
        return &s.merge;
      }
      if (s.key == empty) return nullptr;
    }
    throw BadTables("the merges' table has no free slot"); // a damaged mapping: built ones never fill
  }

  // Its table as a cache file's section, and a table viewing it where it is mapped, its merges'
  // ids checked against `id_limit` as they are found (a damaged file).
  void save(TableWriter& w) const { w.add(slots_); }
  static PairTable view(TableReader& r, std::int32_t id_limit) {
    PairTable t;
    t.slots_ = r.next<Slot>();
    if (t.slots_.size() < 16 || (t.slots_.size() & (t.slots_.size() - 1)) != 0)
      throw BadTables("the merges' table size is not a power of two");
    t.mask_ = t.slots_.size() - 1;
    t.id_limit_ = id_limit;
    return t;
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
  std::span<const Slot> slots_; // owned_, or a mapping's
  std::vector<Slot> owned_;
  std::size_t mask_ = 0;
  std::int32_t id_limit_ = -1; // >= 0: a mapping's, whose ids are checked
};

} // namespace attn::text
