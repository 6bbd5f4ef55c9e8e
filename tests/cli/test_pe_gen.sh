#!/usr/bin/env bash
# pe-gen through its command line: goldens (testdata/, from tests/golden/make_golden.py), pipes,
# several '-' arguments from one standard input, file conventions, and bad input.
source "$(dirname "$0")/lib.sh"
G=$TESTDATA

# --- sinusoidal against the float64 textbook formula (float32 output: within half an ulp) ---
check "sinusoidal table" pe-gen --len 50 --dim 64 -o pe.h5
same pe.h5 "$G/pe_sinusoidal.h5:n50_d64" 3e-8
check "odd dim" pe-gen --len 7 --dim 9 -o odd.h5
same odd.h5 "$G/pe_sinusoidal.h5:n7_d9_odd" 3e-8
check "base and offset" pe-gen --len 6 --dim 8 --base 500 --offset 5 -o bo.h5
same bo.h5 "$G/pe_sinusoidal.h5:n6_d8_base500_offset5" 3e-8
check "concat layout" pe-gen --len 5 --dim 7 --layout concat -o cat.h5
same cat.h5 "$G/pe_sinusoidal.h5:n5_d7_concat" 3e-8
check "float64 output" pe-gen --len 50 --dim 64 --dtype f64 -o pe64.h5
same pe64.h5 "$G/pe_sinusoidal.h5:n50_d64" 1e-14
h5dump -H pe64.h5 | grep -q H5T_IEEE_F64LE && pass || fail "--dtype f64 writes float64"
[ "$(shape pe.h5 pe)" = "50, 64" ] && pass || fail "table shape $(shape pe.h5 pe)"

check "--add with offset" pe-gen --add "$G/pe_sinusoidal.h5:add_x" --offset 3 -o add.h5
same add.h5:output "$G/pe_sinusoidal.h5:add_expected_offset3" 0 1e-7
[ "$(shape add.h5 output)" = "2, 5, 6" ] && pass || fail "--add keeps (b, n, d)"

# --- pipes ---
tensor-gen --shape 4,6 --fill zeros -o - | pe-gen --add - --offset 4 -o piped.h5 2>err.txt && pass || fail "pipe: $(cat err.txt)"
pe-gen --len 4 --dim 6 --offset 4 -o direct.h5
same piped.h5 direct.h5
[ "$(shape piped.h5 output)" = "4, 6" ] && pass || fail "2-D in, 2-D out"
pe-gen --len 4 --dim 6 -o - | pe-gen --add - --offset 4 -o - | pe-gen --add - --offset 8 -o chain.h5 2>err.txt && pass || fail "three-stage pipe: $(cat err.txt)"

# several '-' arguments naming datasets of one standard input
tensor-gen --shape 3,4 --fill ones -o both.h5:x
tensor-gen --shape 5,4 --fill arange -o both.h5:t
cat both.h5 | pe-gen --kind learned --table -:t --add -:x --offset 1 -o learned.h5 2>err.txt && pass || fail "two '-' inputs: $(cat err.txt)"
tensor-gen --shape 3,4 --from-text <(seq 5 16) -o want.h5
same learned.h5 want.h5
check "learned slice" pe-gen --kind learned --table both.h5:t --offset 2 -o slice.h5
[ "$(shape slice.h5 pe)" = "3, 4" ] && pass || fail "learned --len defaults to the rest of the table"

# --- RoPE against GPT-NeoX rotate-half and the LLaMA complex form (float64 references) ---
check "rope half" pe-gen --kind rope --apply "$G/rope.h5:x" --heads 2 -o rh.h5
same rh.h5 "$G/rope.h5:half_h2" 1e-6
check "rope interleaved" pe-gen --kind rope --apply "$G/rope.h5:x" --heads 4 --rope-style interleaved --offset 7 -o ri.h5
same ri.h5 "$G/rope.h5:interleaved_h4_offset7" 1e-6
check "rope base, offset, f64" pe-gen --kind rope --apply "$G/rope.h5:x" --base 500 --offset 3 --dtype f64 -o rb.h5
same rb.h5 "$G/rope.h5:half_h1_offset3_base500" 1e-13
check "rope tables" pe-gen --kind rope --len 6 --dim 8 --offset 2 -o rt.h5
same rt.h5 "$G/rope.h5:cos_n6_dh8_offset2" 6e-8
same rt.h5:sin "$G/rope.h5:sin_n6_dh8_offset2" 6e-8
[ "$(attr rt.h5 default)" = "cos" ] && pass || fail "rope tables default to /cos"

