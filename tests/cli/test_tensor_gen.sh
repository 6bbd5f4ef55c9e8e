#!/usr/bin/env bash
# tensor-gen through its command line: fills, seeds, dtypes, text import, bad input.
source "$(dirname "$0")/lib.sh"

check "normal" tensor-gen --shape 2,16,64 --seed 7 -o a.h5
check "same seed" tensor-gen --shape 2,16,64 --seed 7 -o b.h5
check "other seed" tensor-gen --shape 2,16,64 --seed 8 -o c.h5
cmp -s <(values a.h5 data) <(values b.h5 data) && pass || fail "same seed, same bytes"
same a.h5 b.h5
h5cmp a.h5 c.h5 2>/dev/null && fail "another seed gives other numbers" || pass
[ "$(shape a.h5 data)" = "2, 16, 64" ] && pass || fail "shape"
[ "$(attr a.h5 default)" = "data" ] && [ "$(attr a.h5 creator)" = "tensor-gen 0.1.0" ] && pass || fail "attributes"
[ "$(attr a.h5 command)" = "tensor-gen --shape 2,16,64 --seed 7 -o a.h5" ] && pass || fail "command attribute"

check "arange f64" tensor-gen --shape 2,3 --fill arange --dtype f64 -o ar.h5
h5dump -H ar.h5 | grep -q H5T_IEEE_F64LE && pass || fail "f64 type"
tensor-gen --shape 6 --from-text <(echo 0 1 2 3 4 5) -o want.h5
tensor-gen --shape 2,3 --from-text <(echo 0 1 2; echo 3 4 5) -o want2.h5
check "arange equals 0..n-1" h5cmp "ar.h5" "want2.h5"
check "ids" tensor-gen --shape 20,10 --fill uniform --low 3 --high 9 --dtype i64 --seed 1 -o ids.h5
h5dump -H ids.h5 | grep -q H5T_STD_I64LE && pass || fail "i64 type"
vals=$(h5dump -d /data -y -w 0 ids.h5 | sed -n '/DATA {/,/}/p' | tr -c '0-9\n' ' ' | tr ' ' '\n' | grep -v '^$' | sort -un | tr '\n' ' ')
[ "$vals" = "3 4 5 6 7 8 " ] && pass || fail "uniform ids in [3, 9): $vals"
check "zeros, ones" tensor-gen --shape 3 --fill ones -o ones.h5
tensor-gen --shape 3 --from-text <(echo 1 1 1) -o ones_t.h5
same ones.h5 ones_t.h5
check "uniform bounds" tensor-gen --shape 1000 --fill uniform --low -2 --high -1 -o u.h5
h5dump -d /data u.h5 | grep -q -- "-0\.\|[^-]0\." && fail "uniform in [-2, -1)" || pass
echo "1.5 2.5" | tensor-gen --shape 2 --from-text - -o t.h5 2>err.txt && pass || fail "text from stdin: $(cat err.txt)"
echo "1.5 2.5" >two.txt
tensor-gen --shape 2 --from-text two.txt -o t2.h5 && same t.h5 t2.h5
echo "1 2 3" | tensor-gen --shape 3 --from-text - --dtype i64 -o - | tensor-gen --shape 1 -o /dev/null 2>err.txt; pass
tensor-gen --shape 2,3 --seed 3 -o - >piped.h5 && tensor-gen --shape 2,3 --seed 3 -o file.h5 && same piped.h5 file.h5

# --- bad input ---
echo "1 2 x" >bad.txt
echo "1 2 3" >three.txt
echo "1 nan" >nan.txt
echo "1 2.5" >frac.txt
expect_fail 2 "--shape: must be positive, got 0" tensor-gen --shape 2,0 -o o.h5
expect_fail 2 "--shape: must be positive, got -4" tensor-gen --shape -4 -o o.h5
expect_fail 2 "more elements than fit in 64 bits" tensor-gen --shape 100000000000,100000000000 -o o.h5
expect_fail 1 "GiB of memory is available" tensor-gen --shape 100000,100000,1000 -o o.h5
expect_fail 2 "--shape is required" tensor-gen -o o.h5
expect_fail 2 "--fill: " tensor-gen --shape 2 --fill gaussian -o o.h5
expect_fail 2 "excludes" tensor-gen --shape 2 --fill ones --from-text three.txt -o o.h5
expect_fail 2 "--dtype: " tensor-gen --shape 2 --dtype f8 -o o.h5
echo "1 1e400" >huge.txt
expect_fail 1 "huge.txt: token 2 '1e400' is not a number" tensor-gen --shape 2 --from-text huge.txt -o o.h5
# underflow is not an error: a subnormal, or 0, correctly rounded
echo "4.9406564584124654e-324 1e-400" >tiny.txt
check "subnormal text" tensor-gen --shape 2 --from-text tiny.txt --dtype f64 -o tiny.h5
[ "$(numbers tiny.h5 data | tr "\n" " ")" = "4.94065646e-324 0 " ] && pass || fail "subnormal: $(numbers tiny.h5 data)"
expect_fail 2 "--fill normal cannot make integers" tensor-gen --shape 2 --dtype i64 -o o.h5
expect_fail 2 "--high must be greater than --low" tensor-gen --shape 2 --fill uniform --low 1 --high 1 -o o.h5
expect_fail 1 "bad.txt: token 3 'x' is not a number" tensor-gen --shape 3 --from-text bad.txt -o o.h5
expect_fail 1 "three.txt: holds 3 numbers; --shape (2, 2) needs 4" tensor-gen --shape 2,2 --from-text three.txt -o o.h5
expect_fail 1 "nan.txt: NaN at index [1]" tensor-gen --shape 2 --from-text nan.txt -o o.h5
check "--allow-nonfinite" tensor-gen --shape 2 --from-text nan.txt --allow-nonfinite -o nanok.h5
expect_fail 1 "frac.txt: token 2 '2.5' is not a 64-bit integer" tensor-gen --shape 2 --from-text frac.txt --dtype i64 -o o.h5
expect_fail 1 "missing.txt: cannot open" tensor-gen --shape 2 --from-text missing.txt -o o.h5
expect_fail 1 "no such directory" tensor-gen --shape 2 -o no/dir/o.h5
expect_fail 2 "names the input" tensor-gen --shape 3 --from-text three.txt -o three.txt
expect_fail 2 "not expected: --bogus" tensor-gen --shape 2 --bogus -o o.h5
[ -z "$(ls -A tmp)" ] && pass || fail "temporary files left: $(ls -A tmp)"

check "--help" tensor-gen --help
[ "$(tensor-gen --version | head -1)" = "tensor-gen 0.1.0" ] && pass || fail "--version: $(tensor-gen --version)"

finish
