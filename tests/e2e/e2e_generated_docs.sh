#!/usr/bin/env bash
# The reference pages in docs/ are generated from the tables in the code:
# docs/configuration.md from the key table (src/config/config.hpp) by
# `vitkd keys --markdown`, docs/commands.md from the command tables
# (src/cmd/args.cpp) by `vitkd help --markdown`. Fails, with the command that
# regenerates it, when a committed page differs from what the code prints.
#   e2e_generated_docs.sh WORKDIR     (env: VITKD, SRC)
set -uo pipefail
work=$1
rm -rf "$work" && mkdir -p "$work"
fails=0
for pair in "keys:configuration.md" "help:commands.md"; do
  cmd=${pair%%:*} page=${pair#*:}
  if ! "$VITKD" "$cmd" --markdown >"$work/$page" 2>"$work/err"; then
    echo "FAIL vitkd $cmd --markdown: exit $?"; cat "$work/err"; fails=$((fails+1)); continue
  fi
  if diff -u "$SRC/docs/$page" "$work/$page" >"$work/$page.diff"; then
    echo "ok   docs/$page matches 'vitkd $cmd --markdown'"
  else
    head -40 "$work/$page.diff"
    echo "FAIL docs/$page differs from the code; regenerate it: build/vitkd $cmd --markdown > docs/$page"
    fails=$((fails+1))
  fi
done
[ "$fails" -eq 0 ]
