#!/usr/bin/env bash
# Bash completion (completions/attn-toolkit.bash): sourced, its function completes every option
# each tool's --help shows, the choices of enumerated options, file names where options take
# files (and attn-view's positional tensor), and nothing for numbers.
source "$(dirname "$0")/lib.sh"
: "${SRC:?}"
# shellcheck disable=SC1091
source "$SRC/completions/attn-toolkit.bash"

# comp WORD...: completes the last word of the command line WORD... ; prints the candidates sorted.
comp() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _attn_toolkit "$1" 2>/dev/null
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}

for tool in tensor-gen pe-gen attn-score mha-run encode decode attn-view quantize tokenize detokenize attn-rollout; do
  complete -p "$tool" 2>/dev/null | grep -q "_attn_toolkit" && pass || fail "no completion registered for $tool"
  all=" $(comp "$tool" --) "
  for opt in $("$tool" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    [[ $all == *" $opt "* ]] && pass || fail "$tool: '--' does not offer $opt"
  done
done
[ "$(comp encode --act)" = "--activation" ] && pass || fail "prefix: $(comp encode --act)"
[ "$(comp encode --activation '')" = "geglu geglu_tanh gelu gelu_tanh glu relu silu swiglu" ] && [ "$(comp encode --norm '')" = "layer_norm rms_norm" ] && pass || fail "choices: $(comp encode --activation ''); $(comp encode --norm '')"
[ "$(comp encode --activation gelu_)" = "gelu_tanh" ] && pass || fail "choice prefix"
[ "$(comp attn-view --color '')" = "always auto never" ] && pass || fail "attn-view --color"
[ "$(comp attn-score --score '')" = "additive dot general location location-aware scaled-dot" ] && pass || fail "attn-score --score"
[ "$(comp pe-gen --kind r)" = "relative rope" ] && pass || fail "pe-gen --kind r"
touch wa.h5 wb.h5 labels.txt
mkdir weights.d
[ "$(comp mha-run --weights w)" = "wa.h5 wb.h5 weights.d" ] && pass || fail "files: $(comp mha-run --weights w)"
[ "$(comp attn-score -q w)" = "wa.h5 wb.h5 weights.d" ] && pass || fail "short option files: $(comp attn-score -q w)"
[ "$(comp attn-view w)" = "wa.h5 wb.h5 weights.d" ] && pass || fail "attn-view positional: $(comp attn-view w)"
[ "$(comp attn-view x.h5 --labels-x l)" = "labels.txt" ] && pass || fail "label file"
[ -z "$(comp encode --heads '')" ] && [ -z "$(comp tensor-gen --shape '')" ] && [ -z "$(comp decode --beam 1)" ] &&
  pass || fail "numbers complete to nothing"
[ -z "$(comp encode w)" ] && pass || fail "encode has no positional: $(comp encode w)"
[ "$(comp detokenize w)" = "wa.h5 wb.h5 weights.d" ] && pass || fail "detokenize positional: $(comp detokenize w)"
[ "$(comp tokenize --tokenizer w)" = "wa.h5 wb.h5 weights.d" ] && pass || fail "tokenizer files: $(comp tokenize --tokenizer w)"
[ -z "$(comp tokenize --text '')" ] && [ -z "$(comp decode --prompt-text a)" ] && pass || fail "text completes to nothing"
finish
