// A model's vocabulary: token strings in one block of memory and their ids both ways, in a
// flat open-addressing table of 16-byte slots (a token's first 8 bytes are in its slot, so most
// lookups touch one cache line). Built in bulk with the slots prefetched ahead, so a 262k-token
// vocabulary and its 500k merges load in milliseconds rather than waiting on memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::text {

std::uint64_t hash_bytes(std::string_view s);

class Vocabulary {
public:
  // The vocabulary of these (token, id) pairs; a repeated token takes its later id.
  void build(const std::vector<std::pair<std::string_view, std::int32_t>>& entries);

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
    return slot.head == head && slot.len == s.size() &&
           (s.size() <= 8 || std::memcmp(storage_.data() + by_id_[slot.id].at + 8, s.data() + 8, s.size() - 8) == 0);
  }
  void resize_table(std::size_t count);
  void place(std::int32_t id, std::uint64_t h);
  std::string storage_;
  std::vector<Entry> by_id_;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0, size_ = 0;
};

} // namespace attn::text
