// A probed run's flags, checks, source files and /activations outputs (probe_run.hpp).
#include "attn/inputs/probe_run.hpp"

#include "attn/core/error.hpp"
#include "attn/model/lens.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>

namespace attn {

namespace {

std::int64_t parse_index(std::string_view s, const std::string& flag, const std::string& spec) {
  std::int64_t v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0)
    throw UsageError(fmt::format("{} '{}': '{}' is not an index (0, 1, ...)", flag, spec, s));
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

// "NAME@L=FILE[:DATASET]"
struct Spec {
  Act act;
  std::int64_t layer;
  std::string source; // FILE[:DATASET] as given
};

Spec parse_spec(const std::string& spec, const std::string& flag) {
  const std::size_t at = spec.find('@'), eq = spec.find('=');
  if (at == std::string::npos || eq == std::string::npos || eq < at || eq + 1 == spec.size())
    throw UsageError(fmt::format("{} '{}': expected NAME@LAYER=FILE[:DATASET]", flag, spec));
  const Act a = parse_act(std::string_view(spec).substr(0, at));
  if (a == Act::Final) throw UsageError(fmt::format("{} '{}': final is written, not changed", flag, spec));
  return {a, parse_index(std::string_view(spec).substr(at + 1, eq - at - 1), flag, spec), spec.substr(eq + 1)};
}

// "L.H,L.H" -> (layer, head) pairs.
std::vector<std::pair<std::int64_t, std::int64_t>> parse_heads(const std::string& spec, const std::string& flag) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::string_view item : split(spec, ',')) {
    const std::size_t dot = item.find('.');
    if (dot == std::string_view::npos)
      throw UsageError(fmt::format("{} '{}': expected LAYER.HEAD, as 0.3, not '{}'", flag, spec, item));
    out.emplace_back(parse_index(item.substr(0, dot), flag, spec), parse_index(item.substr(dot + 1), flag, spec));
  }
  return out;
}

// The names of --emit-activations, each once, in the order given.
std::vector<Act> emitted_names(const std::vector<std::string>& emit) {
  std::vector<Act> out;
  for (const std::string& e : emit)
    for (std::string_view name : split(e, ','))
      if (const Act a = parse_act(name); std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  return out;
}

// A source FILE[:DATASET], its dataset defaulting to `fallback`.
h5::TensorRef source_ref(const std::string& arg, const std::string& fallback) {
  h5::TensorRef ref = h5::parse_tensor_ref(arg);
  if (ref.name.empty()) ref.name = fallback;
  return ref;
}

std::string activation_path(std::size_t layer, Act a) {
  return a == Act::Final ? "activations/final" : fmt::format("activations/layer{}/{}", layer, act_name(a));
}

// --ablate-with's mean (H, dh) of layer l's z in `ds`: an (H, dh) dataset as it is, or a (b, H, n,
// dh) one averaged over items and valid positions (those where some head's z is not 0: padded ones
// are written 0).
Tensor z_mean(const h5::Dataset& ds, const MhaShape& sh, std::size_t l, bool allow_nonfinite) {
  Tensor z = ds.read_floats<float>(allow_nonfinite);
  const std::int64_t H = sh.heads, dh = sh.head_dim();
  const Shape& zs = z.shape();
  if (zs == Shape{H, dh}) return z;
  if (!(zs.size() == 4 && zs[1] == H && zs[3] == dh))
    throw Error(fmt::format("{}: shape {} is not z's (b, {}, n, {}) or its mean ({}, {}) (--ablate-with, layer {})",
                            ds.label(), shape_str(zs), H, dh, H, dh, l));
  const std::int64_t B = zs[0], N = zs[2];
  const auto row = [&](std::int64_t b, std::int64_t h, std::int64_t i) {
    return z.data() + ((b * H + h) * N + i) * dh;
  };
  std::vector<double> sum(static_cast<std::size_t>(H * dh), 0.0);
  std::int64_t valid = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < N; ++i) {
      bool any = false;
      for (std::int64_t h = 0; h < H && !any; ++h)
        any = std::any_of(row(b, h, i), row(b, h, i) + dh, [](float x) { return x != 0.0f; });
      if (!any) continue;
      ++valid;
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t c = 0; c < dh; ++c) sum[static_cast<std::size_t>(h * dh + c)] += row(b, h, i)[c];
    }
  if (!valid) throw Error(fmt::format("{}: every position is 0: no mean to ablate with", ds.label()));
  Tensor m(Shape{H, dh});
  for (std::int64_t j = 0; j < H * dh; ++j)
    m.data()[j] = static_cast<float>(sum[static_cast<std::size_t>(j)] / static_cast<double>(valid));
  return m;
}

} // namespace

