// Normalizers: how text is cleaned before it is split (Hugging Face tokenizers' normalizers/*.rs).
#include "components.hpp"

#include "attn/text/unicode.hpp"
#include "attn/text/utf8.hpp"

namespace attn::text {

namespace {

// Keeps the characters keep(c) accepts, each written as map(c).
template <class Keep, class Map> void filter_map(std::string& s, Keep keep, Map map) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const char32_t c = next_char(s, i);
    if (keep(c)) append_utf8(out, map(c));
  }
  s = std::move(out);
}

class Unicode final : public Normalizer {
public:
  explicit Unicode(NormalForm f) : form_(f) {}
  void normalize(std::string& s) const override { s = text::normalize(s, form_); }

private:
  NormalForm form_;
};

class Lowercase final : public Normalizer {
public:
  void normalize(std::string& s) const override { s = lowercase(s); }
};

class Strip final : public Normalizer {
public:
  explicit Strip(const Node& n) : left_(n.bool_or("strip_left", true)), right_(n.bool_or("strip_right", true)) {}
  void normalize(std::string& s) const override {
    std::size_t b = 0, e = s.size();
    if (left_)
      while (b < e) {
        std::size_t i = b;
        if (!is_white_space(next_char(s, i))) break;
        b = i;
      }
    if (right_)
      while (e > b) {
        std::size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        std::size_t i = start;
        if (!is_white_space(next_char(s, i))) break;
        e = start;
      }
    s = s.substr(b, e - b);
  }

private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
public:
  void normalize(std::string& s) const override {
    filter_map(
        s, [](char32_t c) { return !is_mark(c); }, [](char32_t c) { return c; });
  }
};

class Replace final : public Normalizer {
public:
  explicit Replace(const Node& n) : content_(n.str("content")), pattern_(n.at("pattern")) {}
  void normalize(std::string& s) const override { s = pattern_.replace_all(s, content_); }

private:
  std::string content_;
  Pattern pattern_;
};

class PrependText final : public Normalizer {
public:
  explicit PrependText(const Node& n) : prepend_(n.str("prepend")) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s = prepend_ + s;
  }

private:
  std::string prepend_;
};

class Bert final : public Normalizer {
public:
  explicit Bert(const Node& n)
      : clean_text_(n.bool_or("clean_text", true)), chinese_(n.bool_or("handle_chinese_chars", true)),
        lowercase_(n.bool_or("lowercase", true)), strip_accents_(n.bool_or("strip_accents", lowercase_)) {}
  void normalize(std::string& s) const override {
    if (clean_text_) // drop NUL, U+FFFD and control characters; whitespace becomes a space
      filter_map(
          s,
          [](char32_t c) {
            if (c == '\t' || c == '\n' || c == '\r') return true;
            return c != 0 && c != 0xFFFD && !is_other(c);
          },
          [](char32_t c) { return (c == '\t' || c == '\n' || c == '\r' || is_white_space(c)) ? U' ' : c; });
    if (chinese_) {
      std::string out;
      out.reserve(s.size());
      std::size_t i = 0;
      while (i < s.size()) {
        const std::size_t b = i;
        const char32_t c = next_char(s, i);
        if (is_cjk(c)) out += ' ';
        out.append(s, b, i - b);
        if (is_cjk(c)) out += ' ';
      }
      s = std::move(out);
    }
    if (strip_accents_) {
      s = text::normalize(s, NormalForm::NFD);
      filter_map(
          s, [](char32_t c) { return !is_nonspacing_mark(c); }, [](char32_t c) { return c; });
    }
    if (lowercase_) s = lowercase(s);
  }

private:
  bool clean_text_, chinese_, lowercase_, strip_accents_;
};

class Sequence final : public Normalizer {
public:
  explicit Sequence(const Node& n) {
    for (const Node& p : n.at("normalizers").items()) parts_.push_back(make_normalizer(p));
  }
  void normalize(std::string& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

} // namespace

std::unique_ptr<Normalizer> make_normalizer(const Node& n) {
  const std::string t = n.type();
  if (t == "NFC") return std::make_unique<Unicode>(NormalForm::NFC);
  if (t == "NFD") return std::make_unique<Unicode>(NormalForm::NFD);
  if (t == "NFKC") return std::make_unique<Unicode>(NormalForm::NFKC);
  if (t == "NFKD") return std::make_unique<Unicode>(NormalForm::NFKD);
  if (t == "Lowercase") return std::make_unique<Lowercase>();
  if (t == "Strip") return std::make_unique<Strip>(n);
  if (t == "StripAccents") return std::make_unique<StripAccents>();
  if (t == "Replace") return std::make_unique<Replace>(n);
  if (t == "Prepend") return std::make_unique<PrependText>(n);
  if (t == "BertNormalizer") return std::make_unique<Bert>(n);
  if (t == "Sequence") return std::make_unique<Sequence>(n);
  if (t == "Precompiled") return make_precompiled(n);
  n.unsupported("normalizer");
}

} // namespace attn::text
