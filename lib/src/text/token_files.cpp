// Sequences of text, tokenized in parallel, and the token files (token_files.hpp).
#include "attn/text/token_files.hpp"

#include "attn/core/error.hpp"
#include "attn/hf/model_dir.hpp"
#include "attn/sys/tempfile.hpp"
#include "attn/text/utf8.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace attn::text {

std::string read_text(const std::string& path) {
  std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("{}: cannot open for reading ({})", path, std::strerror(errno)));
  std::string out;
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f);
  if (f != stdin) std::fclose(f);
  if (failed) throw Error(fmt::format("{}: read error", h5::input_label(path)));
  return out;
}

void write_text_file(const std::string& target, const std::string& text) {
  StagedOutput out(target);
  {
    std::ofstream f(out.path(), std::ios::binary);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!f.flush()) throw Error(fmt::format("{}: write failed", h5::input_label(target)));
  }
  out.commit();
}

std::vector<std::string_view> split_sequences(std::string_view text, bool lines) {
  std::vector<std::string_view> out;
  if (!lines) {
    out.push_back(text);
    return out;
  }
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    const std::size_t next = end == std::string_view::npos ? text.size() : end + 1;
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (end < text.size() && !line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    at = next;
  }
  return out;
}

std::int64_t Rows::longest() const {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < size(); ++i) n = std::max(n, length(i));
  return n;
}

void Rows::append(const std::vector<std::int32_t>& r) {
  ids.insert(ids.end(), r.begin(), r.end());
  offsets.push_back(static_cast<std::int64_t>(ids.size()));
}

Rows encode_all(const Tokenizer& tok, const std::vector<std::string_view>& seqs, bool add_special,
                const std::string& source, int threads, std::int64_t first_index) {
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const std::size_t bad = invalid_utf8_offset(seqs[i]);
    if (bad != npos)
      check_utf8(seqs[i], fmt::format("{}: sequence {}", source, first_index + static_cast<std::int64_t>(i)));
  }
  std::vector<std::vector<std::int32_t>> ids(seqs.size());
  const int n = threads > 0 ? threads : omp_get_max_threads();
  std::exception_ptr failure;
#pragma omp parallel num_threads(n)
  {
    auto cache = tok.new_cache();
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(seqs.size()); ++i) {
      try {
        ids[i] = tok.encode(seqs[i], add_special, *cache);
      } catch (...) {
#pragma omp critical
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
  Rows rows;
  std::size_t total = 0;
  for (const auto& r : ids) total += r.size();
  rows.ids.reserve(total);
  rows.offsets.reserve(ids.size() + 1);
  for (const auto& r : ids) rows.append(r);
  return rows;
}

Rows encode_file(const Tokenizer& tok, const std::string& path, bool lines, bool add_special, int threads) {
  const std::string source = h5::input_label(path);
  if (!lines) {
    const std::string text = read_text(path);
    if (text.empty()) throw Error(fmt::format("{}: no text to tokenize (the input is empty)", source));
    return encode_all(tok, {text}, add_special, source, threads);
  }
  std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("{}: cannot open for reading ({})", path, std::strerror(errno)));
  struct Closer {
    std::FILE* f;
    ~Closer() {
      if (f != stdin) std::fclose(f);
    }
  } closer{f};
  constexpr std::size_t block = 8 << 20;
  Rows all;
  // room for the ids at once (one token in two bytes or more: text, not a byte-level attack), so the
  // vector is not copied as it grows; pages not written stay unused
  struct stat st {};
  if (f != stdin && ::fstat(::fileno(f), &st) == 0 && S_ISREG(st.st_mode))
    all.ids.reserve(static_cast<std::size_t>(st.st_size) / 2 + 1024);
  std::string text; // the lines not tokenized yet
  std::vector<char> buf(block);
  bool any = false;
  for (;;) {
    const std::size_t got = std::fread(buf.data(), 1, buf.size(), f);
    if (got == 0 && std::ferror(f)) throw Error(fmt::format("{}: read error", source));
    any = any || got > 0;
    text.append(buf.data(), got);
    const bool end = got == 0;
    // whole lines only, until the end
    const std::size_t cut = end ? text.size() : (text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    if (cut > 0) {
      const Rows part = encode_all(tok, split_sequences(std::string_view(text).substr(0, cut), true), add_special,
                                   source, threads, all.size());
      const std::int64_t base = static_cast<std::int64_t>(all.ids.size());
      all.ids.insert(all.ids.end(), part.ids.begin(), part.ids.end());
      for (std::int64_t i = 1; i < static_cast<std::int64_t>(part.offsets.size()); ++i)
        all.offsets.push_back(base + part.offsets[i]);
      text.erase(0, cut);
    }
    if (end) break;
  }
  if (!any) throw Error(fmt::format("{}: no text to tokenize (the input is empty)", source));
  return all;
}

void write_token_file(h5::OutputFile& out, const Tokenizer& tok, const Rows& rows, bool with_pieces) {
  const std::int64_t b = rows.size(), n = rows.longest();
  TensorI lengths(Shape{b});
  for (std::int64_t i = 0; i < b; ++i) lengths.data()[i] = rows.length(i);
  // ids and pieces a tile row at a time, each as wide as its longest row (rounded up to whole
  // tiles): the tiles past it are all padding, never written (they read as the pad id, or empty)
  h5::DatasetWriter ids = out.create_padded("ids", Shape{b, n}, tok.pad_id());
  out.write("lengths", lengths, h5::OutType::I64);
  std::optional<h5::StringsWriter> pieces;
  if (with_pieces) pieces = out.create_strings("pieces", Shape{b, n});
  const std::int64_t R = h5::OutputFile::kTileRows, C = h5::OutputFile::kTileCols;
  std::vector<std::int64_t> id_rows;
  std::vector<std::string_view> piece_rows;
  for (std::int64_t first = 0; first < b; first += R) {
    const std::int64_t count = std::min(R, b - first);
    std::int64_t longest = 0;
    for (std::int64_t i = 0; i < count; ++i) longest = std::max<std::int64_t>(longest, lengths.data()[first + i]);
    const std::int64_t cols = std::min(n, (longest + C - 1) / C * C);
    if (cols == 0) continue;
    id_rows.assign(static_cast<std::size_t>(count * cols), tok.pad_id());
    if (pieces) piece_rows.assign(static_cast<std::size_t>(count * cols), std::string_view());
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int32_t* r = rows.row(first + i);
      for (std::int64_t j = 0; j < rows.length(first + i); ++j) {
        id_rows[i * cols + j] = r[j];
        if (pieces) piece_rows[i * cols + j] = tok.token(r[j]).value_or("");
      }
    }
    ids.write_region(first, count, cols, id_rows.data());
    if (pieces) pieces->write_region(first, count, cols, piece_rows);
  }
  if (pieces) out.set_attribute("pieces", "byte_level", std::int64_t{tok.byte_level() ? 1 : 0}); // how to show them
}

