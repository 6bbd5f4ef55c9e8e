#!/usr/bin/env bash
# Hugging Face model directories as --weights (CONTRACT.md section 6.1): testdata/hf/ (written by
# tests/golden/make_hf_dirs.py from the LLaMA, Qwen2, GPT-2 and BERT models of decoder.h5 and
# encoder.h5) give the same output bits as the HDF5 groups they came from, and so the goldens
# PyTorch computed; bfloat16 and float16 checkpoints the bits of float32 files of the same values;
# a sharded one those of the single file; eos_token_id lists end generation; every damaged file or
# config is one error line, exit 1, nothing written.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/decoder.h5"
E="$TESTDATA/encoder.h5"
H="$TESTDATA/hf"
bits() { same "$1" "$2" 0 0; }

# --- the same bits as the HDF5 groups, and the goldens ---
for m in llama qwen2 gpt2; do
  T=(--tokens "$G:/$m/ids" --lengths "$G:/$m/ids_lengths")
  check "$m from HDF5" decode "${T[@]}" --weights "$G:/w/$m" --emit-weights -o "${m}_h5.h5"
  check "$m from its directory" decode "${T[@]}" --weights "$H/$m" --emit-weights -o "${m}_hf.h5"
  bits "${m}_hf.h5" "${m}_h5.h5"
  bits "${m}_hf.h5:weights/layer1/self" "${m}_h5.h5:weights/layer1/self"
  close "${m}_hf.h5:logits" "$G:/${m}_expect/logits"
done
T=(--tokens "$G:/llama/ids" --lengths "$G:/llama/ids_lengths")
# without --emit-weights: the blocked attention kernel, whose last bits differ from the row blocks'
check "llama from HDF5, no weights" decode "${T[@]}" --weights "$G:/w/llama" -o llama_h5.h5
check "llama from model.safetensors itself" decode "${T[@]}" --weights "$H/llama/model.safetensors" -o file.h5
bits file.h5 llama_h5.h5
check "llama in two shards" decode "${T[@]}" --weights "$H/llama_sharded" -o shards.h5
bits shards.h5 llama_h5.h5
check "llama from the index file" decode "${T[@]}" --weights "$H/llama_sharded/model.safetensors.index.json" -o index.h5
bits index.h5 llama_h5.h5
BT=(--tokens "$E:/bert/ids" --token-types "$E:/bert/types" --attention-mask "$E:/bert/attention_mask")
check "bert from HDF5" encode "${BT[@]}" --weights "$E:/w/bert" -o bert_h5.h5
for w in "$H/bert" "$H/bert_mlm:bert" "$H/bert_mlm:/bert" "$H/bert_mlm"; do
  check "bert from $w" encode "${BT[@]}" --weights "$w" -o bert_hf.h5
  bits bert_hf.h5 bert_h5.h5
done
close bert_hf.h5:output "$E:/bert_expect/output"
check "bert bf16" encode "${BT[@]}" --weights "$H/bert_bf16" -o bert_bf16.h5
check "bert bf16's values in float32" encode "${BT[@]}" --weights "$H/bert_bf16.h5" -o bert_bf16_32.h5
bits bert_bf16.h5 bert_bf16_32.h5

# --- 16-bit checkpoints: the bits of float32 files of the same values ---
P=(--prompt "$G:/llama/prompt" --prompt-lengths "$G:/llama/prompt_lengths" --max-len 8)
for dt in bf16 f16; do
  check "$dt teacher-forced" decode "${T[@]}" --weights "$H/llama_$dt" --emit-weights -o "$dt.h5"
  check "$dt's values in float32" decode "${T[@]}" --weights "$H/llama_$dt.h5" --emit-weights -o "${dt}_32.h5"
  bits "$dt.h5" "${dt}_32.h5"
  for cache in "" --no-cache; do
    check "$dt generated $cache" decode --generate "${P[@]}" --weights "$H/llama_$dt" $cache -o "${dt}_g.h5"
    check "$dt's values generated $cache" decode --generate "${P[@]}" --weights "$H/llama_$dt.h5" $cache -o "${dt}_g32.h5"
    bits "${dt}_g.h5:tokens" "${dt}_g32.h5:tokens"
    bits "${dt}_g.h5:scores" "${dt}_g32.h5:scores"
  done
