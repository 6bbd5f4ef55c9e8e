#!/usr/bin/env bash
# A depthwise convolution over the sequence in the feed-forward (ffn_conv_kernel): encode and
# decode against testdata/conv_ffn.h5 (torch's conv1d inside NumPy layers: centred in encoders,
# causal in decoders, gated and plain, with lengths), generation with the key/value cache (which
# keeps the convolution's last k - 1 inputs) against recomputing the prefix, greedy and beams,
# encode --init --ffn-conv saved and reloaded, and bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/conv_ffn.h5"

# --- golden cases ---
cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 6 ] && pass || fail "golden cases missing: $cases"
golden_cases "$G" encode output

# --- a sequence-to-sequence decoder given a causal convolution of 3 taps in both layers ---
D="$TESTDATA/decoder.h5"
cp "$D" conv.h5 && h5attr conv.h5 /s2s/decoder ffn_conv_kernel int 3
for i in 0 1; do
  tensor-gen --shape 32,1,3 --std 0.5 --seed $i -o "conv.h5:/s2s/decoder/layers/$i/ffn_conv/weight"
  tensor-gen --shape 32 --std 0.1 --seed $((i + 5)) -o "conv.h5:/s2s/decoder/layers/$i/ffn_conv/bias"
done
for K in 1 3; do
  for cache in "" --no-cache; do
    check "conv decoder beam $K $cache" decode --generate --max-len 8 --beam $K $cache --memory "$D:/s2s_memory" \
      --memory-lengths "$D:/s2s_src_lengths" --weights conv.h5:/s2s -o "gen$K$cache.h5"
  done
  cmp -s <(values "gen$K.h5" tokens) <(values "gen$K--no-cache.h5" tokens) && pass ||
    fail "beam $K: the cache changes the tokens"
  same "gen$K.h5:scores" "gen$K--no-cache.h5:scores" 1e-5 1e-5
done
# the convolution matters: other scores than the model without it
h5cmp gen3.h5:scores "$D:/s2s_generate/beam3/scores" 1e-3 1e-3 >/dev/null 2>&1 && fail "convolution ignored?" || pass

# --- encode --init --ffn-conv: saved, reloaded, the same bytes ---
check "init" encode -i "$G:/x" --init xavier --layers 2 --embed-dim 16 --heads 2 --ffn-dim 24 --ffn-conv 5 \
  --activation swiglu --save-weights w.h5 -o i1.h5
check "reload" encode -i "$G:/x" --weights w.h5 -o i2.h5
cmp -s <(values i1.h5 output) <(values i2.h5 output) && pass || fail "--ffn-conv: --save-weights does not reproduce"
[ "$(shape w.h5 layers/1/ffn_conv/weight)" = "24, 1, 5" ] && [ "$(shape w.h5 layers/1/ffn_conv/bias)" = "24" ] && pass ||
  fail "saved convolution: $(shape w.h5 layers/1/ffn_conv/weight)"
check "threads" encode -i "$G:/x" --weights w.h5 --threads 1 -o i3.h5
cmp -s <(values i1.h5 output) <(values i3.h5 output) && pass || fail "--threads changes the bytes"

# --- bad input ---
cp "$G" even.h5 && h5attr even.h5 /w/enc_relu_k3 ffn_conv_kernel int 4
cp "$G" noconv.h5 && h5attr noconv.h5 /w/enc_relu_k3 ffn_conv_kernel int 5
cp "$G" noattr.h5 && h5attr noattr.h5 /w/enc_relu_k3 ffn_conv_kernel int 0
expect_fail 1 "even.h5:/w/enc_relu_k3 attribute ffn_conv_kernel = 4: an encoder's convolution is centred" \
  encode -i "$G:/x" --weights even.h5:/w/enc_relu_k3 -o o.h5
expect_fail 1 "noconv.h5:/w/enc_relu_k3/layers/0/ffn_conv/weight: expected shape (24, 1, 5) (F = 24, ffn_conv_kernel = 5), got (24, 1, 3)" \
  encode -i "$G:/x" --weights noconv.h5:/w/enc_relu_k3 -o o.h5
expect_fail 1 "ffn_conv_kernel" encode -i "$G:/x" --weights noattr.h5:/w/enc_relu_k3 -o o.h5
expect_fail 2 "--ffn-conv 4: an encoder's convolution is centred on each position, so its kernel must be odd" \
  encode -i "$G:/x" --init xavier --layers 1 --embed-dim 16 --heads 2 --ffn-dim 24 --ffn-conv 4 -o o.h5
expect_fail 2 "--ffn-conv" encode -i "$G:/x" --weights "$G:/w/enc_relu_k3" --ffn-conv 3 -o o.h5
finish
