// Reading tokenizer.json and running the pipeline (tokenizer.hpp).
#include "attn/text/tokenizer.hpp"

#include "added_vocabulary.hpp"
#include "components.hpp"

#include "attn/text/utf8.hpp"

#include "attn/sys/mapped_range.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <ctime>
#include <filesystem>
#include <map>

namespace attn::text {

namespace fs = std::filesystem;

class Tokenizer::Cache {
public:
  ModelCache model;
};

struct Tokenizer::Impl {
  std::shared_ptr<MappedRange> tables; // the cache file the model's tables are viewed in, if any
  std::string tables_file;
  std::string label;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added; // in the order the file gives them; ids are unique
  std::map<std::int32_t, std::size_t> added_by_id;
  AddedTokenSet raw_set, normalized_set;
  std::vector<std::int32_t> prefix, suffix; // the post-processor's special tokens
  std::int64_t pad_id = 0;
  bool byte_level = false;

  void add_tokens(std::vector<AddedToken> tokens);
  std::vector<std::int32_t> encode(std::string_view text, bool add_special, Cache& cache) const;
  void encode_words(std::string text, std::size_t zero_span, std::vector<std::int32_t>& ids, Cache& cache) const;
};

struct Tokenizer::Cached {
  CachedTables file;
};

namespace {

// A tokenizer.json this large keeps its model's tables in the cache (LLaMA 2's 1.8 MB file took
// 40 ms to read, GPT-2's 2.1 MB file 70 ms; BERT's 0.5 MB file, most of the tests' small ones, are
// read as fast as a cache file would be found).
constexpr std::uint64_t cache_min_bytes = 1 << 20;

// `s` as a JSON string.
std::string json_quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + '"';
}

bool has_type(const std::optional<Node>& n, std::string_view type) {
  if (!n) return false;
  if (n->type() == type) return true;
  for (const char* key : {"pretokenizers", "decoders"})
    if (auto list = n->get(key))
      for (const Node& p : list->items())
        if (has_type(p, type)) return true;
  return false;
}

} // namespace

// The added tokens' ids as the tokens library gives them when it reads the file: a token the
// model knows keeps the model's id, another takes the next id past the vocabulary and the added
// tokens so far (added_vocabulary.rs, add_tokens).
void Tokenizer::Impl::add_tokens(std::vector<AddedToken> tokens) {
  std::map<std::string, std::int32_t, std::less<>> by_content;
  for (AddedToken& t : tokens) {
    if (t.content.empty()) continue;
    if (auto it = by_content.find(t.content); it != by_content.end()) {
      t.id = it->second;
    } else if (const std::int32_t m = model->token_to_id(t.content); m >= 0) {
      t.id = m;
    } else {
      const auto vocab = static_cast<std::int32_t>(model->vocab_size());
      const std::int32_t max = added_by_id.empty() ? -1 : added_by_id.rbegin()->first;
      t.id = (max < 0) ? vocab : (max >= vocab || vocab == 0) ? max + 1 : vocab;
    }
    by_content[t.content] = t.id;
    if (auto it = added_by_id.find(t.id); it != added_by_id.end()) {
      added[it->second] = t; // the later token with this id replaces the earlier
    } else {
      added_by_id[t.id] = added.size();
      added.push_back(t);
    }
  }
  // special tokens first, then the others (refresh_added_tokens); patterns of normalized tokens
  // are their normalized content
  for (int pass = 0; pass < 2; ++pass)
    for (const AddedToken& t : added) {
      if (t.special != (pass == 0)) continue;
      if (!t.normalized) {
        raw_set.add(t.content, &t);
      } else {
        std::string pattern = t.content;
        if (normalizer) normalizer->normalize(pattern);
        normalized_set.add(pattern, &t);
      }
    }
}

void Tokenizer::Impl::encode_words(std::string text, std::size_t zero_span, std::vector<std::int32_t>& ids,
                                   Cache& cache) const {
  std::vector<Split> pieces{{std::move(text), zero_span}};
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
  for (const Split& p : pieces)
    if (!p.text.empty()) model->tokenize(p.text, ids, cache.model);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::string tokenizer_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path f = fs::path(path) / "tokenizer.json";
    return fs::exists(f, ec) ? f.string() : std::string();
  }
  return path;
}