# --- ALiBi against the authors' get_slopes ---
check "alibi" pe-gen --kind alibi --heads 5 --len 3 --len-k 6 -o al.h5
same al.h5 "$G/alibi.h5:bias_h5_n3_m6" 1e-7
check "alibi power of two" pe-gen --kind alibi --heads 8 --len 4 --dtype f64 -o al8.h5
same al8.h5 "$G/alibi.h5:bias_h8_n4_m4"
[ "$(shape al.h5 bias)" = "1, 5, 3, 6" ] && pass || fail "alibi shape"

# --- T5's relative bias: the bucket rule against transformers' _relative_position_bucket in
# PyTorch (seq2seq.h5 from tests/golden/make_seq2seq_goldens.py) for j - i over 300 positions: the
# exact buckets, the logarithmic ones, past max_distance, both signs and both directions ---
S="$G/seq2seq.h5"
for c in "32 128 bidirectional bi" "32 128 causal causal" "8 10 bidirectional bi" "8 10 causal causal" \
  "16 64 bidirectional bi" "16 64 causal causal" "6 20 bidirectional bi" "6 20 causal causal"; do
  set -- $c
  check "relative buckets $*" pe-gen --kind relative --len 300 --buckets "$1" --max-distance "$2" --direction "$3" -o b.h5
  same b.h5:buckets "$S:/relative/buckets_$1_$2_$4" 0 0
done
[ "$(shape b.h5 buckets)" = "300, 300" ] && pass || fail "buckets shape $(shape b.h5 buckets)"
check "relative bias from a table" pe-gen --kind relative --table "$S:/relative/table" --len 5 --len-k 7 --max-distance 10 -o rb.h5
same rb.h5:bias "$S:/relative/bias" 0 0
[ "$(shape rb.h5 bias)" = "1, 3, 5, 7" ] && pass || fail "relative bias shape"
# an additive --attn-mask of three heads, and a picture
tensor-gen --shape 1,5,6 --seed 3 -o x.h5
check "relative bias (n = m)" pe-gen --kind relative --table "$S:/relative/table" --len 5 --max-distance 10 -o rb5.h5
check "mha-run with it" mha-run -q x.h5 --init xavier --embed-dim 6 --heads 3 --seed 1 --attn-mask rb5.h5:bias --need-weights -o mr.h5
check "mha-run without it" mha-run -q x.h5 --init xavier --embed-dim 6 --heads 3 --seed 1 --need-weights -o mr0.h5
h5cmp mr.h5:weights mr0.h5:weights 1e-3 >/dev/null 2>&1 && fail "the relative bias changed no weight" || pass
check "attn-view of it" attn-view rb5.h5:bias --index 0,1 --png rb.png
expect_fail 1 "a relative bias table (buckets, heads)" pe-gen --kind relative --table "$S:/relative/bias" --len 3 -o o.h5
expect_fail 1 "--heads 4 but the table" pe-gen --kind relative --table "$S:/relative/table" --heads 4 --len 3 -o o.h5
expect_fail 1 "--buckets 16 but the table" pe-gen --kind relative --table "$S:/relative/table" --buckets 16 --len 3 -o o.h5
expect_fail 1 "3 relative buckets (bidirectional) leave fewer than 2 per direction" pe-gen --kind relative --buckets 3 --len 3 -o o.h5
expect_fail 1 "max_distance 4 must exceed the 4 exact distances" pe-gen --kind relative --buckets 16 --max-distance 4 --len 3 -o o.h5
expect_fail 2 "--kind relative without --table needs --buckets" pe-gen --kind relative --len 3 -o o.h5
expect_fail 2 "--dim does not apply to --kind relative" pe-gen --kind relative --buckets 8 --len 3 --dim 4 -o o.h5
expect_fail 2 "--max-distance does not apply to --kind alibi" pe-gen --kind alibi --heads 2 --len 2 --max-distance 9 -o o.h5

