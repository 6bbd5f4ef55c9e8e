// Positional encodings (CONTRACT.md, pe-gen): sinusoidal (Vaswani et al. 2017), learned tables,
// rotary (Su et al., RoFormer; GPT-NeoX "rotate half" and GPT-J "interleaved" pairings) and ALiBi
// (Press et al. 2022). Angles and sums are computed in double and rounded once to the output type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// Vector sin/cos (glibc's libmvec, on CPUs with AVX2) are the default; false selects scalar sincos
// everywhere (the reference path, also taken on other CPUs). Not thread-safe; for tests and
// bisecting numerical differences.
void use_vector_math(bool on);

// --- sinusoidal --------------------------------------------------------------------------------

enum class PeLayout { Interleaved, Concat };
PeLayout parse_pe_layout(std::string_view s); // "interleaved" | "concat"

// row (d): PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)).
// Interleaved puts the pair at columns 2i, 2i+1; concat puts the ceil(d/2) sines first, then the
// floor(d/2) cosines. For odd d the last pair has only its sine.
void sinusoidal_row(double* row, double pos, std::int64_t d, double base, PeLayout layout);

// out (n, d) = PE(offset + p) for each row p, rounded once to T.
template <typename T>
void sinusoidal_table(T* out, std::int64_t n, std::int64_t d, double base, std::int64_t offset, PeLayout layout);

// x (b, n, d) += PE(offset + p) for each row p, in place; each sum is taken in double and rounded
// once to T.
template <typename T>
void add_sinusoidal(T* x, std::int64_t b, std::int64_t n, std::int64_t d, double base, std::int64_t offset,
                    PeLayout layout);

// --- learned -------------------------------------------------------------------------------------

// x (b, n, d) += table[offset + p] for each row p; table (rows, d), named `label` in messages.
// Throws Error when a position offset .. offset + n - 1 is outside the table.
template <typename T>
void add_learned(T* x, std::int64_t b, std::int64_t n, std::int64_t d, const T* table, std::int64_t rows,
                 std::int64_t offset, std::string_view label);

// --- rotary --------------------------------------------------------------------------------------

enum class RopeStyle { Half, Interleaved };
RopeStyle parse_rope_style(std::string_view s); // "half" | "interleaved"

// RoPE's frequency scaling, as Hugging Face's rope_scaling (rope_parameters) computes it
// (transformers' modeling_rope_utils; inv_freq(i) = base^(-2i/dh) unscaled):
//   linear   inv_freq / factor
//   dynamic  (NTK) past max_positions: base * (factor L / max_positions - (factor - 1))^(dh / (dh - 2)),
//            L = the call's last position + 1, which grows as a generation does (keys rotated
//            earlier keep their angles, as Hugging Face's cache keeps them)
//   llama3   wavelengths 2 pi / inv_freq past original_max_positions / low_freq_factor divided by
//            factor, below original_max_positions / high_freq_factor kept, smoothed in between
//   yarn     interpolation (inv_freq / factor) and extrapolation blended by a linear ramp between
//            the correction dimensions of beta_fast and beta_slow rotations in max_positions;
//            cos and sin times attention_factor (0.1 ln factor + 1 when the config has none)
enum class RopeScalingKind { None, Linear, Dynamic, Llama3, Yarn };
struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::None;
  double factor = 1.0;
  std::int64_t max_positions = 0;                       // dynamic, yarn: max_position_embeddings
  double low_freq_factor = 1.0, high_freq_factor = 4.0; // llama3
  std::int64_t original_max_positions = 8192;           // llama3
  double beta_fast = 32.0, beta_slow = 1.0;             // yarn
  double attention_factor = 1.0;                        // yarn: cos and sin scaled by it
};

// inv_freq (dh/2) of a call whose last position is seq_len - 1.
std::vector<double> rope_inv_freq(std::int64_t dh, double base, const RopeScaling& s, std::int64_t seq_len);

// cos, sin (n, dh/2): angle(p, i) = (offset + p) * base^(-2i/dh). dh must be even. With `scaling`,
// the scaled frequencies (for positions up to offset + n - 1) and yarn's attention factor.
void rope_tables(double* cos, double* sin, std::int64_t n, std::int64_t dh, double base, std::int64_t offset,
                 const RopeScaling& scaling = {});