Tokenizer Tokenizer::load(const std::string& path) { return load(path, table_cache_dir()); }

Tokenizer Tokenizer::load(const std::string& path, const std::string& cache_dir) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(fmt::format("{}: no such file or directory", path));
  const std::string file = tokenizer_file(path);
  if (file.empty()) {
    const fs::path vocab = fs::path(path) / "vocab.json", merges = fs::path(path) / "merges.txt";
    if (!fs::exists(vocab, ec) || !fs::exists(merges, ec))
      throw Error(fmt::format("{}: a directory with neither tokenizer.json nor vocab.json and merges.txt", path));
    // GPT-2's pair, as the tokenizers library builds a byte-level BPE tokenizer from it
    auto impl = std::make_unique<Impl>();
    impl->label = vocab.string();
    impl->model = make_bpe_from_files(vocab.string(), merges.string());
    const std::string json = R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true})";
    simdjson::dom::parser parser;
    simdjson::dom::element doc = parser.parse(json);
    impl->pre_tokenizer = make_pre_tokenizer(Node{doc, impl->label});
    impl->decoder = make_decoder(Node{doc, impl->label});
    impl->byte_level = true;
    if (impl->model->token_to_id("<|endoftext|>") >= 0)
      impl->add_tokens({AddedToken{"<|endoftext|>", -1, true, false, false, false, false}});
    return Tokenizer(std::move(impl));
  }
  return load_json(file, cache_dir);
}

// A tokenizer.json: its model's tables from the cache when a cache file matches the file as it is
// now (table_cache.hpp), else read from the JSON (and put in the cache). The JSON is then mapped,
// not copied: its text is read in place where the page it ends in leaves room for simdjson's padding.
Tokenizer Tokenizer::load_json(const std::string& file, const std::string& cache_dir) {
  static_assert(simdjson::SIMDJSON_PADDING <= 64, "table_cache.cpp pads the small JSON with 64 bytes");
  struct timespec start {};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &start); // before any of its bytes are read
  const ScopedFd f(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  const bool regular = f.fd >= 0 && ::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  const FileStamp stamp = regular ? file_stamp(st) : FileStamp{};
  const std::string dir = regular && stamp.size >= cache_min_bytes ? cache_dir : std::string();
  if (auto found = open_cached_tables(dir, stamp)) {
    Cached cached{std::move(*found)};
    try {
      const std::string_view json = cached.file.json;
      return parse(simdjson::padded_string_view(json.data(), json.size(), json.size() + simdjson::SIMDJSON_PADDING),
                   file, &cached, nullptr);
    } catch (const Error&) { // tables that do not add up (checksummed, so a format bug): read the JSON
    }
  }
  const auto map = regular ? MappedRange::map(f.fd, 0, static_cast<std::size_t>(st.st_size), file) : nullptr;
  if (!map) { // not a regular file, empty, or not mappable: read as it is
    simdjson::padded_string text;
    if (auto e = simdjson::padded_string::load(file).get(text))
      throw Error(fmt::format("{}: cannot read ({})", file, simdjson::error_message(e)));
    return parse(text, file, nullptr, nullptr);
  }
  const std::string_view bytes(map->data(), map->size());
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t room = (bytes.size() + page - 1) / page * page - bytes.size(); // zeros past the end
  std::optional<simdjson::padded_string> copy;
  if (room < simdjson::SIMDJSON_PADDING) copy.emplace(bytes);
  const simdjson::padded_string_view text =
      copy ? simdjson::padded_string_view(*copy)
           : simdjson::padded_string_view(bytes.data(), bytes.size(), bytes.size() + room);
  const bool keep = !dir.empty() && settled(stamp, start);
  std::string small;
  Tokenizer t = parse(text, file, nullptr, keep ? &small : nullptr);
  TableWriter tables;
  if (keep && t.impl_->model->save_tables(tables)) write_cached_tables(dir, stamp, small, tables);
  return t;
}

Tokenizer Tokenizer::from_json(std::string_view json, const std::string& label) {
  return parse(simdjson::padded_string(json), label, nullptr, nullptr);
}

