#!/usr/bin/env bash
# Every tool has a man page with the common sections, groff renders it without warnings, and every
# option its --help shows appears in the page (so the two cannot drift apart). attn-toolkit(7),
# the conventions page, renders cleanly, names every tool, and every tool page points to it.
source "$(dirname "$0")/lib.sh"
: "${SRC:?}"

for exe in "$TOOLS"/*; do
  [ -x "$exe" ] && [ -f "$exe" ] || continue
  tool=$(basename "$exe")
  page="$SRC/man/$tool.1"
  if [ ! -f "$page" ]; then
    fail "$tool has no man page"
    continue
  fi
  warnings=$(groff -man -ww -z "$page" 2>&1)
  [ -z "$warnings" ] && pass || fail "$tool.1: groff: $warnings"
  for section in NAME SYNOPSIS DESCRIPTION OPTIONS FILES "EXIT STATUS" EXAMPLES "SEE ALSO"; do
    grep -q "^\.SH \"\?$section\"\?$" "$page" && pass || fail "$tool.1 lacks section $section"
  done
  grep -q '^\.BR attn-toolkit (7)' "$page" && pass || fail "$tool.1 does not refer to attn-toolkit(7)"
  grep -qF ".BR $tool (1)" "$SRC/man/attn-toolkit.7" && pass || fail "attn-toolkit.7 does not name $tool"
  for opt in $("$exe" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    escaped=${opt//-/\\\\-}
    grep -q -- "$escaped" "$page" && pass || fail "$tool.1 does not document $opt"
  done
done

conventions="$SRC/man/attn-toolkit.7"
warnings=$(groff -man -ww -z "$conventions" 2>&1)
[ -z "$warnings" ] && pass || fail "attn-toolkit.7: groff: $warnings"
for section in NAME DESCRIPTION "TENSOR FILES" MASKS "WEIGHT FILES" "EXIT STATUS" EXAMPLES "SEE ALSO"; do
  grep -q "^\.SH \"\?$section\"\?$" "$conventions" && pass || fail "attn-toolkit.7 lacks section $section"
done
# The weight layout's dataset and attribute names (CONTRACT.md section 3) are all documented.
for name in in_proj_weight in_proj_bias out_proj/weight q_proj_weight k_proj_weight v_proj_weight num_kv_heads \
  linear1/weight linear2/weight norm_first layer_norm_eps multihead_attn norm3 src_embed/weight tgt_embed/weight \
  generator/weight pos_embed/weight pad_id bos_id eos_id; do
  grep -qF -- "$name" "$conventions" && pass || fail "attn-toolkit.7 does not document $name"
done

finish
