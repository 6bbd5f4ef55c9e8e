// Reading a model's vocabulary and merges from tokenizer.json with simdjson's On-Demand parser:
// one pass over the text, strings viewed where they lie (components.hpp, ModelData).
#include "components.hpp"

#include "attn/text/utf8.hpp"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace attn::text {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The JSON string whose text starts at p (after its opening quote; simdjson has checked the
// document's syntax and UTF-8): a view of the text when it has no escapes, else decoded into `data`.
std::string_view json_string(const char* p, ModelData& data, const std::string& where) {
  const char* q = p;
  while (*q != '"' && *q != '\\') ++q;
  if (*q == '"') return std::string_view(p, static_cast<std::size_t>(q - p));
  auto out = std::make_unique<std::string>(p, q);
  auto hex4 = [&](const char* h) {
    int v = 0;
    for (int k = 0; k < 4; ++k) {
      const int d = hex_value(h[k]);
      if (d < 0) throw Error(fmt::format("{}: a bad \\u escape in a string", where));
      v = v * 16 + d;
    }
    return static_cast<char32_t>(v);
  };
  while (*q != '"') {
    if (*q != '\\') {
      *out += *q++;
      continue;
    }
    const char e = q[1];
    q += 2;
    switch (e) {
    case '"': *out += '"'; break;
    case '\\': *out += '\\'; break;
    case '/': *out += '/'; break;
    case 'b': *out += '\b'; break;
    case 'f': *out += '\f'; break;
    case 'n': *out += '\n'; break;
    case 'r': *out += '\r'; break;
    case 't': *out += '\t'; break;
    case 'u': {
      char32_t c = hex4(q);
      q += 4;
      if (c >= 0xD800 && c <= 0xDBFF && q[0] == '\\' && q[1] == 'u') { // a surrogate pair
        const char32_t lo = hex4(q + 2);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
          c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
          q += 6;
        }
      }
      if (c >= 0xD800 && c <= 0xDFFF) throw Error(fmt::format("{}: a lone surrogate \\u escape in a string", where));
      append_utf8(*out, c);
      break;
    }
    default: throw Error(fmt::format("{}: a bad escape in a string", where));
    }
  }
  data.unescaped.push_back(std::move(out));
  return *data.unescaped.back();
}

template <class T> T checked(simdjson::simdjson_result<T> r, const std::string& where, std::string_view what) {
  T v;
  if (auto e = std::move(r).get(v)) throw Error(fmt::format("{}: {} ({})", where, what, simdjson::error_message(e)));
  return v;
}

void read_merges(simdjson::ondemand::array merges, ModelData& data, const std::string& where) {
  std::size_t rank = 0, count = 0;
  if (!merges.count_elements().get(count)) data.merges.reserve(count);
  for (auto m : merges) {
    simdjson::ondemand::value v = checked(std::move(m), where, "a merge is not JSON");
    const auto type = checked(v.type(), where, "a merge is not JSON");
    if (type == simdjson::ondemand::json_type::string) { // "a b"
      const std::string_view line =
          json_string(checked(v.get_raw_json_string(), where, "bad merge").raw(), data, where);
      const std::size_t sp = line.find(' ');
      if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos)
        throw Error(fmt::format("{}.merges[{}]: {:?} is not two tokens separated by one space", where, rank,
                                std::string(line)));
      data.merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    } else if (type == simdjson::ondemand::json_type::array) { // ["a", "b"]
      std::string_view pair[2];
      std::size_t k = 0;
      for (auto x : checked(v.get_array(), where, "bad merge")) {
        simdjson::ondemand::raw_json_string r;
        if (k >= 2 || x.get_raw_json_string().get(r))
          throw Error(fmt::format("{}.merges[{}]: not [\"a\", \"b\"]", where, rank));
        pair[k++] = json_string(r.raw(), data, where);
      }
      if (k != 2) throw Error(fmt::format("{}.merges[{}]: not [\"a\", \"b\"]", where, rank));
      data.merges.emplace_back(pair[0], pair[1]);
    } else {
      throw Error(fmt::format("{}.merges[{}]: neither \"a b\" nor [\"a\", \"b\"]", where, rank));
    }
    ++rank;
  }
  data.has_merges = true;
}

// Unigram's [["piece", score], ...].
void read_pieces(simdjson::ondemand::array list, ModelData& data, const std::string& where) {
  std::size_t i = 0;
  for (auto item : list) {
    simdjson::ondemand::array pair = checked(checked(std::move(item), where, "bad vocab").get_array(), where,
                                             fmt::format("vocab[{}] is not [piece, score]", i));
    std::string_view piece;
    double score = 0;
    std::size_t k = 0;
    for (auto x : pair) {
      if (k == 0) {
        simdjson::ondemand::raw_json_string r;
        if (x.get_raw_json_string().get(r))
          throw Error(fmt::format("{}.vocab[{}]: the piece is not a string", where, i));
        piece = json_string(r.raw(), data, where);
      } else if (k == 1) {
        simdjson::ondemand::value v;
        double checked_score;
        if (x.get(v) || v.get_double().get(checked_score)) // simdjson checks the number's syntax
          throw Error(fmt::format("{}.vocab[{}]: the score is not a number", where, i));
        score = serde_f64(v.raw_json_token());
      }
      ++k;
    }
    if (k != 2) throw Error(fmt::format("{}.vocab[{}]: not [piece, score]", where, i));
    data.pieces.emplace_back(piece, score);
    ++i;
  }
  data.has_vocab = data.vocab_is_list = true;
}

} // namespace

