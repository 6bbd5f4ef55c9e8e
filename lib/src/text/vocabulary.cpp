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
  owned_slots_.assign(cap, Slot{});
  slots_ = owned_slots_;
  mask_ = cap - 1;
  size_ = 0;
}

// Puts token `id` (already in storage_) into the table.
void Vocabulary::place(std::int32_t id, std::uint64_t h) {
  const std::string_view s(storage_.data() + by_id_[id].at, static_cast<std::size_t>(by_id_[id].len));
  const std::uint64_t head = head_of(s);
  for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& slot = owned_slots_[i];
    if (slot.id < 0) {
      slot = Slot{head, id, static_cast<std::uint32_t>(s.size())};
      ++size_;
      return;
    }
    if (same(slot, s, head)) { // a repeated token: the later id wins
      owned_by_id_[slot.id].len = -1;
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
  owned_storage_.clear();
  owned_storage_.reserve(bytes);
  owned_by_id_.assign(static_cast<std::size_t>(limit), Entry{});
  std::vector<std::uint64_t> hashes(entries.size());
  std::vector<std::size_t> owner(static_cast<std::size_t>(limit)); // the entry that gives each id its token: the last
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto& [t, id] = entries[k];
    owned_by_id_[id] = Entry{owned_storage_.size(), static_cast<std::int64_t>(t.size())};
    owner[id] = k;
    owned_storage_.insert(owned_storage_.end(), t.begin(), t.end());
    hashes[k] = hash_bytes(t);
  }
  storage_ = std::string_view(owned_storage_.data(), owned_storage_.size());
  by_id_ = owned_by_id_;
  viewed_ = false;
  resize_table(entries.size());
  constexpr std::size_t ahead = 16;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (k + ahead < entries.size()) prefetch(hashes[k + ahead]);
    const std::int32_t id = entries[k].second;
    if (owner[id] != k) continue; // the id was given again to a later token
    place(id, hashes[k]);
  }
}

void Vocabulary::save(TableWriter& w) const {
  w.add(std::span<const std::size_t>(&size_, 1));
  w.add(std::span<const char>(storage_.data(), storage_.size()));
  w.add(by_id_);
  w.add(slots_);
}

Vocabulary Vocabulary::view(TableReader& r) {
  Vocabulary v;
  const auto size = r.next<std::size_t>();
  const auto storage = r.next<char>();
  v.storage_ = std::string_view(storage.data(), storage.size());
  v.by_id_ = r.next<Entry>();
  v.slots_ = r.next<Slot>();
  if (size.size() != 1 || v.slots_.size() < 16 || (v.slots_.size() & (v.slots_.size() - 1)) != 0 ||
      size[0] >= v.slots_.size() || v.by_id_.size() >= (std::size_t{1} << 31))
    throw BadTables("the vocabulary's table sizes do not add up");
  for (const Entry& e : v.by_id_) // every token's bytes inside the storage
    if (e.len >= 0 && (e.at > storage.size() || static_cast<std::uint64_t>(e.len) > storage.size() - e.at))
      throw BadTables("a vocabulary entry lies outside its storage");
  v.size_ = size[0];
  v.mask_ = v.slots_.size() - 1;
  v.viewed_ = true;
  return v;
}

std::int32_t Vocabulary::find(std::string_view token, std::uint64_t h) const {
  const std::uint64_t head = head_of(token);
  for (std::size_t i = h & mask_, probes = 0; probes <= mask_; i = (i + 1) & mask_, ++probes) {
    const Slot& slot = slots_[i];
    if (slot.id < 0) return -1;
    if (same(slot, token, head)) return slot.id;
  }
  throw BadTables("the vocabulary's table has no free slot"); // a damaged mapping: built ones never fill
}

} // namespace attn::text