done
h5cmp bf16.h5 llama_h5.h5 0 0 >/dev/null 2>&1 && fail "bfloat16 rounding changed nothing: the test would not see it" || pass
# Values left where the file maps them (few steps) are checked by the first product over them
# (LinearWeight::defer_check), or the first lookup in an embedding table: a bfloat16 q_proj
# holding +Inf at [2, 5], a float32 one NaN there, and a bfloat16 embedding row Inf, refused by
# name and index before anything is written, teacher-forced and generated.
st_value_at() { # FILE TENSOR INDEX SIZE: the byte offset of the tensor's flat INDEX in FILE
  local n first
  n=$(head -c 8 "$1" | od -An -t u8 | tr -d ' ')
  first=$(head -c $((8 + n)) "$1" | tail -c "$n" | sed -n "s/.*\"$2\":{[^}]*\"data_offsets\":\[\([0-9]*\),.*/\1/p")
  echo $((8 + n + first + $3 * $4))
}
Q=model.layers.0.self_attn.q_proj.weight
cp -r "$H/llama_bf16" inf_bf16 && cp -r "$H/llama" nan_f32 && cp -r "$H/llama_bf16" inf_embed
printf '\x80\x7f' | dd of=inf_embed/model.safetensors bs=1 conv=notrunc 2>/dev/null \
  seek="$(st_value_at inf_embed/model.safetensors model.embed_tokens.weight 19 2)" # [1, 3]: token 1 is used
printf '\x80\x7f' | dd of=inf_bf16/model.safetensors bs=1 seek="$(st_value_at inf_bf16/model.safetensors $Q 37 2)" conv=notrunc 2>/dev/null
printf '\x00\x00\xc0\x7f' | dd of=nan_f32/model.safetensors bs=1 seek="$(st_value_at nan_f32/model.safetensors $Q 37 4)" conv=notrunc 2>/dev/null
for run in teacher generate; do
  R=("${T[@]}")
  [ $run = generate ] && R=(--generate "${P[@]:0:4}" --max-len 3)
  expect_fail 1 "inf_bf16/model.safetensors: tensor $Q: Inf at index [2, 5]" decode "${R[@]}" --weights inf_bf16 -o x.h5
  expect_fail 1 "nan_f32/model.safetensors: tensor $Q: NaN at index [2, 5]" decode "${R[@]}" --weights nan_f32 -o x.h5
  expect_fail 1 "inf_embed/model.safetensors: tensor model.embed_tokens.weight: Inf at index [1, 3]" \
    decode "${R[@]}" --weights inf_embed -o x.h5
done
rm -r inf_bf16 nan_f32 inf_embed
# GPT-2 in bfloat16: Conv1D weights (in, out) and the tied embeddings kept 16-bit
GT=(--tokens "$G:/gpt2/ids" --lengths "$G:/gpt2/ids_lengths")
check "gpt2 bf16" decode "${GT[@]}" --weights "$H/gpt2_bf16" -o gpt2_bf16.h5
check "gpt2 bf16's values in float32" decode "${GT[@]}" --weights "$H/gpt2_bf16.h5" -o gpt2_bf16_32.h5
bits gpt2_bf16.h5 gpt2_bf16_32.h5
GP=(--prompt "$G:/gpt2/prompt" --prompt-lengths "$G:/gpt2/prompt_lengths" --max-len 8)
check "gpt2 bf16 generated" decode --generate "${GP[@]}" --weights "$H/gpt2_bf16" -o gpt2_g.h5
check "gpt2 bf16's values generated" decode --generate "${GP[@]}" --weights "$H/gpt2_bf16.h5" -o gpt2_g32.h5
bits gpt2_g.h5 gpt2_g32.h5

# --- generation_config.json: its ids over config.json's; an eos_token_id list ends at any ---
check "greedy from HDF5" decode --generate "${P[@]}" --weights "$G:/w/llama" -o g_h5.h5
cp -r "$H/llama" eos2
printf '{"bos_token_id": 1, "eos_token_id": [10, 7]}\n' >eos2/generation_config.json
check "eos list" decode --generate "${P[@]}" --weights eos2 -o g_eos2.h5
[ "$(values g_h5.h5 tokens | tr -d ' \n')" != "$(values g_eos2.h5 tokens | tr -d ' \n')" ] && pass ||
  fail "the eos list [10, 7] changed nothing (golden row 1 generates 7s)"
