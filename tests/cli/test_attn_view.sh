#!/usr/bin/env bash
# attn-view through its command line: the terminal heatmap (colour under a pseudo-terminal, plain
# with NO_COLOR, TERM=dumb or a pipe), --values, --stats against values known in closed form,
# PNG output decoded with libpng (pnginfo), labels, pipes, and bad input.
source "$(dirname "$0")/lib.sh"
H="$TESTDATA/h5py_inputs.h5"

tensor-gen --shape 2,3,4 --fill arange -o t.h5 # t[b, i, j] = 12 b + 4 i + j

# --- the heatmap in the terminal ------------------------------------------------------------
check "plain heatmap" attn-view t.h5 --color never
{
  IFS= read -r title
  IFS= read -r r0
  IFS= read -r r1
  IFS= read -r r2
  IFS= read -r scale
} <out.txt
[ "$title" = "t.h5:/data [0] (3, 4)  (--index picks another slice)" ] && pass || fail "title: $title"
# 0..11 on the ramp " .:-=+*#%@", two characters a cell
[ "$r0" = "  ..::::" ] && [ "$r1" = "--==++**" ] && [ "$r2" = "####%%@@" ] && pass || fail "plain rows: '$r0' '$r1' '$r2'"
case "$scale" in "0 "*" 11   NaN/Inf: !!") pass ;; *) fail "scale line: $scale" ;; esac
check "--index -1" attn-view t.h5 --index -1 --color never
head -1 out.txt | grep -qF "t.h5:/data [1] (3, 4)" && pass || fail "--index -1 is the last slice: $(head -1 out.txt)"
attn-view t.h5 --index 1 --color never | tail -n +2 >i1.txt
tail -n +2 out.txt | cmp -s - i1.txt && pass || fail "--index -1 differs from --index 1"
# The same data at any offset looks the same: the scale follows the slice's own range.
sed -n 1,3p i1.txt | diff -q - <(printf '%s\n' "$r0" "$r1" "$r2") >/dev/null && pass || fail "slice 1's rows"

check "colour heatmap" attn-view t.h5 --color always
[ "$(grep -o $'\u2580' out.txt | wc -l)" -eq 8 ] && pass || fail "half blocks: 2 lines of 4 expected"
grep -qF $'\e[38;2;68;1;84m' out.txt && grep -qF $'\e[38;2;253;231;37m' out.txt && pass || fail "viridis 0 and 1 colours"

# auto: colour on a terminal (a pseudo-terminal from script(1)), none under NO_COLOR, TERM=dumb or a pipe
tty_run() { script -qec "$*" /dev/null; }
TERM=xterm-256color tty_run "attn-view t.h5" >tty.txt 2>&1
grep -qF $'\e[38;2;' tty.txt && grep -q $'\u2580' tty.txt && pass || fail "terminal, TERM=xterm-256color: no colour"
NO_COLOR=1 TERM=xterm-256color tty_run "attn-view t.h5" >tty.txt 2>&1
! grep -qF $'\e[' tty.txt && grep -qF '####%%@@' tty.txt && pass || fail "NO_COLOR=1: $(head -3 tty.txt | cat -v)"
TERM=dumb tty_run "attn-view t.h5" >tty.txt 2>&1
! grep -qF $'\e[' tty.txt && pass || fail "TERM=dumb still coloured"
TERM=xterm-256color attn-view t.h5 | grep -qF $'\e[' && fail "colour into a pipe" || pass

# wide slices are pooled to the width
tensor-gen --shape 4,300 --fill arange -o wide.h5
check "pooled" attn-view wide.h5 --width 100 --color never
head -1 out.txt | grep -qF "[shown as means of 6x6 blocks]" && [ "$(sed -n 2p out.txt | wc -c)" -eq 101 ] && pass ||
  fail "pooling to 100 columns: $(head -2 out.txt)"

