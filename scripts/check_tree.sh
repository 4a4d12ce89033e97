#!/usr/bin/env bash
# The tree's own rules, for CI (ctest `tree`): only the project's files at the
# root (run outputs and scratch files go under /tmp), no source file of the
# daemon past ~400 lines, no implementation header (a long header that one
# .cpp alone includes), and no comment pointing at an issue number (code says
# why itself; the issue tracker is not part of the tree).
# Usage: scripts/check_tree.sh [SOURCE_DIR]; prints each breach, exit 1 if any.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

root_allowed=" .ci .clang-format .gitignore BENCHMARKS.md CMakeLists.txt README.md bench bpf cmake cmd daemon docs include packaging scripts tests "
max_lines=420
impl_header_lines=150

# What the project holds: tracked files in a clone, else every file but builds.
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  files() { git ls-files --cached --others --exclude-standard; }
else
  files() { find . -type f -not -path './build*' -not -path './.git/*' | sed 's|^\./||'; }
fi

fail=0
while read -r entry; do
  case "$root_allowed" in
    *" $entry "*) ;;
    *) echo "tree: '$entry' at the root is not one of the project's folders or files;" \
         "move it under /tmp (scratch) or into a folder (root holds:$root_allowed)"; fail=1 ;;
  esac
done < <(files | cut -d/ -f1 | sort -u)

while read -r f; do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$max_lines" ]; then
    echo "tree: $f has $n lines, past $max_lines: split it by job"
    fail=1
  fi
done < <(files | grep -E '^(daemon|cmd|bpf|include)/.*\.(c|h|cpp)$')

# A header's includers: "FILE:LINE" of each #include naming it from the root,
# from include/, or beside FILE.
includes=$(files | grep -E '\.(c|h|cpp)$' | xargs grep -HnE '^\s*#\s*include\s+"' 2> /dev/null || true)
while read -r h; do
  n=$(wc -l < "$h")
  [ "$n" -gt "$impl_header_lines" ] || continue
  users=$(awk -F: -v h="$h" '{ split($0, q, "\""); d = $1; sub(/[^\/]*$/, "", d)
    if (q[2] == h || "include/" q[2] == h || d q[2] == h) print $1 ":" $2 }' <<< "$includes")
  if [ -n "$users" ] && [ "$(wc -l <<< "$users")" -eq 1 ] && [[ $users == *.cpp:* ]]; then
    echo "tree: $h:1: $n lines that only $users includes: an implementation header;" \
      "move its code into a .cpp, leaving in a header only what ${users%%:*} uses"
    fail=1
  fi
done < <(files | grep -E '^(daemon|cmd|bpf|include)/.*\.h$')

while read -r hit; do
  echo "tree: $hit: a comment names an issue number; say what the code does and why instead"
  fail=1
done < <(files | grep -E '(\.(c|h|cpp|sh|py|cmake)|CMakeLists\.txt)$' | grep -v '^bench/results/' |
  xargs grep -nE '(#|//|/\*|\*|""").*\b[Ii]ssues? [0-9]+' 2> /dev/null || true)

exit $fail
