// Added tokens (special or not): found in the text before the model sees it, leftmost-longest as
// Hugging Face tokenizers' added_vocabulary.rs finds them, with their lstrip, rstrip and
// single_word options. Private to the library.
#pragma once

#include "components.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

struct AddedToken {
  std::string content;
  std::int32_t id;
  bool special, lstrip, rstrip, normalized, single_word;
};

// A part of a text: an added token (id >= 0) or the text between them (id = -1).
struct Match {
  std::int32_t id;
  std::size_t begin, end;
};

// Every added token of one kind (matched against the raw text, or against the normalized text)
// in a trie over their bytes.
class AddedTokenSet {
public:
  AddedTokenSet();
  void add(std::string_view pattern, const AddedToken* token);
  // The text cut into added tokens and the rest (added_vocabulary.rs, find_matches); an empty text
  // gives one empty part.
  std::vector<Match> find(std::string_view s) const;
  bool empty() const { return nodes_.size() == 1; }

private:
  struct TrieNode {
    std::vector<std::pair<unsigned char, std::int32_t>> next; // sorted by byte
    const AddedToken* token = nullptr;                        // a pattern ends here
  };
  std::int32_t child(std::int32_t node, unsigned char b) const;
  std::vector<TrieNode> nodes_;
  bool first_byte_[256] = {};
  Regex word_start_, word_end_; // Rust regex \w at the start / end
};

} // namespace attn::text
