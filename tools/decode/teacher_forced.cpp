// decode's teacher-forced run: the target through the decoder in batch chunks, with the logits and
// the attention weights when asked.
#include "decode.hpp"

#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/inputs/stack_input.hpp"
#include "attn/model/generate.hpp"

namespace decode {

using attn::Shape;
using attn::Tensor;

const attn::Generator& lens_generator(const attn::DecoderModel& m) {
  if (!m.gen)
    throw attn::Error(
        fmt::format("--lens: {} has no generator (unembedding) to read the layers through", m.group.label("")));
  return *m.gen;
}

void teacher_forced(const Options& o, attn::cli::Tool& tool, const attn::h5::TensorRef& target_ref,
                    const attn::h5::SequenceReader* mem, const attn::MaskFiles& self_files,
                    const attn::MaskFiles& mem_files, attn::DecoderModel& m) {
  const attn::Decoder& dec = m.dec;
  const std::int64_t E = dec.embed_dim(), H = dec.heads(), s = mem ? mem->len() : 0;
  // The target: X (b, t, E), or token ids embedded by the model's tgt_embed.
  const attn::StackInput target =
      o.input.empty()
          ? attn::StackInput(tool.inputs().open(target_ref), "token ids (b, t) or (t,)", attn::target_embedding(m))
          : attn::StackInput({tool.inputs().open(target_ref), tool.allow_nonfinite(), "target"});
  if (target.features() != E)
    throw attn::Error(fmt::format("{}: feature size {} differs from the decoder's E = {} ({})", target.label(),
                                  target.features(), E, m.first_layer + "/self_attn"));
  const std::int64_t B = target.items(), t = target.len();
  const bool batched = target.batched();
  if (mem && mem->items() != B)
    throw attn::Error(fmt::format("{}: batch {} differs from the target's batch {}", mem->label(), mem->items(), B));
  attn::Mask self_mask = attn::load_mask(tool.inputs(), self_files, B, H, t, t);
  if (!o.no_pad_mask && o.lengths.empty() && o.key_padding.empty())
    if (const auto pad = attn::mask_pad_tokens(self_mask, target, m.group))
      tool.log("padding: target token ids equal to pad_id {} ({})", *pad, m.group.attr_label("pad_id"));
  attn::Mask mem_mask;
  mem_mask.n = t, mem_mask.m = s;
  if (mem) mem_mask = attn::load_mask(tool.inputs(), mem_files, B, H, t, s);

  std::optional<attn::ProbeRun> probe;
  if (o.probe.any() || o.lens)
    probe.emplace(o.probe, attn::probe_model(dec, m.group.label("")), tool.inputs(), B, t, s, batched,
                  tool.allow_nonfinite());
  std::optional<attn::LensRun> lens;
  if (o.lens) lens.emplace(*probe, dec, lens_generator(m), o.lens, m.group.label(""));

  auto file = tool.open_output("output");
  const attn::h5::OutType type = tool.out_type();
  if (probe) probe->create_outputs(*file, type);
  if (lens) lens->create_outputs(*file, type, B, t, batched);
  attn::h5::DatasetWriter out = file->create_items("output", {B, t, E}, type, batched);
  std::optional<attn::h5::DatasetWriter> logits_out;
  if (m.gen) logits_out = file->create_items("logits", {B, t, m.gen->vocab()}, type, batched);
  std::vector<attn::h5::DatasetWriter> self_w, cross_w;
  if (o.emit_weights)
    for (std::size_t l = 0; l < dec.layers.size(); ++l) {
      const attn::DecoderLayer& layer = dec.layers[l];
      self_w.push_back(file->create_items(fmt::format("weights/layer{}/self", l),
                                          {B, H, t, t + layer.self_attn.extra_keys()}, type, batched));
      if (dec.has_cross)
        cross_w.push_back(file->create_items(fmt::format("weights/layer{}/cross", l),
                                             {B, H, t, s + layer.cross_attn.extra_keys()}, type, batched));
    }

  std::int64_t chunk = attn::batch_chunk(std::max(t, s), o.chunk);
  if (probe && !o.chunk) chunk = probe->chunk_items(chunk);
  tool.log("decoder: {} layers, E={}, heads={}, F={}, {}; target b={} t={}, memory s={}; {} per chunk",
           dec.layers.size(), E, H, dec.ffn_dim(), dec.opt.norm_first ? "pre-norm" : "post-norm", B, t, s, chunk);
  const attn::mpi::Items mine = attn::mpi::items(B, chunk); // all of them without MPI
  const attn::cli::Stopwatch clock;
  double layers = 0; // the seconds in the layers, without reading, writing, the weights' writing and the logits
  attn::cli::for_each_chunk(tool, mine, chunk, [&](std::int64_t b0, std::int64_t n) {
    Tensor x = target.read(b0, n);
    const Tensor memory = mem ? mem->read(b0, n) : Tensor();
    const attn::Mask sm = attn::mask_items(self_mask, b0, n, 1, t), mm = attn::mask_items(mem_mask, b0, n, 1, t);
    attn::DecoderWeightsSink sink;
    if (o.emit_weights)
      sink = [&](std::size_t l, const Tensor& self, const Tensor& cross) {
        const attn::cli::Stopwatch writing;
        self_w[l].write_items(b0, n, self.data());
        if (dec.has_cross) cross_w[l].write_items(b0, n, cross.data());
        layers -= writing.seconds();
      };
    if (lens) lens->start_chunk(n, t, sm);
    const attn::cli::Stopwatch forward;
    const double written = probe ? probe->write_seconds() : 0; // the activations' writing is not the layers'
    attn::decoder_forward(dec, x.data(), n, t, mem ? memory.data() : nullptr, s, sm, mm, sink,
                          probe ? probe->chunk(b0) : nullptr);
    layers += forward.seconds() - (probe ? probe->write_seconds() - written : 0);
    if (lens) lens->finish_chunk(b0);
    out.write_items(b0, n, x.data());
    if (m.gen) {
      const std::int64_t V = m.gen->vocab();
      Tensor logits(Shape{n, t, V}, attn::Uninitialized{});
      attn::target_logits(logits.data(), x.data(), *m.gen, n, t, sm);
      logits_out->write_items(b0, n, logits.data());
    }
  });
  tool.log("decoder: {:.4f} s, {:.0f} target tokens/s (the layers; {:.4f} s with reading, writing{})", layers,
           layers > 0 ? static_cast<double>(mine.count() * t) / layers : 0.0, clock.seconds(),
           m.gen ? " and the logits" : "");
  file->commit();
}

} // namespace decode
