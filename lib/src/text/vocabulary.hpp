// A model's vocabulary: token strings in one block of memory, their ids both ways.
#pragma once

#include "string_table.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

class Vocabulary {
public:
  // Room for `count` tokens of `bytes` bytes in all (the strings must not move once added).
  void reserve(std::size_t count, std::size_t bytes) {
    storage_.reserve(bytes);
    table_.reserve(count);
  }
  // Adds token -> id (a repeated token takes the later id, as a JSON map read into a HashMap).
  void add(std::string_view token, std::int32_t id) {
    if (storage_.size() + token.size() > storage_.capacity()) {
      // keep the views valid: move to a bigger block and rebuild
      std::string bigger;
      bigger.reserve(2 * (storage_.size() + token.size()) + 64);
      bigger = storage_;
      rebuild(std::move(bigger));
    }
    const std::size_t at = storage_.size();
    storage_.append(token);
    put(at, token.size(), id);
  }
  std::int32_t find(std::string_view token) const { return table_.find(token); }
  std::optional<std::string_view> token(std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= by_id_.size() || by_id_[id].len < 0) return std::nullopt;
    return std::string_view(storage_.data() + by_id_[id].at, static_cast<std::size_t>(by_id_[id].len));
  }
  std::size_t size() const { return table_.size(); }
  std::int32_t id_limit() const { return static_cast<std::int32_t>(by_id_.size()); }

private:
  struct Entry {
    std::size_t at = 0;
    std::int64_t len = -1;
  };
  void put(std::size_t at, std::size_t len, std::int32_t id) {
    if (static_cast<std::size_t>(id) >= by_id_.size()) by_id_.resize(static_cast<std::size_t>(id) + 1);
    by_id_[id] = Entry{at, static_cast<std::int64_t>(len)};
    table_.insert(std::string_view(storage_.data() + at, len), id);
  }
  void rebuild(std::string bigger) {
    storage_ = std::move(bigger);
    StringTable t;
    t.reserve(table_.size() + 1);
    table_ = std::move(t);
    for (std::size_t id = 0; id < by_id_.size(); ++id)
      if (by_id_[id].len >= 0)
        table_.insert(std::string_view(storage_.data() + by_id_[id].at, by_id_[id].len), static_cast<std::int32_t>(id));
  }
  std::string storage_;
  StringTable table_;
  std::vector<Entry> by_id_;
};

} // namespace attn::text