// The file's top level in one pass of simdjson's On-Demand parser: the model's vocabulary and
// merges read in place (model_json.cpp), every other member's text kept for its component, each
// small enough to parse again as a tree (Node).
Tokenizer Tokenizer::parse(simdjson::padded_string_view text, const std::string& label, Cached* cached,
                           std::string* small_json) {
  simdjson::ondemand::parser od;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (auto e = od.iterate(text).get(doc))
    throw Error(fmt::format("{}: not JSON ({})", label, simdjson::error_message(e)));
  if (auto e = doc.get_object().get(root))
    throw Error(e == simdjson::INCORRECT_TYPE ? fmt::format("{}: not a JSON object", label)
                                              : fmt::format("{}: not JSON ({})", label, simdjson::error_message(e)));
  std::map<std::string, std::string, std::less<>> parts;
  ModelData data;
  std::string model_options;
  bool has_model = false;
  for (auto field : root) {
    std::string_view key;
    simdjson::ondemand::value v;
    if (auto e = field.unescaped_key().get(key))
      throw Error(fmt::format("{}: not JSON ({})", label, simdjson::error_message(e)));
    if (auto e = field.value().get(v)) throw Error(fmt::format("{}: not JSON ({})", label, simdjson::error_message(e)));
    if (key == "model") {
      model_options = read_model_json(v, data, label + ": model");
      has_model = true;
    } else {
      parts[std::string(key)] = std::string(raw_json_text(v, label));
    }
  }
  if (!has_model) throw Error(fmt::format("{}: the key \"model\" is missing", label));
  if (small_json) { // every member but the model's vocabulary and merges, for a cache file
    *small_json = "{\"model\":" + model_options;
    for (const auto& [key, json] : parts) {
      small_json->append(",").append(json_quoted(key)).append(":").append(json);
    }
    *small_json += "}";
  }

  auto impl = std::make_unique<Impl>();
  impl->label = label;
  simdjson::dom::parser tree;
  // A member's text as a Node, or nullopt when it is absent or null.
  auto part = [&](std::string_view key, const std::string& json) -> std::optional<Node> {
    simdjson::dom::element e;
    if (auto err = tree.parse(json).get(e))
      throw Error(fmt::format("{}: {}: not JSON ({})", label, key, simdjson::error_message(err)));
    if (e.is_null()) return std::nullopt;
    return Node{e, fmt::format("{}: {}", label, key)};
  };
  auto member = [&](std::string_view key) -> std::optional<Node> {
    auto it = parts.find(key);
    return it == parts.end() ? std::nullopt : part(key, it->second);
  };
  {
    const auto options = part("model", model_options);
    if (!options) throw Error(fmt::format("{}: model: not a JSON object", label));
    if (cached) {
      impl->model = make_model_from_tables(*options, cached->file.tables);
      impl->tables = cached->file.mapping;
      impl->tables_file = cached->file.path;
    } else {
      impl->model = make_model(*options, data);
    }
  }
  if (auto n = member("normalizer")) impl->normalizer = make_normalizer(*n);
  if (auto n = member("pre_tokenizer")) {
    impl->pre_tokenizer = make_pre_tokenizer(*n);
    impl->byte_level = has_type(n, "ByteLevel");
  }
  if (auto n = member("post_processor")) impl->post_processor = make_post_processor(*n);
  if (auto n = member("decoder")) {
    impl->decoder = make_decoder(*n);
    impl->byte_level = impl->byte_level || has_type(n, "ByteLevel");
  }
  if (auto n = member("padding"))
    if (auto p = n->get("pad_id")) impl->pad_id = p->integer();
  std::vector<AddedToken> tokens;
  if (auto list = member("added_tokens"))
    for (const Node& t : list->items()) {
      const bool special = t.bool_or("special", false);
      tokens.push_back(AddedToken{std::string(t.str("content")), static_cast<std::int32_t>(t.int_or("id", -1)), special,
                                  t.bool_or("lstrip", false), t.bool_or("rstrip", false),
                                  t.bool_or("normalized", !special), t.bool_or("single_word", false)});
    }
  impl->add_tokens(std::move(tokens));
  if (impl->post_processor) impl->post_processor->specials(impl->prefix, impl->suffix);
  return Tokenizer(std::move(impl));
}

Tokenizer::CachePtr Tokenizer::new_cache() const { return CachePtr(new Cache); }
void Tokenizer::CacheDeleter::operator()(Cache* c) const { delete c; }

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  auto cache = new_cache();
  return encode(text, add_special, *cache);
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special, Cache& cache) const {
  try {
    return impl_->encode(text, add_special, cache);
  } catch (const BadTables& e) { // a table of a damaged cache file, found out as a word reached it
    throw Error(fmt::format("{}: its cache file {} is damaged ({}); delete the file", impl_->label, impl_->tables_file,
                            e.what()));
  }
}

