#!/usr/bin/env bash
# ViT by its own names (issue 57): encode --pixels through a ViTModel and a
# ViTForImageClassification directory (testdata/hf/vit, vit_cls; vit.h5 from
# tests/golden/make_vit_goldens.py): the output, layer 1's attention weights, the pooler and the
# classifier against float64 PyTorch (conv2d patches), another image size with the positions
# interpolated bicubically as interpolate_pos_encoding does; bad input.
source "$(dirname "$0")/lib.sh"
V="$TESTDATA/vit.h5"
H="$TESTDATA/hf"

check "vit" encode --pixels "$V:pixels" --weights "$H/vit" --emit-weights -o v.h5
close v.h5:output "$V:/vit/output"
close v.h5:weights/layer1 "$V:/vit/weights1"
close v.h5:pooled "$V:/vit/pooled"
[ "$(shape v.h5 output)" = "2, 17, 16" ] && pass || fail "vit output shape $(shape v.h5 output)"
check "vit classifier" encode --pixels "$V:pixels" --weights "$H/vit_cls" -o c.h5
close c.h5:output "$V:/vit_cls/output"
close c.h5:logits "$V:/vit_cls/logits"
h5ls c.h5 | grep -q pooled && fail "ViTForImageClassification has no pooler" || pass
check "vit, a 48 x 40 image: a 6 x 5 grid" encode --pixels "$V:pixels_big" --weights "$H/vit" -o big.h5
close big.h5:output "$V:/vit/output_big"
# one image without a batch axis
tensor-gen --shape 3,48,40 --seed 2 -o one.h5
check "one image (C, H, W)" encode --pixels one.h5 --weights "$H/vit" -o one_out.h5
[ "$(shape one_out.h5 output)" = "31, 16" ] && pass || fail "unbatched output shape $(shape one_out.h5 output)"
# the activations and the chunks: items one at a time give the same bits
check "vit by one item" encode --pixels "$V:pixels" --weights "$H/vit" --chunk 1 -o v1.h5
check "vit all at once" encode --pixels "$V:pixels" --weights "$H/vit" -o v2.h5
same v1.h5 v2.h5 0 0
check "vit activations" encode --pixels "$V:pixels" --weights "$H/vit" --emit-activations pattern --emit-layers 1 -o a.h5
close a.h5:activations/layer1/pattern "$V:/vit/weights1"

# --- bad input ---
tensor-gen --shape 2,1,32,32 -o gray.h5
expect_fail 1 "gray.h5:/data: 1 channels; the model takes 3" encode --pixels gray.h5 --weights "$H/vit" -o o.h5
tensor-gen --shape 1,3,30,32 -o odd.h5
expect_fail 1 "an image of 30 x 32 pixels does not cut into 8 x 8 patches" encode --pixels odd.h5 --weights "$H/vit" -o o.h5
tensor-gen --shape 3,32 -o flat.h5
expect_fail 1 "pixel values (b, channels, height, width)" encode --pixels flat.h5 --weights "$H/vit" -o o.h5
expect_fail 2 "--pixels needs a Vision Transformer's weights" encode --pixels "$V:pixels" --weights "$H/bert" -o o.h5
tensor-gen --shape 1,4 --fill ones --dtype i64 -o ids.h5
expect_fail 2 "is a Vision Transformer: give its images with --pixels" encode --tokens ids.h5 --weights "$H/vit" -o o.h5
expect_fail 2 "--lengths does not apply to --pixels" encode --pixels "$V:pixels" --weights "$H/vit" --lengths ids.h5 -o o.h5
expect_fail 2 "give exactly one of -i, --tokens, --text and --pixels" encode --pixels "$V:pixels" --tokens ids.h5 --weights "$H/vit" -o o.h5

finish
