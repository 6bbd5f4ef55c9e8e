// A model's vocabulary: token strings in one block of memory and their ids both ways, in a
// flat open-addressing table of 16-byte slots (a token's first 8 bytes are in its slot, so most
// lookups touch one cache line). Built in bulk with the slots prefetched ahead, so a 262k-token
// vocabulary and its 500k merges load in milliseconds rather than waiting on memory. Or viewed in
// place in a cache file's mapping (table_cache.hpp).
#pragma once

#include "table_cache.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::text {

std::uint64_t hash_bytes(std::string_view s);

class Vocabulary {
public:
  Vocabulary() = default;
  Vocabulary(const Vocabulary&) = delete; // its views point into its own vectors
  Vocabulary& operator=(const Vocabulary&) = delete;
  Vocabulary(Vocabulary&&) noexcept = default; // a vector's move keeps its elements where they are
  Vocabulary& operator=(Vocabulary&&) noexcept = default;

  // The vocabulary of these (token, id) pairs; a repeated token takes its later id.
  void build(const std::vector<std::pair<std::string_view, std::int32_t>>& entries);
  // Its tables as a cache file's sections, and a vocabulary viewing them where they are mapped
  // (BadTables when they do not add up).
  void save(TableWriter& w) const;
  static Vocabulary view(TableReader& r);

  void prefetch(std::uint64_t h) const { __builtin_prefetch(&slots_[h & mask_]); }
  std::int32_t find(std::string_view token, std::uint64_t h) const;
  std::int32_t find(std::string_view token) const { return slots_.empty() ? -1 : find(token, hash_bytes(token)); }
  std::optional<std::string_view> token(std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= by_id_.size() || by_id_[id].len < 0) return std::nullopt;
    return std::string_view(storage_.data() + by_id_[id].at, static_cast<std::size_t>(by_id_[id].len));
  }
  std::size_t size() const { return size_; }
  std::int32_t id_limit() const { return static_cast<std::int32_t>(by_id_.size()); }

private:
  struct Slot {
    std::uint64_t head = 0; // the first 8 bytes, zero-padded
    std::int32_t id = -1;
    std::uint32_t len = 0;
  };
  struct Entry {
    std::uint64_t at = 0;
    std::int64_t len = -1;
  };
  static std::uint64_t head_of(std::string_view s) {
    std::uint64_t h = 0;
    std::memcpy(&h, s.data(), s.size() < 8 ? s.size() : 8);
    return h;
  }
  bool same(const Slot& slot, std::string_view s, std::uint64_t head) const {
    if (slot.head != head || slot.len != s.size()) return false;
    if (viewed_ && !(static_cast<std::size_t>(slot.id) < by_id_.size() &&
                     by_id_[slot.id].len == static_cast<std::int64_t>(slot.len)))
      throw BadTables("a vocabulary slot names a token that is not in the table");
    return s.size() <= 8 || std::memcmp(storage_.data() + by_id_[slot.id].at + 8, s.data() + 8, s.size() - 8) == 0;
  }
  void resize_table(std::size_t count);
  void place(std::int32_t id, std::uint64_t h);
  // The tables: views of the owned vectors once built, or of a cache file's mapping.
  std::string_view storage_;
  std::span<const Entry> by_id_;
  std::span<const Slot> slots_;
  std::vector<char> owned_storage_;
  std::vector<Entry> owned_by_id_;
  std::vector<Slot> owned_slots_;
  std::size_t mask_ = 0, size_ = 0;
  bool viewed_ = false; // a mapping's slots may name ids past the table (a damaged file): checked
};

} // namespace attn::text
