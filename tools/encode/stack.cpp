// encode's stack: --init's flags, checked, and the shape they describe; or the --weights file's.
#include "encode.hpp"

#include "attn/core/error.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/layouts/vit_layout.hpp"
#include "attn/weights/models.hpp"

#include <string>
#include <vector>

namespace encode {

void check_flags(const Options& o, const attn::cli::Tool& tool) {
  o.probe.check();
  if (!o.text.empty()) {
    tool.forbid("--text", {"--input", "--tokens", "--lengths", "--key-padding-mask", "--attention-mask",
                           "--token-types", "--init"});
  } else {
    tool.forbid("encode without --text", {"--tokenizer"});
    if (o.input.empty() + o.tokens.empty() + o.pixels.empty() + o.images.empty() != 3)
      throw attn::UsageError("give exactly one of -i, --tokens, --text, --pixels and --image");
  }
  if (o.weights.empty() == o.init.empty()) throw attn::UsageError("give exactly one of --weights and --init");
  for (const char* images : {"--pixels", "--image"})
    if (tool.given(images))
      tool.forbid(images, {"--init", "--lengths", "--key-padding-mask", "--attention-mask", "--token-types", "--causal",
                           "--no-pad-mask"});
  if (o.images.empty()) tool.forbid("encode without --image", {"--image-processor"});
  if (!o.tokens.empty() && !o.init.empty())
    throw attn::UsageError("--tokens needs --weights with token embeddings (src_embed), not --init");
  const std::vector<std::string> init_flags{
      "--layers",     "--embed-dim", "--heads",          "--ffn-dim",           "--norm-first", "--final-norm",
      "--activation", "--norm",      "--seed",           "--kv-heads",          "--rope",       "--rope-base",
      "--rotary-dim", "--alibi",     "--sliding-window", "--parallel-residual", "--ffn-conv"};
  if (!o.weights.empty()) tool.forbid("--weights", init_flags);
  if (!o.init.empty()) {
    tool.require("--init", {"--layers", "--embed-dim", "--heads", "--ffn-dim"});
    if (o.embed_dim % o.heads != 0)
      throw attn::UsageError(fmt::format("--embed-dim {} is not divisible by --heads {}", o.embed_dim, o.heads));
    if (o.kv_heads && o.heads % o.kv_heads != 0)
      throw attn::UsageError(fmt::format("--kv-heads {} does not divide --heads {}", o.kv_heads, o.heads));
    if (!o.rope.empty() && o.alibi) throw attn::UsageError("--rope and --alibi are two kinds of positions: give one");
    if (o.parallel_residual && !o.norm_first) throw attn::UsageError("--parallel-residual needs --norm-first");
    if (o.rope.empty()) tool.forbid("--init without --rope", {"--rope-base", "--rotary-dim"});
    const std::int64_t dh = o.embed_dim / o.heads, rot = o.rotary_dim ? o.rotary_dim : dh;
    if (!o.rope.empty() && (rot % 2 != 0 || rot > dh))
      throw attn::UsageError(fmt::format("RoPE turns pairs of the head's {} elements: {} must be even and at most {}",
                                         dh, o.rotary_dim ? "--rotary-dim" : "the head size", dh));
  }
}

attn::EncoderShape init_shape(const Options& o) {
  attn::EncoderShape shape;
  shape.layers = o.layers, shape.embed_dim = o.embed_dim, shape.heads = o.heads, shape.ffn_dim = o.ffn_dim;
  shape.norm_first = o.norm_first, shape.final_norm = o.final_norm;
  shape.activation = attn::parse_activation(o.activation), shape.norm = attn::parse_norm_kind(o.norm);
  shape.kv_heads = o.kv_heads, shape.sliding_window = o.sliding_window, shape.parallel_residual = o.parallel_residual;
  shape.ffn_conv = o.ffn_conv;
  if (!o.rope.empty()) {
    shape.positions = attn::LayerPositions::Rope;
    shape.rope = {attn::parse_rope_style(o.rope), o.rope_base, o.rotary_dim, {}};
  } else if (o.alibi) {
    shape.positions = attn::LayerPositions::Alibi;
  }
  return shape;
}

Stack open_stack(const Options& o, attn::cli::Tool& tool, const std::optional<attn::h5::TensorRef>& weights_ref) {
  Stack st;
  if (weights_ref) {
    attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), *weights_ref);
    if (attn::is_vit(g)) {
      attn::VisionModel vm = attn::load_vit(g);
      attn::check_all_weights_used(g, {}, tool.ignore_unknown_weights());
      if (o.pixels.empty() && o.images.empty())
        throw attn::UsageError(
            fmt::format("{} is a Vision Transformer: give its images with --pixels or --image", weights_ref->str()));
      st.enc = std::move(vm.enc), st.patches = std::move(vm.patches), st.head = std::move(vm.head);
      st.e_source = "the hidden size of " + st.patches->label;
      st.model = std::move(g);
      return st;
    }
    if (!o.pixels.empty() || !o.images.empty())
      throw attn::UsageError(fmt::format("{} needs a Vision Transformer's weights; {} is not one (no "
                                         "embeddings.patch_embeddings.projection.weight)",
                                         o.pixels.empty() ? "--image" : "--pixels", weights_ref->str()));
    attn::EncoderModel em = attn::load_encoder_model(std::move(g), tool.ignore_unknown_weights());
    st.model = std::move(em.group), st.enc = std::move(em.enc), st.embed = std::move(em.embed);
    st.e_source = em.e_source;
  } else {
    st.enc = attn::init_encoder(init_shape(o), tool.seed());
  }
  return st;
}

} // namespace encode
