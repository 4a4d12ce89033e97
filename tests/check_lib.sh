# SPDX-License-Identifier: GPL-2.0
# Sourced by the shell tests: one line per check, a failure count, and the
# bad-input contract (one line naming the problem, a non-zero exit).
# The sourcing script sets $tmp (a scratch directory) first.
#
#   check "what is checked" 'CONDITION'
#
# CONDITION is ONE string, evaluated as a whole when check runs (so
# '[ a ] && [ b ]' asserts both, and pipes, redirections and here-strings
# belong to it). Anything else is refused as a failure: the old form
# `check "…" [ a ] && [ b ]` asserted only [ a ] (the shell ran [ b ] after
# check, and nobody looked at its result). Put values that must be taken
# before the check (such as $?) in a variable first; so too a caller's $1, $2...:
# inside CONDITION they are check's own.
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
check() {  # check DESCRIPTION 'CONDITION'
  if [ $# -ne 2 ]; then
    fail "${1:-check} (check takes the condition as one quoted string, got $(($# - 1)) words: ${*:2})"
    return 0
  fi
  if eval "$2"; then pass "$1"; else fail "$1 (false: $2)"; fi
  return 0
}
stat_of() { grep "^$1:" "$2" | awk '{print $2}'; }  # stat_of FIELD stack_map_stat
# The events the exports count: hits, and the table's drops sent whole
# (a slot another CPU was writing: its stack counts under its table id).
counted_of() { echo $(( $(stat_of hits "$1") + $(stat_of sent_whole "$1") )); }

# A check whose condition is ANDed or ORed outside its quotes, as in
#   check "x" '[ a ]' && [ b ]
# still asserts only [ a ]. check_lint FILE counts every such line as a failure
# (quoted text is removed first, so && inside the condition is fine).
check_lint() {
  local n
  for n in $(awk '
    # one logical line (backslash continuations joined), quoted text removed
    { line = (cont ? line " " : "") $0; start = cont ? start : NR
      if (sub(/\\$/, "", line)) { cont = 1; next }
      cont = 0; out = ""; q = ""
      for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (q == "" && c == "\\") { i++; continue }
        if (q == "\"" && c == "\\") { i++; continue }
        if (q == "" && (c == "\"" || c == "\047")) { q = c; continue }
        if (q != "" && c == q) { q = ""; continue }
        if (q == "") out = out c
      }
      if (out ~ /^[ \t]*check[ \t]/ && out ~ /&&|\|\|/) print start }' "$1"); do
    fail "$(basename "$1"):$n: && or || after a check asserts nothing: put it inside the condition"
  done
}
if [ -f "$0" ]; then check_lint "$0"; fi  # the sourcing script

expect_error() {  # expect_error PROBLEM_TEXT COMMAND ARGS...
  # PROBLEM_TEXT must be words of the message itself: not found in the command
  # line (an error that echoes the file name 'short.bin' would match 'short'
  # whatever it said).
  local key=$1; shift
  if [[ "$*" == *"$key"* ]]; then
    fail "expect_error '$key' is part of the command line ($*): match the problem text instead"
    return 0
  fi
  "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"
  local rc=$? lines
  lines=$(wc -l < "$tmp/bad.err")
  if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -qF -- "$key" "$tmp/bad.err"; then
    pass "error for '${*:2}': $(cat "$tmp/bad.err")"
  else
    fail "error for '${*:2}' (exit $rc, $lines lines, want '$key'): $(cat "$tmp/bad.err")"
  fi
}

# wait_tracing ERR_FILE WHAT: until stackmapd's log ERR_FILE says it is
# tracing (30 s at most); a failure names WHAT and the log.
wait_tracing() {
  for _ in $(seq 600); do
    grep -q "tracing " "$1" 2> /dev/null && return 0
    sleep 0.05
  done
  fail "stackmapd $2 never said it was tracing: $(cat "$1")"
}

http_code() { curl -s -o /dev/null --max-time 10 -w '%{http_code}' "$@"; }
# wait_http PID URL: until the daemon PID serves URL/metrics (10 s at most) or exits.
wait_http() {
  for _ in $(seq 100); do
    kill -0 "$1" 2> /dev/null || return 0
    [ "$(http_code --max-time 1 "$2/metrics")" = 200 ] && return 0
    sleep 0.1
  done
}

# start_workload NAME ARGS...: "$WORKLOAD" --go (tests/workloads/attr_workload.c),
# blocked until SIGUSR1; sets $wpid. The caller defines track PID and sets $WORKLOAD.
# It is ready when it sleeps in rt_sigtimedwait (x86_64 syscall 128).
start_workload() {
  local name=$1
  shift
  "$WORKLOAD" --go "$tmp/$name.ready" "$@" 2> "$tmp/$name.err" &
  wpid=$!
  track $wpid
  for _ in $(seq 200); do
    [ "$(cut -d' ' -f1 "/proc/$wpid/syscall" 2> /dev/null)" = 128 ] && return 0
    sleep 0.05
  done
  fail "workload $name ($*) never waited for its go signal: $(cat "$tmp/$name.err")"
  return 1
}
# raw_total FILE [INDEX]: the sum of one value (0: the first) over every
# sample of a pprof profile, as $PPROF -raw prints them.
raw_total() {
  "$PPROF" -raw "$1" 2> /dev/null |
    awk -v i="${2:-0}" '/^Samples:/ {s = 1; next} /^Locations/ {s = 0}
      s && /^ *[0-9]+( +[0-9]+)*: / {sub(/:.*/, ""); split($0, v, " "); t += v[i + 1]} END {printf "%.0f\n", t}'
}