values g_eos2.h5 tokens | grep -q "(1,0): 2, 7, 0, 0, 0," && pass || fail "row 1 does not end at its first 7: $(values g_eos2.h5 tokens)"
check "--eos over the list" decode --generate "${P[@]}" --weights eos2 --eos 10 -o g_flag.h5
bits g_flag.h5 g_h5.h5
printf '{"eos_token_id": [10, 11]}\n' >eos2/generation_config.json
expect_fail 1 "eos2/generation_config.json: key eos_token_id = [10, 11] holds 11, outside the vocabulary 0..10" \
  decode --generate "${P[@]}" --weights eos2 -o x.h5
rm -r eos2

# --- rope_scaling of each type, against PyTorch (tests/golden/make_hf_dirs.py) ---
for k in linear dynamic llama3 yarn; do
  check "rope_scaling $k" decode "${T[@]}" --weights "$H/llama_rope_$k" -o "rope_$k.h5"
  close "rope_$k.h5:logits" "$H/rope_expect.h5:$k"
  h5cmp "rope_$k.h5:logits" llama_h5.h5:logits 0 1e-3 max >/dev/null 2>&1 && fail "rope_scaling $k changed nothing" || pass
done
# head_dim: heads 6 wide in a 16-wide model with 4 heads (q_proj (24, 16), o_proj (16, 24))
check "head_dim" decode "${T[@]}" --weights "$H/llama_head_dim" -o head_dim.h5
close head_dim.h5:logits "$H/rope_expect.h5:head_dim"
check "head_dim, cached generation" decode --generate "${P[@]}" --weights "$H/llama_head_dim" -o hd_g.h5
check "head_dim, recomputed" decode --generate "${P[@]}" --weights "$H/llama_head_dim" --no-cache -o hd_g2.h5
bits hd_g.h5:tokens hd_g2.h5:tokens
# transformers v5's rope_parameters (rope_theta inside), and the old key "type"
mkdir v5 && cp "$H/llama_rope_linear/model.safetensors" v5/
sed 's/"rope_scaling"/"rope_parameters"/; s/"rope_type": "linear",/"rope_type": "linear", "rope_theta": 10000.0,/' \
  "$H/llama_rope_linear/config.json" >v5/config.json
grep -q rope_parameters v5/config.json && pass || fail "the v5 config was not written"
check "rope_parameters" decode "${T[@]}" --weights v5 -o v5.h5
bits v5.h5 rope_linear.h5
sed -i 's/"factor": 2.0/"factor": 2.5/' v5/config.json
check "rope_parameters' factor read" decode "${T[@]}" --weights v5 -o v5b.h5
h5cmp v5b.h5 rope_linear.h5 0 0 >/dev/null 2>&1 && fail "rope_parameters.factor ignored" || pass
sed -i 's/"linear"/"longrope"/' v5/config.json
expect_fail 1 "v5/config.json: key rope_parameters.rope_type = 'longrope': the toolkit computes default, linear, dynamic, llama3" \
  decode "${T[@]}" --weights v5 -o x.h5
printf '{"num_attention_heads": 4, "num_key_value_heads": 2, "rope_parameters": {"rope_type": "linear"}}' >v5/config.json
expect_fail 1 "no rope_parameters.factor" decode "${T[@]}" --weights v5 -o x.h5
rm -r v5

# --- quantize: the converter to an HDF5 weight file; the same bits from either ---
check "quantize --scheme f32 of a bfloat16 directory" quantize --weights "$H/llama_bf16" --scheme f32 -o conv32.h5
check "the converted file" decode "${T[@]}" --weights conv32.h5 --emit-weights -o conv32_out.h5
bits conv32_out.h5 bf16.h5
check "quantize a yarn model" quantize --weights "$H/llama_rope_yarn" --scheme f32 -o yarn.h5
[ "$(attr yarn.h5 rope_scaling.type)" = yarn ] && pass || fail "rope_scaling.type not carried: $(h5dump -A yarn.h5 | grep ATTRIBUTE)"
check "the converted yarn model" decode "${T[@]}" --weights yarn.h5 -o yarn_out.h5
bits yarn_out.h5 rope_yarn.h5
cp -r "$H/llama" eosl && printf '{"eos_token_id": [10, 7]}\n' >eosl/generation_config.json
check "quantize int8 with an eos list" quantize --weights eosl -o eosl8.h5
h5dump -a /eos_token_id eosl8.h5 | grep -q "(0): 10, 7" && pass || fail "eos_token_id list: $(h5dump -a /eos_token_id eosl8.h5)"
check "the int8 file generates" decode --generate "${P[@]}" --weights eosl8.h5 -o eosl8_g.h5
check "quantize f16 of a directory's prefix" quantize --weights "$H/bert_mlm:bert" --scheme f16 -o bert16.h5
check "the float16 BERT" encode "${BT[@]}" --weights bert16.h5 -o bert16_out.h5
same bert16_out.h5:output bert_h5.h5:output 0 0.01 max
rm -r eosl

