#!/usr/bin/env bash
# Formats the tracked C and C++ sources in place with clang-format (package
# clang-format, scripts/deps.sh): C++ by the nearest .clang-format (the root's,
# Google-based), kernel C by bpf/.clang-format (bpf/ and include/ find it
# themselves; .c files elsewhere, as in bench/ and tests/kernel/, are given it).
#   scripts/format.sh          reformat
#   scripts/format.sh --check  change nothing; list the files that would change, fail if any
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[[ ${1:-} == --check ]] && check=1
cpp=() c=()
while IFS= read -r f; do
	[[ -f $f && ! -L $f ]] || continue
	case $f in
	bpf/* | include/* | *.c) c+=("$f") ;;
	*) cpp+=("$f") ;;
	esac
done < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp')

# format STYLE FILES...
format() {
	local style=$1
	shift
	(($#)) || return 0
	if ((check)); then
		clang-format --dry-run --style="$style" "$@" 2>&1 |
			sed -nE 's/^([^ :]+):[0-9]+:[0-9]+: (warning|error): .*/\1/p' | sort -u
	else
		clang-format -i --style="$style" "$@"
	fi
}
out=$(format file "${cpp[@]}"; format file:bpf/.clang-format "${c[@]}")
if ((check)) && [[ -n $out ]]; then
	echo "$out"
	echo "format.sh: $(wc -l <<< "$out") files differ from .clang-format: run scripts/format.sh" >&2
	exit 1
fi
