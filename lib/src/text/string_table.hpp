// Hash tables for the vocabularies: strings to ids and id pairs to merges, open addressing over
// flat arrays, so a 128k-token vocabulary with 280k merges is built in a few milliseconds.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace attn::text {

inline std::uint64_t hash_bytes(std::string_view s) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  std::uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

// Strings (views of storage the owner keeps alive) to ids.
class StringTable {
public:
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // Sets key's id (a later insert of the same key replaces it).
  void insert(std::string_view key, std::int32_t id) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(key, id, hash_bytes(key));
  }
  // The key's id, or -1.
  std::int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const std::uint64_t h = hash_bytes(key);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && s.len == key.size() && std::memcmp(s.data, key.data(), key.size()) == 0) return s.id;
    }
  }
  std::size_t size() const { return size_; }

private:
  struct Slot {
    std::uint64_t hash = 0;
    const char* data = nullptr;
    std::uint32_t len = 0;
    std::int32_t id = -1;
  };
  void place(std::string_view key, std::int32_t id, std::uint64_t h) {
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{h, key.data(), static_cast<std::uint32_t>(key.size()), id};
        ++size_;
        return;
      }
      if (s.hash == h && s.len == key.size() && std::memcmp(s.data, key.data(), key.size()) == 0) {
        s.id = id;
        return;
      }
    }
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    reserve(old.empty() ? 8 : old.size());
    size_ = 0;
    for (const Slot& s : old)
      if (s.id >= 0) place(std::string_view(s.data, s.len), s.id, s.hash);
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0, size_ = 0;
};

// Pairs of ids (a, b) to a merge: its rank and the id of the merged token.
class PairTable {
public:
  struct Merge {
    std::int32_t rank, id;
  };
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
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
