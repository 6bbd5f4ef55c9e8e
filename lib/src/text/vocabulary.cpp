// The vocabulary's table (vocabulary.hpp).
#include "vocabulary.hpp"

namespace attn::text {

std::uint64_t hash_bytes(std::string_view s) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xC2B2AE3D27D4EB4Full);
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  std::uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h ^= w;
  // murmur3's finalizer: every input bit reaches the low bits the table indexes with
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

void Vocabulary::resize_table(std::size_t count) {
  std::size_t cap = 16;
  while (cap < 2 * count) cap *= 2;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  size_ = 0;
}

// Puts token `id` (already in storage_) into the table.
void Vocabulary::place(std::int32_t id, std::uint64_t h) {
  const std::string_view s(storage_.data() + by_id_[id].at, static_cast<std::size_t>(by_id_[id].len));
  const std::uint64_t head = head_of(s);
  for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.id < 0) {
      slot = Slot{head, id, static_cast<std::uint32_t>(s.size())};
      ++size_;
      return;
    }
    if (same(slot, s, head)) { // a repeated token: the later id wins
      by_id_[slot.id].len = -1;
      slot.id = id;
      return;
    }
  }
}

void Vocabulary::build(const std::vector<std::pair<std::string_view, std::int32_t>>& entries) {
  std::size_t bytes = 0;
  std::int32_t limit = 0;
  for (const auto& [t, id] : entries) {
    bytes += t.size();
    limit = std::max(limit, id + 1);
  }
  storage_.clear();
  storage_.reserve(bytes);
  by_id_.assign(static_cast<std::size_t>(limit), Entry{});
  std::vector<std::uint64_t> hashes(entries.size());
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto& [t, id] = entries[k];
    if (by_id_[id].len >= 0) by_id_[id].len = -1; // an id given twice: its later token
    by_id_[id] = Entry{storage_.size(), static_cast<std::int64_t>(t.size())};
    storage_.append(t);
    hashes[k] = hash_bytes(t);
  }
  resize_table(entries.size());
  constexpr std::size_t ahead = 16;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (k + ahead < entries.size()) prefetch(hashes[k + ahead]);
    const std::int32_t id = entries[k].second;
    if (by_id_[id].at == storage_.size() ||
        storage_.compare(by_id_[id].at, entries[k].first.size(), entries[k].first) != 0)
      continue; // the id was given again to a later token
    place(id, hashes[k]);
  }
}

void Vocabulary::add(std::string_view token, std::int32_t id) {
  if (2 * (size_ + 1) > slots_.size()) { // grow: rebuild the table from by_id_
    resize_table(size_ + 1);
    for (std::size_t i = 0; i < by_id_.size(); ++i)
      if (by_id_[i].len >= 0)
        place(static_cast<std::int32_t>(i),
              hash_bytes(std::string_view(storage_.data() + by_id_[i].at, static_cast<std::size_t>(by_id_[i].len))));
  }
  if (static_cast<std::size_t>(id) >= by_id_.size()) by_id_.resize(static_cast<std::size_t>(id) + 1);
  by_id_[id] = Entry{storage_.size(), static_cast<std::int64_t>(token.size())};
  storage_.append(token);
  place(id, hash_bytes(token));
}

std::int32_t Vocabulary::find(std::string_view token, std::uint64_t h) const {
  const std::uint64_t head = head_of(token);
  for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.id < 0) return -1;
    if (same(slot, token, head)) return slot.id;
  }
}

} // namespace attn::text