# --- --values --------------------------------------------------------------------------------
check "--values" attn-view t.h5 --index 1 --values --labels-x a,b,c,d
[ "$(sed -n 2p out.txt | tr -s ' ')" = " a b c d" ] && [ "$(sed -n 5p out.txt | tr -s ' ')" = "2 20 21 22 23" ] && pass ||
  fail "--values table: $(cat out.txt)"
printf 'first\nsecond\nthird\n' >rows.txt
check "--values, label file" attn-view t.h5 --values --labels-y rows.txt --color never
sed -n 4p out.txt | grep -q "^second  *4  *5  *6  *7$" && pass || fail "row labels from a file: $(cat out.txt)"

# --- --stats ---------------------------------------------------------------------------------
check "--stats arange" attn-view t.h5 --stats
grep -q "^min *0$" out.txt && grep -q "^max *23$" out.txt && grep -q "^mean *11.5$" out.txt &&
  grep -q "^nonfinite 0 NaN, 0 Inf$" out.txt && pass || fail "--stats of 0..23: $(cat out.txt)"
grep -q "^row sums  6 rows of 4: 6 do not sum to 1" out.txt && grep -q "^entropy *not shown" out.txt && pass ||
  fail "arange rows are not distributions: $(cat out.txt)"
check "--stats NaN" attn-view "$H:nan" --stats
grep -q "^nonfinite 1 NaN, 0 Inf (first at \[1, 0\])$" out.txt && grep -q "^mean *1$" out.txt && pass ||
  fail "NaN report: $(cat out.txt)"
check "--stats Inf" attn-view "$H:inf" --stats
grep -q "^nonfinite 0 NaN, 1 Inf (first at \[1, 1\])$" out.txt && grep -q "^max *3$" out.txt && pass ||
  fail "Inf report: $(cat out.txt)"
check "--stats bool" attn-view "$H:bool" --stats
grep -q "tensor *.*:/bool bool (2, 3)" out.txt && grep -q "^mean *0.5$" out.txt && pass || fail "bool: $(cat out.txt)"
check "--stats 1-D" attn-view "$H:i64" --stats
grep -q "^min *5$" out.txt && grep -q "^row sums  1 rows of 2" out.txt && pass || fail "1-D stats: $(cat out.txt)"
check "rank 5" attn-view "$H:rank5" --index 0,0,-1 --values
sed -n 1p out.txt | grep -qF "[0, 0, 0] (1, 2)" && pass || fail "rank 5 slice: $(cat out.txt)"

# Attention weights: equal scores (zero queries and keys) under --causal give query i uniform
# weights over i + 1 keys, so entropy ln(i + 1); every row sums to 1.
tensor-gen --shape 2,5,4 --fill zeros -o z.h5
attn-score -q z.h5 -k z.h5 --causal -o - | attn-view -:weights --stats --index 1 >out.txt 2>err.txt && pass ||
  fail "pipe into --stats: $(cat err.txt)"
grep -q "^row sums  5 rows of 5: all sum to 1 within 0.0001" out.txt && pass || fail "row sums: $(cat out.txt)"
[ "$(sed -n '/per query/,$p' out.txt | tail -n +2 | awk '{print $2}' | tr '\n' ' ')" = "0 0.693147 1.09861 1.38629 1.60944 " ] &&
  pass || fail "entropy per query is not ln(i + 1): $(cat out.txt)"
grep -qF "uniform over 5 keys = 1.60944" out.txt && pass || fail "ln m missing"
attn-score -q z.h5 -k z.h5 --causal -o w.h5
check "--stats whole tensor" attn-view w.h5 --stats
grep -q "^entropy *min 0, mean 0.957498, max 1.60944" out.txt && pass || fail "entropy summary: $(cat out.txt)"

# --- PNG ---------------------------------------------------------------------------------------
check "--png" attn-view t.h5 --index 1 --png map.png --labels-x a,b,c,d --labels-y x,y,z
read -r w h colours < <(pnginfo map.png)
[ "$w" -ge 256 ] && [ "$h" -ge 192 ] && [ "$colours" -ge 100 ] && pass || fail "map.png: $w x $h, $colours colours"
[ ! -s out.txt ] && pass || fail "--png alone prints nothing: $(cat out.txt)"
attn-view t.h5 --index 1 --png map2.png --labels-x a,b,c,d --labels-y x,y,z && cmp -s map.png map2.png && pass ||
  fail "the same command gives different PNG bytes"
