// Decoders: tokens back to text (Hugging Face tokenizers' decoders/*.rs); each turns the list of
// token strings into another, and the results are joined.
#include "components.hpp"

#include "attn/text/utf8.hpp"

namespace attn::text {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  std::size_t prev = 0;
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, prev)) {
    out.append(s, prev, at - prev);
    out += to;
    prev = at + from.size();
  }
  if (prev == 0) return;
  out.append(s, prev, std::string::npos);
  s = std::move(out);
}

class ByteLevel final : public Decoder {
public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      // a token with a character outside the byte-level alphabet goes as its own bytes
      const std::size_t start = bytes.size();
      std::size_t i = 0;
      bool all = true;
      while (i < t.size()) {
        const int b = char_byte(next_char(t, i));
        if (b < 0) {
          all = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!all) {
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class Metaspace final : public Decoder {
public:
  explicit Metaspace(const Node& n) : replacement_(n.str_or("replacement", "\xE2\x96\x81")) {
    const std::string scheme = n.str_or("prepend_scheme", n.bool_or("add_prefix_space", true) ? "always" : "never");
    strip_first_ = scheme != "never";
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      replace_all(tokens[i], replacement_, i == 0 && strip_first_ ? "" : " ");
  }

private:
  std::string replacement_;
  bool strip_first_;
};

class WordPiece final : public Decoder {
public:
  explicit WordPiece(const Node& n) : prefix_(n.str_or("prefix", "##")), cleanup_(n.bool_or("cleanup", true)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.starts_with(prefix_))
          t.erase(0, prefix_.size());
        else
          t = " " + t;
      }
      if (cleanup_) cleanup(t);
    }
  }
  // decoders/wordpiece.rs' cleanup: spaces before punctuation and English contractions removed
  static void cleanup(std::string& t) {
    replace_all(t, " .", ".");
    replace_all(t, " ?", "?");
    replace_all(t, " !", "!");
    replace_all(t, " ,", ",");
    replace_all(t, " ' ", "'");
    replace_all(t, " n't", "n't");
    replace_all(t, " 'm", "'m");
    replace_all(t, " do not", " don't");
    replace_all(t, " 's", "'s");
    replace_all(t, " 've", "'ve");
    replace_all(t, " 're", "'re");
  }

private:
  std::string prefix_;
  bool cleanup_;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class ByteFallback final : public Decoder {
public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (invalid_utf8_offset(bytes) == npos)
        out.push_back(bytes);
      else
        for (std::size_t k = 0; k < bytes.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      bytes.clear();
    };
    for (std::string& t : tokens) {
      // "<0xAB>": one byte
      if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>' && hex_digit(t[3]) >= 0 && hex_digit(t[4]) >= 0) {
        bytes += static_cast<char>(hex_digit(t[3]) * 16 + hex_digit(t[4]));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class Fuse final : public Decoder {
public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class Strip final : public Decoder {
public:
  explicit Strip(const Node& n)
      : content_(n.str("content")), start_(static_cast<std::size_t>(n.int_or("start", 0))),
        stop_(static_cast<std::size_t>(n.int_or("stop", 0))) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::size_t b = 0, e = t.size();
      for (std::size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k)
        b += content_.size();
      for (std::size_t k = 0;
           k < stop_ && e >= b + content_.size() && t.compare(e - content_.size(), content_.size(), content_) == 0; ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

private:
  std::string content_;
  std::size_t start_, stop_;
};

class Replace final : public Decoder {
public:
  explicit Replace(const Node& n) : content_(n.str("content")), pattern_(n.at("pattern")) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
  }

private:
  std::string content_;
  Pattern pattern_;
};

// BPEDecoder: the end-of-word suffix becomes a space (none after the last token).
class BpeSuffix final : public Decoder {
public:
  explicit BpeSuffix(const Node& n) : suffix_(n.str_or("suffix", "</w>")) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

private:
  std::string suffix_;
};

class Sequence final : public Decoder {
public:
  explicit Sequence(const Node& n) {
    for (const Node& p : n.at("decoders").items()) parts_.push_back(make_decoder(p));
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

} // namespace

std::unique_ptr<Decoder> make_decoder(const Node& n) {
  const std::string t = n.type();
  if (t == "ByteLevel") return std::make_unique<ByteLevel>();
  if (t == "Metaspace") return std::make_unique<Metaspace>(n);
  if (t == "WordPiece") return std::make_unique<WordPiece>(n);
  if (t == "ByteFallback") return std::make_unique<ByteFallback>();
  if (t == "Fuse") return std::make_unique<Fuse>();
  if (t == "Strip") return std::make_unique<Strip>(n);
  if (t == "Replace") return std::make_unique<Replace>(n);
  if (t == "BPEDecoder") return std::make_unique<BpeSuffix>(n);
  if (t == "Sequence") return std::make_unique<Sequence>(n);
  n.unsupported("decoder");
}

} // namespace attn::text