# --- provenance and -o FILE:NAME ---
[ "$(attr pe.h5 creator)" = "pe-gen 0.1.0" ] && pass || fail "creator: $(attr pe.h5 creator)"
[ "$(attr pe.h5 command)" = "pe-gen --len 50 --dim 64 -o pe.h5" ] && pass || fail "command: $(attr pe.h5 command)"
[ "$(attr pe.h5 default)" = "pe" ] && pass || fail "default"
check "write beside" pe-gen --len 3 --dim 4 -o pe.h5:/exp1/table
h5ls -r pe.h5 | grep -q "^/pe " && h5ls -r pe.h5 | grep -q "^/exp1/table " && pass || fail "-o FILE:NAME keeps the other datasets"
[ "$(attr pe.h5 default)" = "exp1" ] && [ "$(attr pe.h5 exp1/default)" = "table" ] && pass || fail "default chain to /exp1/table"
check "rope tables beside NAME" pe-gen --kind rope --len 2 --dim 4 -o pe.h5:/r/c
h5ls -r pe.h5 | grep -q "^/r/sin " && pass || fail "further outputs beside NAME"
pe-gen --add pe.h5 -o unnamed.h5 2>err.txt; grep -q "Dataset\|error" err.txt; [ "$(shape unnamed.h5 output)" = "2, 2" ] && pass || fail "unnamed input resolves through the root default: $(cat err.txt)"

# --- bad input: exit status, one line, nothing written, inputs unchanged ---
cp "$G/h5py_inputs.h5" in.h5
head -c 3000 "$G/h5py_inputs.h5" >trunc.h5
echo "not hdf5" >text.h5
expect_fail 1 "missing.h5: no such file" pe-gen --add missing.h5 -o o.h5
expect_fail 1 "text.h5: not an HDF5 file" pe-gen --add text.h5 -o o.h5
expect_fail 1 "trunc.h5" pe-gen --add trunc.h5:f32 -o o.h5
expect_fail 1 "no dataset or group '/nope' (datasets: /bool" pe-gen --add in.h5:nope -o o.h5
expect_fail 1 "holds several datasets and no root 'default'" pe-gen --add "$G/h5py_ambiguous.h5" -o o.h5
expect_fail 1 "got shape (1, 1, 1, 1, 2)" pe-gen --add in.h5:rank5 -o o.h5
expect_fail 1 "in.h5:/i32: holds int32 data; expected a float tensor" pe-gen --add in.h5:i32 -o o.h5
expect_fail 1 "in.h5:/nan: NaN at index [1, 0]" pe-gen --add in.h5:nan -o o.h5
expect_fail 1 "has a dimension of size 0" pe-gen --add in.h5:empty -o o.h5
expect_fail 1 "holds string data" pe-gen --add in.h5:string -o o.h5
expect_fail 2 "--len: must be positive, got 0" pe-gen --len 0 --dim 4 -o o.h5
expect_fail 2 "--dim: must be positive, got -3" pe-gen --len 2 --dim -3 -o o.h5
expect_fail 2 "--kind rope needs an even --dim (got 5)" pe-gen --kind rope --len 2 --dim 5 -o o.h5
expect_fail 1 "--heads 3 does not divide the 16 features" pe-gen --kind rope --apply "$G/rope.h5:x" --heads 3 -o o.h5
expect_fail 1 "RoPE needs an even head size" pe-gen --kind rope --apply "$G/rope.h5:x" --heads 16 -o o.h5
expect_fail 2 "--dim does not apply to --kind alibi" pe-gen --kind alibi --heads 2 --len 2 --dim 4 -o o.h5
expect_fail 2 "--kind sinusoidal without --add needs --len" pe-gen --dim 4 -o o.h5
expect_fail 2 "--kind learned needs --table" pe-gen --kind learned -o o.h5
expect_fail 2 "--kind: " pe-gen --kind cosine --len 2 --dim 2 -o o.h5
expect_fail 1 "no such directory 'nodir'" pe-gen --len 2 --dim 2 -o nodir/o.h5
expect_fail 2 "names the input" pe-gen --add in.h5:f32 -o in.h5
expect_fail 2 "names the input" pe-gen --add in.h5:f32 -o ./in.h5:/new
expect_fail 1 "--offset 3: 4 positions from it are outside the 5 rows of the learned table both.h5:/t" pe-gen --kind learned --table both.h5:t --len 4 --offset 3 -o o.h5
expect_fail 1 "--len 9 but" pe-gen --add in.h5:f32 --len 9 -o o.h5
expect_fail 1 "exists and is not an HDF5 file" pe-gen --len 2 --dim 2 -o text.h5:/x
expect_fail_stdin 1 "standard input is empty" /dev/null pe-gen --add - -o o.h5
expect_fail_stdin 1 "standard input is not an HDF5 file" text.h5 pe-gen --add - -o o.h5