# --- damaged files, each one line naming the file and the tensor or key, nothing written ---
# st FILE HEADER BYTES [LENGTH]: a safetensors file: the header's length (LENGTH, else HEADER's),
# 8 bytes little-endian, HEADER, then BYTES zero bytes of data.
st() {
  local n=${4:-${#2}} i le=""
  for i in 0 1 2 3 4 5 6 7; do le+=$(printf '\\x%02x' $(((n >> (8 * i)) & 255))); done
  { printf "$le"; printf '%s' "$2"; head -c "$3" /dev/zero; } >"$1"
}
t() { printf '"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%s]}' "$@"; } # NAME DTYPE SHAPE BEGIN,END
mkdir bad && cp "$H/llama/config.json" bad/
D=(decode --tokens "$G:/llama/ids" --weights bad -o x.h5)
bad() { # HEADER BYTES SUBSTRING [LENGTH]
  st bad/model.safetensors "$1" "$2" "${4:-}"
  expect_fail 1 "$3" "${D[@]}"
}
bad '{"a":' 0 "bad/model.safetensors: the header is not JSON"
bad '[1, 2]' 0 "bad/model.safetensors: the header is not a JSON object"
bad '{}' 0 "bad/model.safetensors: the header claims 200000000 bytes: more than the format's 100 MB" 200000000
bad '{}' 0 "bad/model.safetensors: the header's length 1000 runs past the end of the file (10 bytes)" 1000
bad "{$(t w F32 4 0,16)}" 8 "bad/model.safetensors: tensor w: data_offsets [0, 16] run past the end of the data (8 bytes)"
bad "{$(t a F32 4 0,16),$(t b F32 4 8,24)}" 24 "bad/model.safetensors: tensor b's bytes [8, 24] overlap another tensor's"
bad "{$(t a F32 2 0,8),$(t b F32 2 16,24)}" 24 "bad/model.safetensors: a hole in the data before tensor b: bytes [8, 16]"
bad "{$(t w F32 3 0,16)}" 16 "bad/model.safetensors: tensor w: shape (3,) of F32 takes 12 bytes, data_offsets [0, 16] hold 16"
bad "{$(t w Q7 4 0,16)}" 16 "bad/model.safetensors: tensor w: dtype Q7 is unknown"
bad "{$(t w I32 4 0,16)}" 16 "bad/model.safetensors: tensor w: dtype I32 is not read (the tools read F32, F16, BF16 and F64)"
bad "{$(t w F32 4 0,16),$(t w F32 4 16,32)}" 32 "bad/model.safetensors: tensor w is named twice in the header"
bad "{$(t w F32 4 0,16)}" 20 "bad/model.safetensors: 4 bytes after the last tensor's data"
bad "{$(t w F32 4 16,0)}" 16 "bad/model.safetensors: tensor w: data_offsets [16, 0] ends before it begins"
bad "{$(t w F32 -4 0,16)}" 16 "bad/model.safetensors: tensor w: the shape holds -4"
bad "{$(t model.layers.0.self_attn.q_proj.weight F32 16,16 0,1024)}" 1024 \
  "bad: missing tensor model.embed_tokens.weight (LlamaForCausalLM's token embeddings"
rm bad/model.safetensors
expect_fail 1 "bad: neither model.safetensors nor model.safetensors.index.json" "${D[@]}"

# the index and its shards
idx() { printf '{"metadata": {}, "weight_map": {%s}}' "$1" >bad/model.safetensors.index.json; }
st bad/a.safetensors "{$(t x F32 2 0,8)}" 8
st bad/b.safetensors "{$(t y F32 2 0,8)}" 8
idx '"x": "a.safetensors", "y": "c.safetensors"'
expect_fail 1 "bad/model.safetensors.index.json: shard c.safetensors (of tensor y) is missing" "${D[@]}"
idx '"x": "a.safetensors", "y": "../b.safetensors"'
expect_fail 1 "bad/model.safetensors.index.json: tensor y's shard '../b.safetensors' lies outside the model's folder" "${D[@]}"
idx '"x": "a.safetensors", "y": "/tmp/b.safetensors"'
expect_fail 1 "tensor y's shard '/tmp/b.safetensors' lies outside" "${D[@]}"
idx '"x": "a.safetensors", "x": "b.safetensors"'
expect_fail 1 "bad/model.safetensors.index.json: tensor x is named twice in weight_map" "${D[@]}"
idx '"x": "a.safetensors"'
st bad/a.safetensors "{$(t x F32 2 0,8),$(t y F32 2 8,16)}" 16
expect_fail 1 "bad/a.safetensors: tensor y is not in bad/model.safetensors.index.json's weight_map" "${D[@]}"
idx '"x": "a.safetensors", "y": "b.safetensors"'
expect_fail 1 "bad/a.safetensors: tensor y is here, but bad/model.safetensors.index.json puts it in b.safetensors" "${D[@]}"
st bad/a.safetensors "{$(t x F32 2 0,8)}" 8
idx '"x": "a.safetensors", "y": "b.safetensors", "z": "b.safetensors"'
expect_fail 1 "bad/b.safetensors: tensor z is not in b.safetensors, where bad/model.safetensors.index.json puts it" "${D[@]}"
idx '"weights": 1'
printf '{"metadata": {}}' >bad/model.safetensors.index.json
expect_fail 1 "bad/model.safetensors.index.json: no weight_map object" "${D[@]}"
rm -r bad

# a tensor the layout does not read: refused by its state_dict name; --ignore-unknown-weights runs
mkdir extra && cp "$H/llama/config.json" extra/
cp "$H/llama/model.safetensors" extra/model-1.safetensors
st extra/model-2.safetensors "{$(t lm_head.bias F32 11 0,44)}" 44
{
  printf '{"weight_map": {"lm_head.bias": "model-2.safetensors"'
  for n in $(h5ls -r "$G/w/llama" | awk '/Dataset/ {print $1}' | sed 's|^/||; s|/|.|g'); do printf ', "%s": "model-1.safetensors"' "$n"; done
  printf '}}'
} >extra/model.safetensors.index.json
expect_fail 1 "extra: 1 tensor is not part of the layout this tool reads (PyTorch state_dict names; man attn-toolkit, WEIGHT FILES): lm_head.bias" \
  decode "${T[@]}" --weights extra -o x.h5
check "--ignore-unknown-weights" decode "${T[@]}" --weights extra --ignore-unknown-weights -o ignored.h5
bits ignored.h5 llama_h5.h5
rm -r extra

# --- mha-run from a .safetensors file (nn.MultiheadAttention's state_dict) and its config.json ---
M="$TESTDATA/mha.h5"
mkdir mha_st
for n in in_proj_weight in_proj_bias out_proj/weight out_proj/bias; do
  h5dump -b LE -d "/w/packed/$n" -o "mha_st/${n//\//.}.bin" "$M" >/dev/null
done
st mha_st/model.safetensors "{$(t in_proj_weight F32 48,16 0,3072),$(t in_proj_bias F32 48 3072,3264),$(t out_proj.weight F32 16,16 3264,4288),$(t out_proj.bias F32 16 4288,4352)}" 0
cat mha_st/in_proj_weight.bin mha_st/in_proj_bias.bin mha_st/out_proj.weight.bin mha_st/out_proj.bias.bin >>mha_st/model.safetensors
printf '{"num_heads": 4}' >mha_st/config.json
Q=(-q "$M:/q5" -k "$M:/k7" -v "$M:/v7")
check "mha-run from HDF5" mha-run "${Q[@]}" --weights "$M:/w/packed" -o mha_h5.h5
check "mha-run from safetensors" mha-run "${Q[@]}" --weights mha_st/model.safetensors -o mha_st.h5
bits mha_st.h5 mha_h5.h5
printf '{"num_heads": 3}' >mha_st/config.json
expect_fail 1 "mha_st/config.json: key num_heads = 3" mha-run "${Q[@]}" --weights mha_st/model.safetensors -o x.h5
printf '{"num_heads": 4}' >mha_st/config.json
# a bfloat16 out_proj.weight holding +Inf at [0, 1] (bits 0x7f80): refused by name and index
st mha_st/model.safetensors "{$(t in_proj_weight F32 48,16 0,3072),$(t in_proj_bias F32 48 3072,3264),$(t out_proj.weight BF16 16,16 3264,3776),$(t out_proj.bias F32 16 3776,3840)}" 0
{ cat mha_st/in_proj_weight.bin mha_st/in_proj_bias.bin; printf '\x00\x00\x80\x7f'; head -c 508 /dev/zero; cat mha_st/out_proj.bias.bin; } >>mha_st/model.safetensors
expect_fail 1 "mha_st/model.safetensors: tensor out_proj.weight: Inf at index [0, 1]" \
  mha-run "${Q[@]}" --weights mha_st/model.safetensors -o x.h5
# float64: NaN named by index; a finite value beyond float32's range refused
st mha_st/model.safetensors "{$(t in_proj_weight F32 48,16 0,3072),$(t in_proj_bias F64 48 3072,3456),$(t out_proj.weight F32 16,16 3456,4480),$(t out_proj.bias F32 16 4480,4544)}" 0
{ cat mha_st/in_proj_weight.bin; head -c 16 /dev/zero; printf '\x9c\x75\x00\x88\x3c\xe4\x37\x7e'; head -c 360 /dev/zero
  cat mha_st/out_proj.weight.bin mha_st/out_proj.bias.bin; } >>mha_st/model.safetensors
expect_fail 1 "mha_st/model.safetensors: tensor in_proj_bias: 1e+300 at index [2] is beyond float32's range" \
  mha-run "${Q[@]}" --weights mha_st/model.safetensors -o x.h5
rm -r mha_st

# --- attn-score --params from a .safetensors file (the general score's W (8, 4)) ---
A="$TESTDATA/attn_score.h5"
check "general score, params saved" attn-score -q "$A:/q5" -k "$A:/k4" -v "$A:/v7" --score general --init xavier --seed 5 \
  --save-params pg.h5 -o ig.h5
mkdir pst && printf '{}' >pst/config.json
h5dump -b LE -d /W -o pst/W.bin pg.h5 >/dev/null
st pst/model.safetensors "{$(t W F32 8,4 0,128)}" 0 && cat pst/W.bin >>pst/model.safetensors && rm pst/W.bin
check "general score, params from safetensors" attn-score -q "$A:/q5" -k "$A:/k4" -v "$A:/v7" --score general \
  --params pst/model.safetensors -o sg.h5
bits sg.h5 ig.h5
rm -r pst

# --- config.json ---
cp -r "$H/llama" cfg
C=(decode "${T[@]}" --weights cfg -o x.h5)
rm cfg/config.json
expect_fail 1 "cfg/config.json: missing (the model's config.json, beside its weights" "${C[@]}"
printf '{"num_attention_heads": 4,' >cfg/config.json
expect_fail 1 "cfg/config.json: not JSON" "${C[@]}"
printf '[4]' >cfg/config.json
expect_fail 1 "cfg/config.json: not a JSON object" "${C[@]}"
printf '{"hidden_size": 16}' >cfg/config.json
expect_fail 1 "no num_attention_heads attribute" "${C[@]}"
printf '{"num_attention_heads": 4, "hidden_size": 32}' >cfg/config.json
expect_fail 1 "cfg/config.json: key hidden_size = 32 contradicts the datasets: cfg/model.safetensors: tensor model.embed_tokens.weight gives 16" "${C[@]}"
printf '{"num_attention_heads": "4"}' >cfg/config.json
expect_fail 1 "cfg/config.json: key num_attention_heads = '4': expected an integer" "${C[@]}"
printf '{"num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": false, "rope_scaling": null, "sliding_window": null}' >cfg/config.json
check "null values as absent" decode "${T[@]}" --weights cfg -o nulls.h5
bits nulls.h5 llama_h5.h5
rm -r cfg
finish