attn-view t.h5 --index 1 --png - --labels-x a,b,c,d --labels-y x,y,z | cmp -s - map.png && pass || fail "--png - differs"
# The colours follow the data: a constant slice draws one colour where arange draws twelve (some
# of which the colour bar has too; the unit test checks each cell's colour).
tensor-gen --shape 3,4 --fill ones -o ones.h5
attn-view ones.h5 --png ones.png && read -r _ _ one_colours < <(pnginfo ones.png)
tensor-gen --shape 3,4 --fill arange -o ar.h5
attn-view ar.h5 --png ar.png && read -r _ _ ar_colours < <(pnginfo ar.png)
[ "$ar_colours" -gt "$one_colours" ] && ! cmp -s ones.png ar.png && pass || fail "colours: ones $one_colours, arange $ar_colours"
# readable at 512 x 512: cells of 2 pixels
tensor-gen --shape 512,512 --fill uniform -o big.h5
check "--png 512" attn-view big.h5 --png big.png
read -r w h _ < <(pnginfo big.png)
[ "$w" -ge 1024 ] && [ "$w" -le 1400 ] && [ "$h" -ge 1024 ] && pass || fail "512x512 map: $w x $h"
[ -z "$(ls -A tmp)" ] && pass || fail "staging files left in TMPDIR: $(ls -A tmp)"
TERM=xterm tty_run "attn-view t.h5 --png -" >tty.txt 2>&1
status=$?
[ "$status" -eq 2 ] && grep -q "refusing to write PNG to a terminal" tty.txt && pass || fail "PNG to a terminal: $status $(cat tty.txt)"

# --- bad input ---------------------------------------------------------------------------------
expect_fail 1 "index 2 is out of range for axis 0 of t.h5:/data (size 2, shape (2, 3, 4))" attn-view t.h5 --index 2
expect_fail 1 "index -3 is out of range for axis 0" attn-view t.h5 --index -3
expect_fail 1 "has shape (2, 3, 4), so --index takes 1 index" attn-view t.h5 --index 0,1
expect_fail 1 "so --index takes 0 indices" attn-view ones.h5 --index 0
expect_fail 2 "--index" attn-view t.h5 --index x
expect_fail 1 "--labels-x gives 3 labels; the axis has 4" attn-view t.h5 --png o.png --labels-x a,b,c
expect_fail 1 "--labels-y (rows.txt, one label per line) gives 3 labels; the axis has 4" attn-view wide.h5 --values --labels-y rows.txt
expect_fail 1 "no such directory 'nodir'" attn-view t.h5 --png nodir/map.png
expect_fail 2 "output 'map.png' names the input" attn-view map.png --png map.png
expect_fail 2 "output 't.h5' names the input" attn-view t.h5 --png t.h5
expect_fail 1 "is 1-D, shape (2,); attn-view draws 2-D slices" attn-view "$H:i64"
expect_fail 1 "is 1-D" attn-view "$H:i64" --stats --png o.png
expect_fail 1 "has a dimension of size 0" attn-view "$H:empty" --stats
expect_fail 1 "holds string data" attn-view "$H:string"
expect_fail 1 "missing.h5: no such file" attn-view missing.h5
expect_fail 1 "map.png: not an HDF5 file" attn-view map.png
expect_fail 2 "--png - and the text of --stats/--values cannot share standard output" attn-view t.h5 --png - --stats
expect_fail 2 "--color" attn-view t.h5 --color sometimes
expect_fail 2 "--width: must be positive, got 0" attn-view t.h5 --width 0
expect_fail 2 "-o" attn-view t.h5 -o x.h5
expect_fail_stdin 1 "standard input is empty" /dev/null attn-view -

finish
