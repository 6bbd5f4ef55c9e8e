// Pre-tokenizers: how a normalized piece of text is cut into words before the model sees them
// (Hugging Face tokenizers' pre_tokenizers/*.rs, one class each), and the split behaviours they share.
#include "components.hpp"

#include "attn/text/unicode.hpp"
#include "attn/text/utf8.hpp"

namespace attn::text {

namespace {

// A match or the text between two matches.
struct Part {
  std::size_t begin, end;
  bool match;
};

// The spans of every character for which pred is true, each one a match.
template <class Pred> std::vector<Span> char_matches(std::string_view s, Pred pred) {
  std::vector<Span> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t b = i;
    const char32_t c = next_char(s, i);
    if (pred(c)) out.emplace_back(b, i);
  }
  return out;
}

} // namespace

Behavior parse_behavior(const Node& n, std::string_view key, Behavior fallback) {
  auto v = n.get(key);
  if (!v) return fallback;
  const std::string_view b = v->str();
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  v->fail(fmt::format("unknown behavior {:?} (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)",
                      std::string(b)));
}

void split_by(const Split& s, const std::vector<Span>& matches, Behavior behavior, bool invert,
              std::vector<Split>& out) {
  // The whole text as parts, matches and the gaps between them (pattern.rs, find_matches).
  std::vector<Part> parts;
  std::size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) parts.push_back({prev, b, false});
    parts.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.text.size() || parts.empty()) parts.push_back({prev, s.text.size(), false});
  if (invert)
    for (Part& p : parts) p.match = !p.match;

  // Which parts to keep, merged as the behaviour says (normalizer.rs, NormalizedString::split).
  std::vector<Part> kept; // match = "remove"
  bool previous_match = false;
  switch (behavior) {
  case Behavior::Isolated:
    for (Part p : parts) kept.push_back({p.begin, p.end, false});
    break;
  case Behavior::Removed: kept = parts; break;
  case Behavior::Contiguous:
    for (const Part& p : parts) {
      if (p.match == previous_match && !kept.empty())
        kept.back().end = p.end;
      else
        kept.push_back({p.begin, p.end, false});
      previous_match = p.match;
    }
    break;
  case Behavior::MergedWithPrevious:
    for (const Part& p : parts) {
      if (p.match && !previous_match && !kept.empty())
        kept.back().end = p.end;
      else
        kept.push_back({p.begin, p.end, false});
      previous_match = p.match;
    }
    break;
  case Behavior::MergedWithNext:
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      if (it->match && !previous_match && !kept.empty())
        kept.back().begin = it->begin;
      else
        kept.push_back({it->begin, it->end, false});
      previous_match = it->match;
    }
    std::reverse(kept.begin(), kept.end());
    break;
  }
  for (const Part& p : kept)
    if (!p.match && p.end > p.begin)
      out.push_back({s.text.substr(p.begin, p.end - p.begin),
                     p.begin < s.zero_span ? std::min(s.zero_span - p.begin, p.end - p.begin) : 0});
}

namespace {

// Applies `cut` (one Split -> its splits appended to a vector) to every piece.
template <class Cut> void split_each(std::vector<Split>& pieces, Cut cut) {
  std::vector<Split> out;
  out.reserve(pieces.size());
  for (const Split& p : pieces) cut(p, out);
  pieces = std::move(out);
}

constexpr std::string_view gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
public:
  explicit ByteLevel(const Node& n)
      : add_prefix_space_(n.bool_or("add_prefix_space", true)), use_regex_(n.bool_or("use_regex", true)),
        regex_(gpt2_pattern, n.where) {}
  void pre_tokenize(std::vector<Split>& pieces) const override {
    std::vector<Span> m;
    split_each(pieces, [&](const Split& p, std::vector<Split>& out) {
      Split s = p;
      if (add_prefix_space_ && !s.text.empty() && s.text[0] != ' ') {
        s.text = " " + s.text;
        if (s.zero_span) ++s.zero_span;
      }
      if (!use_regex_) {
        out.push_back(std::move(s));
        return;
      }
      m.clear();
      regex_.find_all(s.text, m);
      split_by(s, m, Behavior::Isolated, false, out);
    });
    for (Split& p : pieces) { // every byte as its character of the byte-level alphabet
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      std::size_t zero = 0;
      for (std::size_t k = 0; k < p.text.size(); ++k) {
        mapped += byte_char(static_cast<unsigned char>(p.text[k]));
        if (k + 1 == p.zero_span) zero = mapped.size();
      }
      p.text = std::move(mapped);
      p.zero_span = zero;
    }
  }

private:
  bool add_prefix_space_, use_regex_;
  Regex regex_;
};

class SplitPattern final : public PreTokenizer {
public:
  explicit SplitPattern(const Node& n)
      : behavior_(parse_behavior(n, "behavior", Behavior::Isolated)), invert_(n.bool_or("invert", false)),
        pattern_(n.at("pattern")) {}
  void pre_tokenize(std::vector<Split>& pieces) const override {
    std::vector<Span> m;
    split_each(pieces, [&](const Split& p, std::vector<Split>& out) {
      m.clear();
      pattern_.find_all(p.text, m);
      split_by(p, m, behavior_, invert_, out);
    });
  }

private:
  Behavior behavior_;
  bool invert_;
  Pattern pattern_;
};

// Rust's regex \w (Unicode): Alphabetic, marks, decimal digits, connector punctuation, joiners.
constexpr std::string_view rust_word = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";

