# SPDX-License-Identifier: GPL-2.0
# Sourced by the shell tests: one line per check, a failure count, and the
# bad-input contract (one line naming the problem, a non-zero exit).
# The sourcing script sets $tmp (a scratch directory) first.
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
stat_of() { grep "^$1:" "$2" | awk '{print $2}'; }  # stat_of FIELD stack_map_stat

expect_error() {  # expect_error KEYWORD ARGS...
  local key=$1; shift
  "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"
  local rc=$? lines
  lines=$(wc -l < "$tmp/bad.err")
  if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -qF -- "$key" "$tmp/bad.err"; then
    pass "error for '${*:2}': $(cat "$tmp/bad.err")"
  else
    fail "error for '${*:2}' (exit $rc, $lines lines, want '$key'): $(cat "$tmp/bad.err")"
  fi
}