std::vector<char> token_file_image(const Tokenizer& tok, const Rows& rows) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/attn-text-XXXXXX";
  if (!::mkdtemp(dir.data())) throw Error(fmt::format("{}: cannot create a temporary directory", dir));
  const std::string path = dir + "/tokens.h5";
  std::vector<char> image;
  try {
    {
      h5::OutputFile out(h5::TensorRef{path, ""}, "ids", h5::Provenance{});
      write_token_file(out, tok, rows);
      out.commit();
    }
    std::ifstream in(path, std::ios::binary);
    image.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
  std::filesystem::remove_all(dir);
  return image;
}

std::string choose_tokenizer(const std::string& tokenizer, const std::string& weights) {
  if (!tokenizer.empty()) return tokenizer;
  if (weights.empty()) return "";
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string path = weights;
  if (!fs::exists(path, ec)) path = h5::parse_tensor_ref(weights).path; // DIR:PREFIX
  if (!hf::is_model_path(path)) return "";
  const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path file = (dir.empty() ? fs::path(".") : dir) / "tokenizer.json";
  return fs::exists(file, ec) ? file.string() : "";
}

TokenRows read_token_rows(const h5::Dataset& ids_ds, const h5::Dataset* lengths_ds, const Tokenizer& tok) {
  ids_ds.require_rank(1, 2, "(b, n) or (n,) token ids");
  const TensorI ids = ids_ds.read_ints();
  TokenRows out;
  out.batched = ids_ds.rank() == 2;
  const std::int64_t b = out.batched ? ids.shape()[0] : 1, n = ids.shape().back();
  std::vector<std::int64_t> len(static_cast<std::size_t>(b), n);
  if (lengths_ds) {
    lengths_ds->require_rank(1, 1, "(b,) lengths");
    const TensorI l = lengths_ds->read_ints();
    if (l.shape()[0] != b)
      throw Error(
          fmt::format("{}: {} lengths for {} rows of {}", lengths_ds->label(), l.shape()[0], b, ids_ds.label()));
    for (std::int64_t i = 0; i < b; ++i) {
      if (l.data()[i] < 0 || l.data()[i] > n)
        throw Error(fmt::format("{}: length {} of row {} is outside [0, {}]", lengths_ds->label(), l.data()[i], i, n));
      len[i] = l.data()[i];
    }
  }
  out.rows.resize(static_cast<std::size_t>(b));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < len[i]; ++j) {
      const std::int64_t id = ids.data()[i * n + j];
      if (!tok.has_id(id))
        throw Error(fmt::format("{}: id {} (row {}, position {}) is not in the vocabulary of {}", ids_ds.label(), id, i,
                                j, tok.label()));
      out.rows[i].push_back(id);
    }
  return out;
}

} // namespace attn::text
