#!/usr/bin/env bash
# The README's tour runs as written (so the README cannot drift from the tools).
source "$(dirname "$0")/lib.sh"
: "${SRC:?}"
sed -n '/^A short tour:/,/^## Conventions/p' "$SRC/README.md" | sed -n '/^```sh$/,/^```$/p' | grep -v '^```' >tour.sh
[ "$(grep -c . tour.sh)" -gt 10 ] && pass || fail "README tour not found"
ln -s "$SRC/testdata" testdata # the tour runs from the repository's root
bash -e tour.sh >tour.out 2>&1 && pass || fail "README tour: $(tail -3 tour.out)"
for f in x.h5 ids.h5 x_bf16.h5 pe.h5 x_pe.h5 x_rope.h5 rope.h5 alibi.h5 att.h5 local.h5 att_alibi.h5 add.h5 p.h5 lin.h5 favor.h5 feat.h5 linformer.h5 mono.h5 mono_hard.h5 loc.h5 hybrid.h5 runs.h5 doubled.h5 \
  y.h5 mha.h5 y_again.h5 y_gqa.h5 y_alibi.h5 cross.h5 y_favor.h5 enc.h5 enc_out.h5 enc_conv.h5 src.h5 mem.h5 rev.h5 rev4.h5 tgt_in.h5 dec.h5 rev_int8.h5 rev_int8_out.h5 hf.h5 hf32.h5 prompts.h5 dec_cross.png; do
  [ -s "$f" ] && pass || fail "README tour did not write $f"
done
[ "$(shape alibi.h5 bias)" = "1, 12, 128, 512" ] && pass || fail "alibi shape"
[ "$(shape t5_bias.h5 bias)" = "1, 4, 16, 16" ] && pass || fail "T5 bias shape"
same y.h5 y_again.h5
[ "$(shape cross.h5 weights)" = "2, 4, 16, 16" ] && pass || fail "cross weights shape"
[ "$(shape enc_out.h5 weights/layer1)" = "2, 4, 16, 16" ] && pass || fail "encoder weights shape"
values rev.h5 tokens | grep -q '(0,0): 12, 10, 8, 6, 4, 2$' && pass || fail "the trained model reverses: $(values rev.h5 tokens)"
values rev_int8_out.h5 tokens | grep -q '(0,0): 12, 10, 8, 6, 4, 2$' && pass || fail "int8: $(values rev_int8_out.h5 tokens)"
[ "$(shape dec.h5 weights/layer1/cross)" = "1, 4, 6, 5" ] && pass || fail "decoder cross weights shape"
grep -q "^5 1 4 1 3$" tour.out && pass || fail "decode --text-out in the tour: $(cat tour.out | head -3)"
grep -q "^3 1 4 1 5$" tour.out && grep -q "^2 7 1 8$" tour.out && pass || fail "detokenize in the tour"
grep -q "^row sums  16 rows of 16: all sum to 1" tour.out && pass || fail "attn-view --stats in the tour"
read -r w h _ < <(pnginfo dec_cross.png)
[ "${w:-0}" -ge $((5 * 64)) ] && [ "${h:-0}" -ge $((6 * 64)) ] && pass || fail "dec_cross.png: $w x $h (64-pixel cells of a 6x5 map)"
finish
