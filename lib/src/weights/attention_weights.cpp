// Reading the other attention forms' parameters (weights/attention_weights.hpp).
#include "attn/weights/attention_weights.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>

namespace attn {

ScoreParams load_score_params(const WeightGroup& g, ScoreKind kind, std::int64_t d_q, std::int64_t d_k,
                              std::int64_t m) {
  ScoreParams p;
  const std::string why = fmt::format("d_q = {}, d_k = {}", d_q, d_k);
  if (kind == ScoreKind::General) p.W = g.read("W", {d_q, d_k}, why);
  if (kind == ScoreKind::Location) p.W_a = g.read("W_a", {m, d_q}, fmt::format("m = {} keys, d_q = {}", m, d_q));
  if (kind == ScoreKind::Additive) {
    if (!g.has("v")) throw Error(fmt::format("{} (a vector (hidden,))", g.missing("v")));
    const Shape vs = g.shape("v");
    if (vs.size() != 1)
      throw Error(fmt::format("{}: expected a vector (hidden,), got shape {}", g.label("v"), shape_str(vs)));
    const std::int64_t hid = vs[0];
    const std::string why_h = fmt::format("hidden = {}, {}", hid, why);
    p.v = g.read("v", {hid});
    p.W_q = g.read("W_q", {hid, d_q}, why_h);
    p.W_k = g.read("W_k", {hid, d_k}, why_h);
  }
  return p;
}

namespace {

// The shape of 2-D dataset `name` of g, or an Error naming it and what was expected.
Shape matrix_shape(const WeightGroup& g, const char* name, std::string_view expect) {
  if (!g.has(name)) throw Error(fmt::format("{} (a matrix {})", g.missing(name), expect));
  const Shape s = g.shape(name);
  if (s.size() != 2)
    throw Error(fmt::format("{}: expected a matrix {}, got shape {}", g.label(name), expect, shape_str(s)));
  return s;
}

} // namespace

Tensor load_favor_features(const WeightGroup& g, std::int64_t d, std::string_view d_from) {
  const Shape s = matrix_shape(g, "features", "(M, d)");
  return g.read("features", {s[0], d}, fmt::format("M = {} rows, d = {} {}", s[0], d, d_from));
}

LinformerProjections load_linformer(const WeightGroup& g, std::int64_t m) {
  const Shape s = matrix_shape(g, "E", "(k, m)");
  const bool own = m < 0;
  if (own) m = s[1];
  const std::string why =
      own ? fmt::format("the shape of {}", g.label("E")) : fmt::format("k = {}, m = {} keys", s[0], m);
  LinformerProjections p;
  p.E = g.read("E", {s[0], m}, why);
  p.F = g.read("F", {s[0], m}, why);
  if (s[0] > m)
    throw Error(
        fmt::format("{}: projects the {} keys onto k = {} > m rows; Linformer needs k <= m", g.label("E"), m, s[0]));
  return p;
}

LocationAwareParams load_location_aware(const WeightGroup& g, std::int64_t d_q, std::int64_t d_k) {
  const auto shape_of = [&](const char* name, std::size_t rank, const char* expect) {
    if (!g.has(name)) throw Error(fmt::format("{} ({})", g.missing(name), expect));
    const Shape s = g.shape(name);
    if (s.size() != rank)
      throw Error(fmt::format("{}: expected {}, got shape {}", g.label(name), expect, shape_str(s)));
    return s;
  };
  const std::int64_t h = shape_of("v", 1, "a vector (hidden,)")[0];
  const Shape fs = shape_of("F", 2, "a matrix (filters, width)");
  const std::int64_t K = fs[0], r = fs[1];
  if (r % 2 == 0)
    throw Error(
        fmt::format("{}: the filter width {} must be odd (a window centred on each position)", g.label("F"), r));
  const std::string why = fmt::format("hidden = {} from v, filters = {} from F, d_q = {}, d_k = {}", h, K, d_q, d_k);
  LocationAwareParams p;
  p.v = g.read("v", {h});
  p.F = g.read("F", {K, r});
  p.W_q = g.read("W_q", {h, d_q}, why);
  p.W_k = g.read("W_k", {h, d_k}, why);
  p.U = g.read("U", {h, K}, why);
  p.b = g.read("b", {h}, why);
  return p;
}

void save_score_params(const WeightWriter& w, ScoreKind kind, const ScoreParams& p) {
  if (kind == ScoreKind::General) w.write("W", p.W);
  if (kind == ScoreKind::Location) w.write("W_a", p.W_a);
  if (kind == ScoreKind::Additive) {
    w.write("W_q", p.W_q);
    w.write("W_k", p.W_k);
    w.write("v", p.v);
  }
}

void save_favor_features(const WeightWriter& w, const Tensor& features) { w.write("features", features); }

void save_linformer(const WeightWriter& w, const LinformerProjections& p) {
  w.write("E", p.E);
  w.write("F", p.F);
}

void save_location_aware(const WeightWriter& w, const LocationAwareParams& p) {
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"W_q", &p.W_q},
                                {"W_k", &p.W_k},
                                {"v", &p.v},
                                {"U", &p.U},
                                {"F", &p.F},
                                {"b", &p.b}})
    w.write(name, *t);
}

const char* score_params_primary(ScoreKind kind) {
  return kind == ScoreKind::General ? "W" : kind == ScoreKind::Location ? "W_a" : "W_q";
}

} // namespace attn
