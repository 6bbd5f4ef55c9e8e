#!/usr/bin/env bash
# Every tool has a man page with the common sections, groff renders it without warnings, and every
# option its --help shows appears in the page (so the two cannot drift apart).
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
  for opt in $("$exe" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    escaped=${opt//-/\\\\-}
    grep -q -- "$escaped" "$page" && pass || fail "$tool.1 does not document $opt"
  done
done

finish