# HDF5 to a terminal: refused with status 2 (script(1) gives the tool a terminal).
script -qec "$TOOLS/pe-gen --len 2 --dim 2" /dev/null >tty.txt 2>&1
status=$?
[ "$status" -eq 2 ] && grep -q "refusing to write HDF5 to a terminal" tty.txt && pass || fail "terminal: status $status, $(cat tty.txt)"

# An existing device or FIFO is written into, never renamed over (that once replaced /dev/null
# with a regular file).
check "-o /dev/null" pe-gen --len 3 --dim 4 -o /dev/null
[ -c /dev/null ] && pass || fail "/dev/null is no longer a character device: $(ls -l /dev/null)"
mkfifo fifo
timeout 20 cat fifo >from_fifo.h5 &
check "-o FIFO" pe-gen --len 3 --dim 4 -o fifo
wait
[ -p fifo ] && pass || fail "the FIFO was replaced: $(ls -l fifo)"
pe-gen --len 3 --dim 4 -o small.h5
same from_fifo.h5 small.h5
rm -f fifo

# Nothing may stay behind in the staging directory of standard output.
[ -z "$(ls -A tmp)" ] && pass || fail "temporary files left: $(ls -A tmp)"

# SIGINT and SIGTERM during a long run leave neither the output nor a temporary file. Job control
# on, so that the background run does not start with SIGINT ignored; the signal comes once the
# temporary output exists.
set -m
for sig in INT TERM; do
  pe-gen --len 1000000 --dim 256 -o big.h5 2>/dev/null &
  pid=$!
  for _ in $(seq 200); do ls -A | grep -q '^\.big\.h5\..*\.tmp$' && break; sleep 0.02; done
  kill -$sig $pid
  wait $pid
  status=$?
  [ $status -ne 0 ] && [ ! -e big.h5 ] && [ -z "$(ls -A | grep '\.tmp$')" ] && pass || fail "SIG$sig: status $status, left: $(ls -A | tr '\n' ' ')"
done


# positions near 2^63 (issue 16 scan): offset + p overflowed int64 (undefined; UBSan in CI); then
# float64 gave four identical rows (issue 52): positions past 2^53 are a usage error; up to 2^53 the
# rows differ
for kind in sinusoidal rope; do
  expect_fail 2 "--offset 9223372036854775807: positions up to" \
    pe-gen --kind $kind --len 4 --dim 8 --offset 9223372036854775807 -o big_$kind.h5
  check "$kind ending at 2^53" pe-gen --kind $kind --len 4 --dim 8 --offset 9007199254740989 -o big_$kind.h5
  attn-view "big_$kind.h5" --stats >stats.txt 2>&1 && grep -Eq "\((32|16) finite\)" stats.txt && pass ||
    fail "$kind ending at 2^53: $(cat stats.txt)"
done
# the last two rows (positions 2^53 - 1 and 2^53) differ: float64 still tells them apart
row() { h5dump -d /pe big_sinusoidal.h5 | sed -n "s/^ *($1,0): //p"; }
[ -n "$(row 2)" ] && [ "$(row 2)" != "$(row 3)" ] && pass || fail "rows at 2^53 - 1 and 2^53 are the same: $(row 2)"

finish
