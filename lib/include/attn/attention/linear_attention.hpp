// Attention in time linear in the number of keys, over the same strided views as the softmax
// kernel (attention.hpp: q (B, H, n, d), k (B, G, m, d), v (B, G, m, dv), query head h using
// key/value head h / kv_group):
//   - linear: kernelised attention (Katharopoulos et al. 2020), feature map phi(x) = elu(x) + 1:
//       out_i = phi(q_i) (sum_j phi(k_j) v_j^T) / phi(q_i) . (sum_j phi(k_j)),
//     the sums over the keys query i may see: all of them, or j <= p (causal, by prefix sums);
//   - performer: FAVOR+ (Choromanski et al. 2020), the same form with positive random features
//       phi(x) = exp(omega x' - |x'|^2 / 2) / sqrt(M), x' = sqrt(scale) x  (scale 1/sqrt(d): d^-1/4),
//     omega (M, d) drawn from a seeded normal, which approximates softmax(scale q.k);
//   - linformer (Wang et al. 2020): softmax(scale q (E K)^T) (F V), keys and values projected along
//     the sequence by E and F (k, m). It cannot be causal.
// Padded keys (lengths, key padding mask) take no part: their features (or, in Linformer, their
// rows of K and V) are zero. A query that sees no key gets 0.
//
// The causal sums run over blocks of 64 keys in order, and the work is split into tasks whose
// boundaries do not depend on the thread count, so the bits are the same whatever the threads or
// the items that share a call.
#pragma once

#include "attn/attention/attention.hpp"
#include "attn/attention/mask.hpp"
#include "attn/core/random.hpp"
#include "attn/core/tensor.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace attn {

enum class LinearKind { Elu, Favor, Linformer };
// "linear" | "performer" | "linformer"
LinearKind parse_linear_kind(std::string_view s);
const char* linear_kind_name(LinearKind kind);

// The implied (n, m) weights are materialised (--emit weights) only up to this many elements over
// the batch (1 GiB of float32): beyond it the point of these variants is lost.
constexpr std::int64_t max_implied_weights = std::int64_t{1} << 28;

// Performer's random features omega (M, d): rows drawn from N(0, I_d) by one seeded stream, or with
// `orthogonal` in blocks of d mutually orthogonal rows (Gram-Schmidt of a Gaussian block), each row
// then given the length of an independent N(0, I_d) draw, as in the paper's orthogonal random
// features. The last block of an M that d does not divide keeps its first rows.
Tensor favor_features(std::int64_t M, std::int64_t d, bool orthogonal, std::uint64_t seed);
Tensor favor_features(std::int64_t M, std::int64_t d, bool orthogonal, Rng& rng);

// Linformer's projections E and F (k, m), as torch.nn.init.xavier_uniform_, E then F from one
// seeded stream.
struct LinformerProjections {
  Tensor E, F;
};
LinformerProjections xavier_linformer(std::int64_t k, std::int64_t m, std::uint64_t seed);
LinformerProjections xavier_linformer(std::int64_t k, std::int64_t m, Rng& rng);

// Throws naming the part of `mask` the linear forms cannot apply: a mask tensor, the sparse
// patterns, top-k, ALiBi; and, for Linformer, causal. With no `source` the form came from
// --attention: a UsageError naming it. Else `source` names where a weight file chose it (the
// module's `attention` attribute): an Error naming that.
void check_linear_mask(const Mask& mask, LinearKind kind, std::string_view source = {});

struct LinearAttention {
  LinearKind kind = LinearKind::Elu;
  std::int64_t batch = 1, heads = 1, n = 0, m = 0, d = 0, dv = 0;
  std::int64_t kv_group = 1;                  // query heads per key/value head
  View q;                                     // (B, H, n, d)
  View k;                                     // (B, G, m, d)
  View v;                                     // (B, G, m, dv); data null: only weights are asked for
  const Mask* mask = nullptr;                 // causal, lengths, key padding (check_linear_mask)
  std::int64_t mask_batch = 0;                // the mask's batch index of item 0
  float scale = 1.0f;                         // performer and linformer: the softmax's q.k scale
  const Tensor* features = nullptr;           // performer: omega (M, d)
  const LinformerProjections* proj = nullptr; // linformer
  OutView out;                                // (B, H, n, dv); data null: not wanted
  OutView weights;                            // (B, H, n, m): the implied weights; data null: not wanted
  std::string_view source;                    // where the form was chosen, for check_linear_mask
};
// Throws Error when a sum overflows float32 (values too large for these forms), never NaN.
void linear_attention(const LinearAttention& a);

} // namespace attn
