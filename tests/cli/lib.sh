# Shared harness of the CLI tests: sourced by tests/cli/test_*.sh, which CTest runs with TOOLS,
# TESTBIN (h5cmp), TESTDATA and SRC set. Each test runs in a fresh directory; a failed check is
# reported and counted, and the script ends with "N passed, M failed".
set -uo pipefail
: "${TOOLS:?}" "${TESTBIN:?}" "${TESTDATA:?}"
PATH="$TOOLS:$TESTBIN:$PATH"
WORK=$(mktemp -d /tmp/attn-cli-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
mkdir tmp
export TMPDIR="$WORK/tmp" # where output to standard output is staged: must be empty after every run
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() {
  failed=$((failed + 1))
  echo "FAIL: $*" >&2
}

# check DESCRIPTION CMD...: CMD must succeed.
check() {
  local what=$1
  shift
  if "$@" >out.txt 2>err.txt; then pass; else fail "$what: $(head -c 400 err.txt)"; fi
}

# state: every file under the work directory (hidden files included) with its size, inode and
# modification and change times in nanoseconds: any write, rename or touch changes it. (Not
# checksums: those read every file twice per check, half of the bad-input tests' time.)
state() { find . -path ./err.txt -prune -o -path ./state.txt -prune -o -path ./out.txt -prune -o -type f -printf '%p %s %i %T@ %C@\n' | sort; }

# one_error_line SUBSTRING: err.txt is one "TOOL: error: ..." line containing SUBSTRING (bash
# builtins only: this runs for every failing command of the suite).
one_error_line() {
  local lines
  mapfile -t lines <err.txt
  [ "${#lines[@]}" -eq 1 ] && [[ "${lines[0]}" =~ ^[a-z-]*:\ error:\  ]] && [[ "${lines[0]}" == *"$1"* ]]
}

# expect_fail STATUS SUBSTRING CMD...: CMD must exit with STATUS, print exactly one line on standard
# error (starting with "TOOL: error: " and containing SUBSTRING), and leave every file as it was:
# no output, no temporary file, no input changed.
expect_fail() {
  local status=$1 substring=$2
  shift 2
  local before
  before=$(state)
  "$@" >/dev/null 2>err.txt </dev/null
  local got=$?
  if [ "$got" -ne "$status" ]; then
    fail "'$*': exit $got, expected $status: $(cat err.txt)"
  elif ! one_error_line ""; then
    fail "'$*': expected one 'TOOL: error:' line, got: $(cat err.txt)"
  elif ! one_error_line "$substring"; then
    fail "'$*': message lacks '$substring': $(cat err.txt)"
  elif [ "$(state)" != "$before" ]; then
    fail "'$*': files changed: $(diff <(echo "$before") <(state) | head -5)"
  else
    pass
  fi
}

# expect_fail_stdin STATUS SUBSTRING INPUT CMD...: as expect_fail with INPUT on standard input.
expect_fail_stdin() {
  local status=$1 substring=$2 input=$3
  shift 3
  local before
  before=$(state)
  "$@" >/dev/null 2>err.txt <"$input"
  local got=$?
  local lines
  mapfile -t lines <err.txt
  if [ "$got" -ne "$status" ] || [ "${#lines[@]}" -ne 1 ] || [[ "${lines[0]}" != *"$substring"* ]]; then
    fail "'$* < $input': exit $got (expected $status), stderr: $(cat err.txt)"
  elif [ "$(state)" != "$before" ]; then
    fail "'$* < $input': files changed"
  else
    pass
  fi
}

# same A B [ATOL [RTOL]]: tensors agree (h5cmp).
same() { check "h5cmp $*" h5cmp "$@"; }

# attr FILE NAME: the string attribute NAME of FILE, a path from the root ("default",
# "cases/sdp/args") (h5attr's read form, the HDF5 library's own calls, independent of lib/).
attr() {
  local object=${2%/*}
  [ "$object" = "$2" ] && object=/
  h5attr "$1" "/${object#/}" "${2##*/}"
}

# members FILE GROUP: the names of GROUP's members, one per line (golden cases, layers).
members() { h5ls "$1/$2" | awk '{print $1}'; }

# case_args FILE CASE: the arguments stored on golden case CASE ("cases/sdp") of FILE, each @ (a
# dataset of FILE) written out as FILE:.
case_args() {
  local a
  a=$(attr "$1" "$2/args")
  echo "${a//@/$1:}"
}

# golden_cases FILE TOOL DATASET...: runs every case under FILE's group cases (its `args`, @ standing
# for FILE; its `tool` attribute, else TOOL) into CASE.h5, and compares each DATASET the case holds
# (|a - b| <= 1e-5 + 1e-5 |b|). A DATASET the case lacks must not be written.
golden_cases() {
  local file=$1 default_tool=$2 c tool args ds
  shift 2
  for c in $(members "$file" cases); do
    tool=$(attr "$file" "cases/$c/tool" 2>/dev/null)
    args=$(case_args "$file" "cases/$c")
    # shellcheck disable=SC2086
    if ${tool:-$default_tool} $args -o "$c.h5" 2>err.txt; then pass; else
      fail "$c: ${tool:-$default_tool} $args: $(cat err.txt)"
      continue
    fi
    for ds in "$@"; do
      if h5ls "$file/cases/$c/$ds" >/dev/null 2>&1; then
        same "$c.h5:$ds" "$file:/cases/$c/$ds" 1e-5 1e-5
      elif h5ls "$c.h5/$ds" >/dev/null 2>&1; then
        fail "$c: wrote /$ds, which was not asked for"
      fi
    done
  done
}

# values FILE DATASET: the dataset's values as h5dump prints them, for byte-identity checks
# (cmp -s <(values a.h5 output) <(values b.h5 output)).
values() { h5dump -d "/$2" "$1" | tail -n +2; }

# numbers FILE DATASET: the dataset's values one per line, with 9 significant digits (h5dump).
numbers() {
  local txt
  txt=$(mktemp)
  h5dump -d "/$2" -y -m %.9g -o "$txt" "$1" >/dev/null && tr -s ' ,\n' '\n' <"$txt" | grep .
  rm -f "$txt"
}

# rms_diff FILE_A DATASET_A FILE_B DATASET_B: the root mean square of a - b over the elements.
rms_diff() {
  paste <(numbers "$1" "$2") <(numbers "$3" "$4") | awk '{d = $1 - $2; s += d * d} END {printf "%.9g\n", sqrt(s / NR)}'
}

# close A B: |a - b| <= 1e-5 * max|B| (h5cmp's scale-relative mode): float32 compute against a float64
# reference where the rounding of sums grows with the tensor's scale. Each test says why it fits.
close() { same "$1" "$2" 0 1e-5 max; }

# shape FILE DATASET: "2, 3" (h5ls, independent of lib/).
shape() { h5ls "$1/$2" | sed -n 's/.*Dataset {\(.*\)}.*/\1/p' | sed 's|/.*||'; }

finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
