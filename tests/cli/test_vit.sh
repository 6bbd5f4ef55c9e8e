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

# --- PNG files through the image processor: the pixel_values of transformers' ViTImageProcessor
# with Pillow (RGB, palette, grey, RGBA, 1-bit; down- and upscaled), so the same bits as those ---
I="$TESTDATA/images"
check "five PNGs, the directory's preprocessor_config.json" encode --weights "$H/vit_cls" -o im.h5 \
  --image "$I/rgb.png" --image "$I/palette.png" --image "$I/gray.png" --image "$I/rgba.png" --image "$I/gray1.png"
check "their pixel_values from Pillow" encode --pixels "$V:/images/bilinear" --weights "$H/vit_cls" -o px.h5
same im.h5 px.h5 0 0
for f in bicubic lanczos box hamming; do
  check "rgb.png, $f" encode --image "$I/rgb.png" --image-processor "$I/processor_$f.json" --weights "$H/vit_cls" -o a.h5
  check "its pixel_values, $f" encode --pixels "$V:/images/rgb_$f" --weights "$H/vit_cls" -o b.h5
  same a.h5 b.h5 0 0
done
h5cmp a.h5 px.h5 0 0 >/dev/null 2>&1 && fail "the filter changed nothing" || pass
# without a preprocessor_config.json: ViTImageProcessor's defaults at the model's image size
check "defaults" encode --image "$I/rgb.png" --weights "$H/vit" -o d.h5
[ "$(shape d.h5 output)" = "1, 17, 16" ] && pass || fail "defaults: $(shape d.h5 output)"
expect_fail 1 "gray16.png: a 16-bit PNG" encode --image "$I/gray16.png" --weights "$H/vit_cls" -o o.h5
expect_fail 1 "processor_box.json: not a PNG file" encode --image "$I/processor_box.json" --weights "$H/vit_cls" -o o.h5
expect_fail 1 "nope.png: cannot open" encode --image nope.png --weights "$H/vit_cls" -o o.h5
sed 's/"resample": 2/"resample": 0/' "$H/vit_cls/preprocessor_config.json" >nearest.json
expect_fail 1 "nearest.json: resample 0 (nearest) is not computed" encode --image "$I/rgb.png" --image-processor nearest.json --weights "$H/vit_cls" -o o.h5
sed 's/"height": 32,/"shortest_edge": 32,/' "$H/vit_cls/preprocessor_config.json" >short.json
expect_fail 1 "short.json: size must give height and width" encode --image "$I/rgb.png" --image-processor short.json --weights "$H/vit_cls" -o o.h5
sed 's/"do_resize": true/"do_resize": false/' "$H/vit_cls/preprocessor_config.json" >noresize.json
expect_fail 1 "gray.png: 20 x 24 pixels (width x height), but" encode --image "$I/rgb.png" --image "$I/gray.png" --image-processor noresize.json --weights "$H/vit_cls" -o o.h5
expect_fail 1 "an image 40 wide and 36 high does not cut into 8 x 8 patches" encode --image "$I/rgb.png" --image-processor noresize.json --weights "$H/vit_cls" -o o.h5
expect_fail 2 "--image needs a Vision Transformer's weights" encode --image "$I/rgb.png" --weights "$H/bert" -o o.h5
expect_fail 2 "--image-processor does not apply to encode without --image" encode --pixels "$V:pixels" --image-processor noresize.json --weights "$H/vit" -o o.h5

# --- attn-view: the class token's attention over the patches, drawn over the image ---
check "weights of rgb.png" encode --image "$I/rgb.png" --weights "$H/vit_cls" --emit-weights -o vw.h5
check "head 0 over the image" attn-view vw.h5:weights/layer1 --index 0,0 --over-image "$I/rgb.png" --png h0.png
check "head 2 over the image" attn-view vw.h5:weights/layer1 --index 0,2 --over-image "$I/rgb.png" --png h2.png
read -r w h colours < <(pnginfo h0.png)
[ "${w:-0}" -ge 512 ] && [ "${h:-0}" -ge 460 ] && [ "${colours:-0}" -ge 100 ] && pass || fail "h0.png: $w x $h, $colours colours"
cmp -s h0.png h2.png && fail "two heads drew the same picture" || pass
check "a query's row, the grid given" attn-view vw.h5:weights/layer1 --index 0,0 --query 5 --grid 4x4 --over-image "$I/rgb.png" --png q5.png
expect_fail 1 "17 keys, but the class token and a 3 x 4 grid are 13" attn-view vw.h5:weights/layer1 --index 0,0 --grid 3x4 --over-image "$I/rgb.png" --png o.png
expect_fail 1 "--query 17 is outside the 17 queries" attn-view vw.h5:weights/layer1 --index 0,0 --query 17 --over-image "$I/rgb.png" --png o.png
check "a 6 x 5 grid's weights" encode --pixels "$V:pixels_big" --weights "$H/vit" --emit-weights -o wb.h5
expect_fail 1 "31 keys are not the class token and a square grid of patches; give --grid" attn-view wb.h5:weights/layer0 --index 0,0 --over-image "$I/rgb.png" --png o.png
check "the 6 x 5 grid given" attn-view wb.h5:weights/layer0 --index 0,0 --grid 6x5 --over-image "$I/rgb.png" --png g65.png
expect_fail 2 "--over-image draws into --png FILE" attn-view vw.h5:weights/layer1 --index 0,0 --over-image "$I/rgb.png"
expect_fail 2 "--query does not apply to attn-view without --over-image" attn-view vw.h5:weights/layer1 --index 0,0 --query 2 --png o.png
expect_fail 2 "--grid '4by4': expected GHxGW" attn-view vw.h5:weights/layer1 --index 0,0 --grid 4by4 --over-image "$I/rgb.png" --png o.png

# --- bad input ---
tensor-gen --shape 2,1,32,32 -o gray.h5
expect_fail 1 "gray.h5:/data: 1 channels; the model takes 3" encode --pixels gray.h5 --weights "$H/vit" -o o.h5
tensor-gen --shape 1,3,30,32 -o odd.h5
expect_fail 1 "an image 32 wide and 30 high does not cut into 8 x 8 patches" encode --pixels odd.h5 --weights "$H/vit" -o o.h5
tensor-gen --shape 3,32 -o flat.h5
expect_fail 1 "pixel values (b, channels, height, width)" encode --pixels flat.h5 --weights "$H/vit" -o o.h5
expect_fail 2 "--pixels needs a Vision Transformer's weights" encode --pixels "$V:pixels" --weights "$H/bert" -o o.h5
tensor-gen --shape 1,4 --fill ones --dtype i64 -o ids.h5
expect_fail 2 "is a Vision Transformer: give its images with --pixels or --image" encode --tokens ids.h5 --weights "$H/vit" -o o.h5
expect_fail 2 "--lengths does not apply to --pixels" encode --pixels "$V:pixels" --weights "$H/vit" --lengths ids.h5 -o o.h5
expect_fail 2 "give exactly one of -i, --tokens, --text, --pixels and --image" encode --pixels "$V:pixels" --tokens ids.h5 --weights "$H/vit" -o o.h5

finish