// x (b, n, heads * dh) rotated in place, every head alike; row p stands at position offset + p.
//   half:        (x[i], x[i + dh/2]) -> (x[i] c - x[i + dh/2] s, x[i + dh/2] c + x[i] s)
//   interleaved: (x[2i], x[2i+1])    -> (x[2i] c - x[2i+1] s,    x[2i+1] c + x[2i] s)
// Rows are `ld` elements apart (0: heads * dh, contiguous), so a slice of a wider projection
// (the queries of a packed q|k|v) can be rotated where it lies. With `rot` (even, 0 < rot < dh)
// only the first rot elements of each head turn, as though the head were rot wide (partial rotary
// embeddings: GPT-J's rotary_dim, GPT-NeoX's rotary_pct); 0 means all dh.
template <typename T>
void apply_rope(T* x, std::int64_t b, std::int64_t n, std::int64_t heads, std::int64_t dh, RopeStyle style, double base,
                std::int64_t offset, std::int64_t ld = 0, std::int64_t rot = 0, const RopeScaling& scaling = {});

// --- ALiBi ---------------------------------------------------------------------------------------

// Head slopes by the ALiBi authors' get_slopes: 2^(-8h/H), h = 1..H, for a power of two H;
// otherwise the slopes for the largest power of two c below H, then the first H - c of the
// odd-numbered slopes for 2c. Same floating-point operations as the reference, in double.
std::vector<double> alibi_slopes(std::int64_t heads);

// bias (heads, n, m) = -slope_h * |p - j| with p = i + (m - n) (queries aligned to the end of the
// keys, CONTRACT.md section 2).
template <typename T> void alibi_bias(T* bias, std::int64_t heads, std::int64_t n, std::int64_t m);

// --- T5's relative attention bias -----------------------------------------------------------------

// The bucket rule of T5 (Raffel et al. 2020; transformers' T5Attention._relative_position_bucket)
// for relative position r = j - p (key minus query):
//   bidirectional: half the buckets for r > 0, counting |r|;  causal: only r <= 0, counting -r
//   within a half of nb buckets: distances below nb/2 exact, then logarithmic up to max_distance,
//   every distance past it in the last bucket:
//     nb/2 + trunc(log(d / (nb/2)) / log(max_distance / (nb/2)) * (nb - nb/2))
//   (the logarithm's terms in float32, as PyTorch evaluates them)
struct RelativeBuckets {
  std::int64_t buckets = 32;       // relative_attention_num_buckets
  std::int64_t max_distance = 128; // relative_attention_max_distance
  bool bidirectional = true;       // encoders; a decoder's self-attention: false
};
std::int64_t relative_bucket(std::int64_t relative, const RelativeBuckets& rule);
// Throws Error (naming `source`, the rule's origin) unless every distance has a bucket: at least 2
// buckets per direction and max_distance beyond the exact ones (nb/2 per direction).
void check_relative_buckets(const RelativeBuckets& rule, const std::string& source);

// The learned bias of each head over the buckets: score (i, j) of head h gets table[bucket(j - p)][h].
// Built once per stack: each head's value at every distance up to max_distance is looked up then
// (every farther key is in the side's last bucket), so no score computes a bucket.
class RelativeBias {
public:
  // table (buckets, heads): relative_attention_bias.weight. The rule is checked
  // (check_relative_buckets, naming `source`), the table's size against it.
  RelativeBias(const RelativeBuckets& rule, std::int64_t heads, std::vector<float> table, const std::string& source);
  const RelativeBuckets& rule() const { return rule_; }
  std::int64_t heads() const { return heads_; }
  const std::vector<float>& table() const { return table_; }
  // table[bucket(relative)][h]
  float term(std::int64_t h, std::int64_t relative) const {
    const std::int64_t d = rule_.max_distance, r = relative < -d ? -d : relative > d ? d : relative;
    return by_distance_[static_cast<std::size_t>(h * (2 * d + 1) + r + d)];
  }
  // s[c] += term(h, first + step c) for c < count, step +1 or -1: a row of scores over consecutive
  // keys (+1), or a key's scores over consecutive queries (-1: the fused kernel's transposed tiles).
  void add_run(float* s, std::int64_t h, std::int64_t first, std::int64_t count, int step) const;

private:
  RelativeBuckets rule_;
  std::int64_t heads_;
  std::vector<float> table_;
  std::vector<float> by_distance_; // (heads, 2 max_distance + 1): distance -max_distance first
};

// bias (heads, n, m) = table[bucket(j - p)][h] with p = i + (m - n), as alibi_bias aligns queries.
template <typename T> void relative_bias(T* bias, const RelativeBias& rb, std::int64_t n, std::int64_t m);

} // namespace attn