class Whitespace final : public PreTokenizer {
public:
  explicit Whitespace(const Node& n)
      : regex_(fmt::format(R"({0}+|[^{1}\s]+)", rust_word, rust_word.substr(1, rust_word.size() - 2)), n.where) {}
  void pre_tokenize(std::vector<Split>& pieces) const override {
    std::vector<Span> m;
    split_each(pieces, [&](const Split& p, std::vector<Split>& out) {
      m.clear();
      regex_.find_all(p.text, m);
      split_by(p, m, Behavior::Removed, true, out);
    });
  }

private:
  Regex regex_;
};

// Splits on every character `pred` accepts, with one behaviour.
template <class Pred> class CharSplit final : public PreTokenizer {
public:
  CharSplit(Pred pred, Behavior behavior) : pred_(pred), behavior_(behavior) {}
  void pre_tokenize(std::vector<Split>& pieces) const override {
    split_each(pieces, [&](const Split& p, std::vector<Split>& out) {
      split_by(p, char_matches(p.text, pred_), behavior_, false, out);
    });
  }

private:
  Pred pred_;
  Behavior behavior_;
};
template <class Pred> std::unique_ptr<PreTokenizer> char_split(Pred pred, Behavior behavior) {
  return std::make_unique<CharSplit<Pred>>(pred, behavior);
}

bool is_bert_punctuation(char32_t c) { return is_ascii_punctuation(c) || is_punctuation(c); }

enum class Prepend { Always, First, Never };

Prepend parse_prepend_scheme(const Node& n) {
  if (auto v = n.get("prepend_scheme")) {
    const std::string_view s = v->str();
    if (s == "always") return Prepend::Always;
    if (s == "first") return Prepend::First;
    if (s == "never") return Prepend::Never;
    v->fail(fmt::format("unknown prepend_scheme {:?} (always, first, never)", std::string(s)));
  }
  return n.bool_or("add_prefix_space", true) ? Prepend::Always : Prepend::Never;
}

std::string one_char(const Node& n, std::string_view key, std::string_view fallback) {
  std::string s = n.str_or(key, fallback);
  std::size_t i = 0;
  if (s.empty() || (next_char(s, i), i != s.size())) n.at(key).fail("must be one character");
  return s;
}

class Metaspace final : public PreTokenizer {
public:
  explicit Metaspace(const Node& n)
      : replacement_(one_char(n, "replacement", "\xE2\x96\x81")), prepend_(parse_prepend_scheme(n)),
        split_(n.bool_or("split", true)) {}
  void pre_tokenize(std::vector<Split>& pieces) const override {
    std::vector<Span> m;
    split_each(pieces, [&](const Split& p, std::vector<Split>& out) {
      Split s{std::string(), 0};
      s.text.reserve(p.text.size() + 8);
      for (std::size_t k = 0; k < p.text.size(); ++k) {
        if (p.text[k] == ' ')
          s.text += replacement_;
        else
          s.text += p.text[k];
        if (k + 1 == p.zero_span) s.zero_span = s.text.size();
      }
      const bool starts = s.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (prepend_ == Prepend::Always || (prepend_ == Prepend::First && p.at_start()))) {
        s.text = replacement_ + s.text;
        if (s.zero_span) s.zero_span += replacement_.size();
      }
      if (!split_) {
        out.push_back(std::move(s));
        return;
      }
      m.clear();
      literal_matches(s.text, replacement_, m);
      split_by(s, m, Behavior::MergedWithNext, false, out);
    });
  }

private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

class Sequence final : public PreTokenizer {
public:
  explicit Sequence(const Node& n) {
    for (const Node& p : n.at("pretokenizers").items()) parts_.push_back(make_pre_tokenizer(p));
  }
  void pre_tokenize(std::vector<Split>& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

} // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Node& n) {
  const std::string t = n.type();
  if (t == "ByteLevel") return std::make_unique<ByteLevel>(n);
  if (t == "Split") return std::make_unique<SplitPattern>(n);
  if (t == "Whitespace") return std::make_unique<Whitespace>(n);
  if (t == "WhitespaceSplit") return char_split(is_white_space, Behavior::Removed);
  if (t == "Metaspace") return std::make_unique<Metaspace>(n);
  if (t == "Digits")
    return char_split(is_numeric, n.bool_or("individual_digits", false) ? Behavior::Isolated : Behavior::Contiguous);
  if (t == "Punctuation") return char_split(is_bert_punctuation, parse_behavior(n, "behavior", Behavior::Isolated));
  if (t == "BertPreTokenizer") {
    struct Bert final : PreTokenizer {
      void pre_tokenize(std::vector<Split>& pieces) const override {
        CharSplit white(is_white_space, Behavior::Removed);
        CharSplit punct(is_bert_punctuation, Behavior::Isolated);
        white.pre_tokenize(pieces);
        punct.pre_tokenize(pieces);
      }
    };
    return std::make_unique<Bert>();
  }
  if (t == "CharDelimiterSplit") {
    const std::string d = one_char(n, "delimiter", "");
    std::size_t i = 0;
    const char32_t c = next_char(d, i);
    return char_split([c](char32_t x) { return x == c; }, Behavior::Removed);
  }
  if (t == "Sequence") return std::make_unique<Sequence>(n);
  n.unsupported("pre_tokenizer");
}

} // namespace attn::text