// serde_json's f64_from_parts: the significand's first 19 digits as an integer (more are dropped),
// converted to double and multiplied or divided once by a power of ten. Not always the correctly
// rounded value (a 17-digit significand is rounded twice): Unigram scores read so tie exactly where
// the library's do.
double serde_f64(std::string_view t) {
  static const std::vector<double> pow10 = [] {
    std::vector<double> p(309);
    for (int i = 0; i < 309; ++i) p[i] = std::strtod(fmt::format("1e{}", i).c_str(), nullptr);
    return p;
  }();
  std::size_t i = 0;
  const bool negative = i < t.size() && t[i] == '-';
  if (negative) ++i;
  std::uint64_t sig = 0;
  int exponent = 0;
  bool overflow = false;
  auto digit = [&](bool fraction) {
    const unsigned d = static_cast<unsigned>(t[i] - '0');
    if (!overflow && (sig > 1844674407370955161ull || (sig == 1844674407370955161ull && d > 5))) overflow = true;
    if (!overflow) {
      sig = sig * 10 + d;
      if (fraction) --exponent;
    } else if (!fraction) {
      ++exponent; // a dropped digit of the integer part
    }
  };
  for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) digit(false);
  if (i < t.size() && t[i] == '.')
    for (++i; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) digit(true);
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    const bool neg_exp = i < t.size() && t[i] == '-';
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    int e = 0;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) e = std::min(e * 10 + (t[i] - '0'), 100000);
    exponent += neg_exp ? -e : e;
  }
  double f = static_cast<double>(sig);
  for (;;) {
    const int a = exponent < 0 ? -exponent : exponent;
    if (a < static_cast<int>(pow10.size())) {
      f = exponent >= 0 ? f * pow10[a] : f / pow10[a];
      break;
    }
    if (f == 0.0 || exponent >= 0) break; // a positive exponent this large is out of range (simdjson said so)
    f /= 1e308;
    exponent += 308;
  }
  return negative ? -f : f;
}

std::string_view raw_json_text(simdjson::ondemand::value& v, const std::string& where) {
  switch (checked(v.type(), where, "bad JSON")) {
  case simdjson::ondemand::json_type::object:
    return checked(checked(v.get_object(), where, "bad JSON").raw_json(), where, "bad JSON");
  case simdjson::ondemand::json_type::array:
    return checked(checked(v.get_array(), where, "bad JSON").raw_json(), where, "bad JSON");
  default: return v.raw_json_token();
  }
}

void read_vocab_json(simdjson::ondemand::value vocab, ModelData& data, const std::string& where) {
  simdjson::ondemand::object obj = checked(vocab.get_object(), where, "the vocabulary is not a JSON object");
  for (auto field : obj) {
    simdjson::ondemand::raw_json_string key = checked(field.key(), where, "bad vocabulary key");
    const std::string_view token = json_string(key.raw(), data, where);
    std::int64_t id;
    if (field.value().get_int64().get(id) || id < 0 || id >= (std::int64_t(1) << 30))
      throw Error(fmt::format("{}.vocab: the id of {:?} is not an integer in [0, 2^30)", where, std::string(token)));
    data.vocab.emplace_back(token, static_cast<std::int32_t>(id));
  }
  data.has_vocab = true;
}

std::string read_model_json(simdjson::ondemand::value model, ModelData& data, const std::string& where) {
  simdjson::ondemand::object obj = checked(model.get_object(), where, "is not a JSON object");
  std::string options = "{";
  std::string_view deferred_merges; // merges written before the vocabulary: read after it
  for (auto field : obj) {
    const std::string_view key = checked(field.unescaped_key(), where, "bad key");
    simdjson::ondemand::value v = checked(field.value(), where, "bad value");
    if (key == "vocab") {
      const auto type = checked(v.type(), where, "bad vocab");
      if (type == simdjson::ondemand::json_type::array)
        read_pieces(checked(v.get_array(), where, "bad vocab"), data, where);
      else
        read_vocab_json(v, data, where);
    } else if (key == "merges") {
      if (data.has_vocab)
        read_merges(checked(v.get_array(), where, "merges is not a JSON array"), data, where);
      else
        deferred_merges = raw_json_text(v, where);
    } else {
      if (options.size() > 1) options += ',';
      options += fmt::format("\"{}\":{}", std::string(key), std::string(raw_json_text(v, where)));
    }
  }
  if (!deferred_merges.empty()) {
    simdjson::ondemand::parser parser;
    const simdjson::padded_string text(deferred_merges);
    auto doc = parser.iterate(text);
    read_merges(checked(doc.get_array(), where, "merges is not a JSON array"), data, where);
  }
  return options + "}";
}

} // namespace attn::text