std::vector<std::int64_t> parse_index_list(const std::string& spec, const std::string& flag) {
  std::vector<std::int64_t> out;
  for (std::string_view item : split(spec, ',')) {
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      out.push_back(parse_index(item, flag, spec));
      continue;
    }
    const std::int64_t lo = parse_index(item.substr(0, dash), flag, spec),
                       hi = parse_index(item.substr(dash + 1), flag, spec);
    if (hi < lo) throw UsageError(fmt::format("{} '{}': the range {} runs backwards", flag, spec, item));
    for (std::int64_t i = lo; i <= hi; ++i) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void ProbeFlags::check() const {
  (void)emitted_names(emit);
  if (!emit_layers.empty()) {
    if (emit.empty()) throw UsageError("--emit-layers needs --emit-activations");
    (void)parse_index_list(emit_layers, "--emit-layers");
  }
  if (!ablate_heads.empty()) (void)parse_heads(ablate_heads, "--ablate-heads");
  if (!ablate_cross_heads.empty()) (void)parse_heads(ablate_cross_heads, "--ablate-cross-heads");
  if (!ablate_with.empty()) {
    if (ablate_heads.empty() && ablate_cross_heads.empty())
      throw UsageError("--ablate-with needs --ablate-heads or --ablate-cross-heads");
    if (ablate_with.rfind("mean:", 0) != 0 || ablate_with.size() == 5)
      throw UsageError(fmt::format("--ablate-with '{}': expected mean:FILE[:DATASET]", ablate_with));
  }
  for (const std::string& p : patch) (void)parse_spec(p, "--patch");
  if (patch.empty() && (!patch_positions.empty() || !patch_heads.empty()))
    throw UsageError("--patch-positions and --patch-heads need --patch");
  if (!patch_positions.empty()) (void)parse_index_list(patch_positions, "--patch-positions");
  if (!patch_heads.empty()) (void)parse_index_list(patch_heads, "--patch-heads");
  for (const std::string& s : steer) {
    const Spec sp = parse_spec(s, "--steer");
    if (!steerable(sp.act))
      throw UsageError(fmt::format("--steer '{}': {} cannot be steered (a direction is added to resid_pre, "
                                   "resid_mid, resid_post, attn_out or mlp_out, and their cross_ forms)",
                                   s, act_name(sp.act)));
  }
}

std::vector<std::string> ProbeFlags::input_args() const {
  std::vector<std::string> out;
  if (!ablate_with.empty()) out.push_back(ablate_with.substr(5));
  for (const std::string& p : patch) out.push_back(parse_spec(p, "--patch").source);
  for (const std::string& s : steer) out.push_back(parse_spec(s, "--steer").source);
  return out;
}

// --- the model -------------------------------------------------------------------------------------

namespace {
template <class Layer> ProbeModel::Layer attention_of(const Layer& l) {
  ProbeModel::Layer p;
  p.self = l.self_attn.shape;
  p.self_extra = l.self_attn.extra_keys();
  p.self_linear = l.self_attn.linear.has_value();
  p.ffn = l.ffn.w1.dim(0);
  return p;
}
} // namespace

ProbeModel probe_model(const Encoder& enc, const std::string& label) {
  ProbeModel m;
  m.label = label, m.E = enc.embed_dim(), m.parallel_residual = enc.opt.parallel_residual;
  for (const EncoderLayer& l : enc.layers) m.layers.push_back(attention_of(l));
  return m;
}

ProbeModel probe_model(const Decoder& dec, const std::string& label) {
  ProbeModel m;
  m.label = label, m.E = dec.embed_dim(), m.parallel_residual = dec.opt.parallel_residual, m.has_cross = dec.has_cross;
  for (const DecoderLayer& l : dec.layers) {
    ProbeModel::Layer p = attention_of(l);
    if (dec.has_cross) {
      p.cross = l.cross_attn.shape;
      p.cross_extra = l.cross_attn.extra_keys();
      p.cross_linear = l.cross_attn.linear.has_value();
    }
    m.layers.push_back(p);
  }
  return m;
}

// --- the run ---------------------------------------------------------------------------------------

Shape ProbeRun::shape(std::size_t layer, Act a) const {
  if (a == Act::Final) return {b_, n_, model_.E};
  const ProbeModel::Layer& l = model_.layers[layer];
  const bool cross = is_cross(a);
  const MhaShape& sh = cross ? l.cross : l.self;
  const std::int64_t keys = cross ? s_ : n_, extra = cross ? l.cross_extra : l.self_extra;
  switch (self_form(a)) {
  case Act::Q:
  case Act::Z: return {b_, sh.heads, n_, sh.head_dim()};
  case Act::K:
  case Act::V: return {b_, sh.kv_heads, keys, sh.head_dim()};
  case Act::Scores:
  case Act::Pattern: return {b_, sh.heads, n_, keys + extra};
  case Act::MlpHidden: return {b_, n_, l.ffn};
  default: return {b_, n_, model_.E};
  }
}

std::size_t ProbeRun::check_layer(std::int64_t layer, const std::string& flag) const {
  const std::int64_t L = static_cast<std::int64_t>(model_.layers.size());
  if (layer >= L)
    throw Error(
        fmt::format("{}: layer {} is beyond the model ({}: {} layers, 0 to {})", flag, layer, model_.label, L, L - 1));
  return static_cast<std::size_t>(layer);
}

void ProbeRun::check_meaning(std::size_t layer, Act a, const std::string& flag) const {
  if (is_cross(a) && !model_.has_cross)
    throw Error(
        fmt::format("{}: {} has no meaning for {}: the model has no cross-attention", flag, act_name(a), model_.label));
  if (a == Act::ResidMid && model_.parallel_residual)
    throw Error(fmt::format("{}: resid_mid has no meaning for {}: its layers add attention and feed-forward to the "
                            "same input (parallel_residual)",
                            flag, model_.label));
  if (a == Act::Final) return;
  const ProbeModel::Layer& l = model_.layers[layer];
  const bool linear = is_cross(a) ? l.cross_linear : l.self_linear;
  if (linear && self_form(a) == Act::Scores)
    throw Error(fmt::format("{}: {} has no meaning for layer {} of {}: its attention is a linear form, with no "
                            "score matrix",
                            flag, act_name(a), layer, model_.label));
}

ProbeRun::ProbeRun(const ProbeFlags& flags, const ProbeModel& model, h5::InputFiles& inputs, std::int64_t b,
                   std::int64_t n, std::int64_t s, bool batched, bool allow_nonfinite)
    : model_(model), b_(b), n_(n), s_(s), batched_(batched) {
  flags.check();
  add_emits(flags);
  add_ablations(flags, inputs, allow_nonfinite);
  add_patches(flags, inputs, allow_nonfinite);
  add_steers(flags, inputs, allow_nonfinite);
  changes_ =
      !flags.ablate_heads.empty() || !flags.ablate_cross_heads.empty() || !flags.patch.empty() || !flags.steer.empty();
  probe_.set_sink([this](std::size_t layer, Act a, const Tensor& values) {
    if (auto it = writers_.find({layer, static_cast<int>(a)}); it != writers_.end()) {
      const auto start = std::chrono::steady_clock::now();
      it->second.write_items(b0_, values.dim(0), values.data());
      write_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (observer_ && std::find(observed_.begin(), observed_.end(), std::make_pair(layer, a)) != observed_.end())
      observer_(layer, a, values);
  });
}

void ProbeRun::add_emits(const ProbeFlags& flags) {
  const std::vector<Act> names = emitted_names(flags.emit);
  std::vector<std::int64_t> layers =
      flags.emit_layers.empty() ? std::vector<std::int64_t>{} : parse_index_list(flags.emit_layers, "--emit-layers");
  if (flags.emit_layers.empty())
    for (std::size_t l = 0; l < model_.layers.size(); ++l) layers.push_back(static_cast<std::int64_t>(l));
  for (std::int64_t l : layers) check_layer(l, "--emit-layers");
  for (Act a : names) {
    if (a == Act::Final) {
      emitted_.emplace_back(Probe::final_layer, a);
      continue;
    }
    for (std::int64_t l : layers) {
      check_meaning(static_cast<std::size_t>(l), a, "--emit-activations");
      emitted_.emplace_back(static_cast<std::size_t>(l), a);
    }
  }
  for (const auto& [l, a] : emitted_) probe_.capture(l, a);
}

void ProbeRun::add_ablations(const ProbeFlags& flags, h5::InputFiles& inputs, bool allow_nonfinite) {
  for (const bool cross : {false, true}) {
    const std::string& spec = cross ? flags.ablate_cross_heads : flags.ablate_heads;
    if (spec.empty()) continue;
    const std::string flag = cross ? "--ablate-cross-heads" : "--ablate-heads";
    for (const auto& [layer, head] : parse_heads(spec, flag)) {
      const std::size_t l = check_layer(layer, flag);
      check_meaning(l, cross ? Act::CrossZ : Act::Z, flag);
      const MhaShape& sh = cross ? model_.layers[l].cross : model_.layers[l].self;
      if (head >= sh.heads)
        throw Error(fmt::format("{}: head {} of layer {} is beyond the model ({}: {} heads, 0 to {})", flag, head, l,
                                model_.label, sh.heads, sh.heads - 1));
      const Tensor* mean = nullptr;
      if (!flags.ablate_with.empty()) {
        auto [it, fresh] = means_.try_emplace({l, cross});
        if (fresh)
          it->second = z_mean(
              inputs.open(source_ref(flags.ablate_with.substr(5), activation_path(l, cross ? Act::CrossZ : Act::Z))),
              sh, l, allow_nonfinite);
        mean = &it->second;
      }
      probe_.ablate(l, cross, head, mean);
    }
  }
}

void ProbeRun::add_patches(const ProbeFlags& flags, h5::InputFiles& inputs, bool allow_nonfinite) {
  std::vector<std::int64_t> positions, heads;
  if (!flags.patch_positions.empty()) positions = parse_index_list(flags.patch_positions, "--patch-positions");
  if (!flags.patch_heads.empty()) heads = parse_index_list(flags.patch_heads, "--patch-heads");
  for (const std::string& text : flags.patch) {
    const Spec sp = parse_spec(text, "--patch");
    const std::size_t l = check_layer(sp.layer, "--patch");
    check_meaning(l, sp.act, "--patch");
    const ProbeModel::Layer& layer = model_.layers[l];
    if (self_form(sp.act) == Act::Pattern && (is_cross(sp.act) ? layer.cross_linear : layer.self_linear))
      throw Error(fmt::format("--patch '{}': layer {} of {} has a linear attention form, whose weights are not "
                              "computed before its output",
                              text, l, model_.label));
    const Shape full = shape(l, sp.act);
    const Shape item(full.begin() + 1, full.end());
    const std::int64_t rows = per_head(sp.act) ? full[2] : full[1];
    for (std::int64_t p : positions)
      if (n_ && p >= rows)
        throw Error(fmt::format("--patch-positions: position {} is beyond {} of layer {} ({} positions)", p,
                                act_name(sp.act), l, rows));
    if (per_head(sp.act))
      for (std::int64_t h : heads)
        if (h >= full[1])
          throw Error(fmt::format("--patch-heads: head {} is beyond {} of layer {} ({} heads)", h, act_name(sp.act), l,
                                  full[1]));
    const h5::TensorRef ref = source_ref(sp.source, activation_path(l, sp.act));
    const h5::Dataset ds = inputs.open(ref);
    Tensor src = ds.read_floats<float>(allow_nonfinite);
    const bool batched = same_shape(src.shape(), full, sp.act);
    if (!batched && !same_shape(src.shape(), item, sp.act))
      throw Error(fmt::format("{}: shape {} differs from {} of layer {}: expected {} or {} (--patch)", ds.label(),
                              shape_str(src.shape()), act_name(sp.act), l, shape_str(full), shape_str(item)));
    probe_.patch(l, sp.act, std::move(src), batched);
  }
  probe_.patch_positions = positions, probe_.patch_heads = heads;
}

void ProbeRun::add_steers(const ProbeFlags& flags, h5::InputFiles& inputs, bool allow_nonfinite) {
  for (const std::string& text : flags.steer) {
    const Spec sp = parse_spec(text, "--steer");
    const std::size_t l = check_layer(sp.layer, "--steer");
    check_meaning(l, sp.act, "--steer");
    const std::int64_t E = model_.E;
    const h5::TensorRef ref = source_ref(sp.source, activation_path(l, sp.act));
    const h5::Dataset ds = inputs.open(ref);
    Tensor src = ds.read_floats<float>(allow_nonfinite);
    const Shape& sh = src.shape();
    const std::int64_t n = n_ ? n_ : sh.size() > 1 ? sh[sh.size() - 2] : 0; // generation: any length
    if (!(sh == Shape{E} || sh == Shape{n, E} || sh == Shape{b_, n, E}))
      throw Error(fmt::format("{}: shape {} is not a direction for {} of layer {}: expected ({},), ({}, {}) or "
                              "({}, {}, {}) (--steer)",
                              ds.label(), shape_str(sh), act_name(sp.act), l, E, n_ ? fmt::format("{}", n_) : "n", E,
                              b_, n_ ? fmt::format("{}", n_) : "n", E));
    probe_.steer(l, sp.act, std::move(src), flags.steer_scale);
  }
}

void ProbeRun::create_outputs(h5::OutputFile& out, h5::OutType type) {
  for (const auto& [l, a] : emitted_)
    writers_.emplace(std::make_pair(l, static_cast<int>(a)),
                     out.create_items(activation_path(l, a), shape(l, a), type, batched_));
}

const Probe* ProbeRun::chunk(std::int64_t b0, std::int64_t rows_per_item, bool capturing) {
  b0_ = b0;
  probe_.first_item = b0, probe_.rows_per_item = rows_per_item, probe_.capturing = capturing;
  return active() ? &probe_ : nullptr;
}

bool ProbeRun::same_shape(const Shape& got, const Shape& want, Act a) const {
  if (got.size() != want.size()) return false;
  if (n_) return got == want;
  // generation: the position axes (queries; keys of self-attention) may have any length
  const std::size_t r = want.size();
  const bool heads = per_head(a), self_keys = !is_cross(a) && (self_form(a) == Act::K || self_form(a) == Act::V),
             square = !is_cross(a) && (self_form(a) == Act::Scores || self_form(a) == Act::Pattern);
  for (std::size_t d = 0; d < r; ++d) {
    const bool position = heads ? (d == r - 2 && (!key_rows(a) || self_keys)) || (square && d == r - 1) : d == r - 2;
    if (!position && got[d] != want[d]) return false;
  }
  return true;
}

std::int64_t ProbeRun::chunk_items(std::int64_t items) const {
  constexpr std::int64_t budget = 4 << 20; // floats
  std::int64_t per_item = 0;
  for (const auto& [l, a] : emitted_)
    if (self_form(a) == Act::Scores || self_form(a) == Act::Pattern) {
      const Shape sh = shape(l, a);
      per_item = std::max(per_item, sh[1] * sh[2] * sh[3]);
    }
  if (!per_item) return items;
  return std::clamp<std::int64_t>(budget / per_item, 1, items);
}

// --- the logit lens --------------------------------------------------------------------------------

LensRun::LensRun(ProbeRun& run, const Decoder& dec, const Generator& gen, std::int64_t K, const std::string& label)
    : run_(run), dec_(dec), gen_(gen), K_(K), L_(static_cast<std::int64_t>(dec.layers.size())) {
  if (K > gen.vocab())
    throw Error(fmt::format("--lens {}: more tokens than the vocabulary's {} ({})", K, gen.vocab(), label));
  run.observe(0, Act::ResidPre);
  for (std::int64_t l = 0; l < L_; ++l) run.observe(static_cast<std::size_t>(l), Act::ResidPost);
}

void LensRun::create_outputs(h5::OutputFile& out, h5::OutType type, std::int64_t b, std::int64_t n, bool batched) {
  ids_out_ = out.create_items("lens/ids", {b, L_ + 1, n, K_}, h5::OutType::I64, batched);
  logprobs_out_ = out.create_items("lens/logprobs", {b, L_ + 1, n, K_}, type, batched);
}

void LensRun::start_chunk(std::int64_t count, std::int64_t n, const Mask& padding) {
  count_ = count;
  ids_ = TensorI(Shape{count, L_ + 1, n, K_});
  logprobs_ = Tensor(Shape{count, L_ + 1, n, K_});
  run_.set_observer([this, n, &padding](std::size_t layer, Act a, const Tensor& resid) {
    const std::int64_t row = a == Act::ResidPre ? 0 : static_cast<std::int64_t>(layer) + 1;
    logit_lens(resid.data(), count_, n, dec_, gen_, K_, padding, {ids_.data(), logprobs_.data(), L_ + 1, row});
  });
}

void LensRun::finish_chunk(std::int64_t b0) {
  ids_out_->write_items(b0, count_, ids_.data());
  logprobs_out_->write_items(b0, count_, logprobs_.data());
}

void ProbeRun::observe(std::size_t layer, Act a) {
  observed_.emplace_back(layer, a);
  probe_.capture(layer, a);
}

} // namespace attn