std::vector<std::int32_t> Tokenizer::Impl::encode(std::string_view text, bool add_special, Cache& cache) const {
  const Impl& t = *this;
  std::vector<std::int32_t> ids;
  if (add_special) ids = t.prefix;
  for (const Match& raw : t.raw_set.find(text)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    if (raw.end == raw.begin) continue;
    std::string segment(text.substr(raw.begin, raw.end - raw.begin));
    // what the text's first character became (normalized alone: exact for the per-character
    // normalizers and Prepend)
    std::size_t zero_span = 0;
    if (raw.begin == 0) {
      std::string first(segment.substr(0, char_length(static_cast<unsigned char>(segment[0]))));
      if (t.normalizer) t.normalizer->normalize(first);
      zero_span = first.size();
    }
    if (t.normalizer) t.normalizer->normalize(segment);
    for (const Match& m : t.normalized_set.find(segment)) {
      if (m.id >= 0)
        ids.push_back(m.id);
      else if (m.end > m.begin)
        t.encode_words(segment.substr(m.begin, m.end - m.begin), m.begin < zero_span ? zero_span - m.begin : 0, ids,
                       cache);
    }
  }
  if (add_special) ids.insert(ids.end(), t.suffix.begin(), t.suffix.end());
  return ids;
}

std::optional<std::string_view> Tokenizer::token(std::int64_t id) const {
  if (id < 0 || id > INT32_MAX) return std::nullopt;
  const auto i = static_cast<std::int32_t>(id);
  if (auto it = impl_->added_by_id.find(i); it != impl_->added_by_id.end()) return impl_->added[it->second].content;
  return impl_->model->id_to_token(i);
}

bool Tokenizer::is_special(std::int64_t id) const {
  // the library's special_tokens_set holds contents; the id of a special content is its added token's
  auto it =
      id >= 0 && id <= INT32_MAX ? impl_->added_by_id.find(static_cast<std::int32_t>(id)) : impl_->added_by_id.end();
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

std::string Tokenizer::decode(std::span<const std::int64_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int64_t id : ids) {
    const auto tok = token(id);
    if (!tok || (skip_special && is_special(id))) continue;
    tokens.emplace_back(*tok);
  }
  if (!impl_->decoder) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  impl_->decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& s : tokens) out += s;
  return out;
}

std::int64_t Tokenizer::pad_id() const { return impl_->pad_id; }
const std::string& Tokenizer::label() const { return impl_->label; }
bool Tokenizer::from_cache() const { return impl_->tables != nullptr; }
bool Tokenizer::byte_level() const { return impl_->byte_level; }

std::string display_piece(std::string_view piece, bool byte_level) {
  std::string bytes;
  if (byte_level) {
    std::size_t i = 0;
    while (i < piece.size()) {
      const std::size_t b = i;
      const int byte = char_byte(next_char(piece, i));
      if (byte < 0)
        bytes.append(piece.substr(b, i - b));
      else
        bytes += static_cast<char>(byte);
    }
  } else if (piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>' &&
             std::isxdigit(static_cast<unsigned char>(piece[3])) &&
             std::isxdigit(static_cast<unsigned char>(piece[4]))) {
    bytes += static_cast<char>(std::stoi(std::string(piece.substr(3, 2)), nullptr, 16));
  } else {
    for (std::size_t i = 0; i < piece.size();) {
      if (piece.substr(i, 3) == "\xE2\x96\x81") {
        bytes += ' ';
        i += 3;
      } else {
        bytes += piece[i++];
      }
    }
  }
  std::string out; // the bytes that are not UTF-8 by themselves as \xNN
  std::size_t i = 0;
  while (i < bytes.size()) {
    const std::size_t bad = invalid_utf8_offset(std::string_view(bytes).substr(i));
    if (bad == npos) {
      out.append(bytes, i, std::string::npos);
      break;
    }
    out.append(bytes, i, bad);
    out += fmt::format("\\x{:02X}", static_cast<unsigned char>(bytes[i + bad]));
    i += bad + 1;
  }
  return out;
}

} // namespace attn::text
