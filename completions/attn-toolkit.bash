# Bash completion for the attn-toolkit tools (tensor-gen, pe-gen, attn-score, mha-run, encode,
# decode, attn-view, quantize, tokenize, detokenize, attn-rollout). The options come from each tool's own --help, read once per shell, so the
# completion cannot drift from the tools: option names; the choices of options that list them
# ("--activation TEXT:{relu,gelu,gelu_tanh}"); nothing for numbers and index lists; file names for
# every other option value (tensors PATH[:NAME], weights, PNG and label files, tokenizers) and for
# attn-view's positional tensor and detokenize's ids.
#
# Installed as share/bash-completion/completions/TOOL for each tool; or source it by hand.

# _attn_toolkit_spec TOOL: lines "NAME KIND", KIND one of flag, file, none or choices:a,b,c; one line
# per option name (-o and --output both).
_attn_toolkit_spec() {
  local tool=$1 var
  var="_attn_toolkit_spec_${tool//-/_}"
  if [[ -z ${!var-} ]]; then
    local spec
    spec=$(command "$tool" --help 2>/dev/null | sed -n 's/^  \(-[^ ]*\)\( [^ ]*\)\{0,1\}.*/\1\2/p' | awk '{
      n = split($1, names, ",")
      type = $2
      if (type == "") kind = "flag"
      else if (type ~ /{/) { sub(/^[^{]*{/, "", type); sub(/}.*$/, "", type); kind = "choices:" type }
      else if (type ~ /^(INT|UINT|FLOAT|TEXT)/ || type ~ /^[A-Z0-9]+,/) kind = "none"
      else kind = "file"
      for (i = 1; i <= n; i++) print names[i], kind
    }')
    printf -v "$var" '%s' "${spec:-none}"
  fi
  printf '%s\n' "${!var}"
}

_attn_toolkit() {
  local tool=${1##*/} cur=${COMP_WORDS[COMP_CWORD]} prev=
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  local spec kind
  spec=$(_attn_toolkit_spec "$tool")
  COMPREPLY=()
  if [[ $prev == -* ]]; then
    kind=$(awk -v o="$prev" '$1 == o { print $2; exit }' <<<"$spec")
    case $kind in
    choices:*)
      local words=${kind#choices:}
      # shellcheck disable=SC2207
      COMPREPLY=($(compgen -W "${words//,/ }" -- "$cur"))
      return 0
      ;;
    none) return 0 ;;
    file)
      # shellcheck disable=SC2207
      COMPREPLY=($(compgen -f -- "$cur"))
      compopt -o filenames 2>/dev/null
      return 0
      ;;
    esac
  fi
  if [[ $cur == -* ]]; then
    # shellcheck disable=SC2207
    COMPREPLY=($(compgen -W "$(awk '{ print $1 }' <<<"$spec")" -- "$cur"))
    return 0
  fi
  if [[ $tool == attn-view || $tool == detokenize || $tool == attn-rollout ]]; then # the positional tensor
    # shellcheck disable=SC2207
    COMPREPLY=($(compgen -f -- "$cur"))
    compopt -o filenames 2>/dev/null
  fi
  return 0
}

complete -F _attn_toolkit tensor-gen pe-gen attn-score mha-run encode decode attn-view quantize tokenize detokenize attn-rollout
