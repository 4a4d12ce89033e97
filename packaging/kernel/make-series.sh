#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the ftrace stack map series (packaging/kernel/000[1-9]-*.patch) as
# commits of a git tree of Debian's linux-source-6.12, under the git identity
# of whoever runs it, and writes a signed series ready to send:
#
#   packaging/kernel/make-series.sh -v 3 -o outgoing
#   git send-email --to=... outgoing/*.patch
#
# The stored patches carry no identity (no From:, no Signed-off-by:): a
# Signed-off-by certifies the Developer's Certificate of Origin, which only
# the person submitting can give. This script makes that person the author
# of every commit, adds them as M: of the MAINTAINERS entry the series
# creates, and signs off with `git format-patch -s --cover-letter`. It then
# runs the tree's scripts/checkpatch.pl --strict on each patch.
#
# Options:
#   -o DIR       output directory (default: ./outgoing)
#   -v N         reroll count: [PATCH vN n/m] (default: none)
#   --rfc        [RFC PATCH ...] instead of [PATCH ...]
#   -w DIR       git tree to (re)use (default: /var/tmp/stackmapd-series)
#   --tarball F  kernel source (default: /usr/src/linux-source-6.12.tar.xz)
#   --refresh    the reverse, for whoever edits the series: write the commits
#                base..HEAD of the -w tree back to packaging/kernel/ without
#                identity (From:, Date:, Signed-off-by: dropped); the cover
#                letter keeps its subject and text, gets a new shortlog
#
# The identity is `git config user.name` / `user.email` as seen from the
# tree (GIT_AUTHOR_NAME etc. override it); an unset one, or an address at a
# reserved domain (*.example, *.invalid, *.test, noreply), is refused.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$PWD/outgoing
WT=/var/tmp/stackmapd-series
TARBALL=/usr/src/linux-source-6.12.tar.xz
reroll=""
prefix=PATCH
refresh=0

while [ $# -gt 0 ]; do
	case "$1" in
	-o) OUT=$(realpath -m "$2"); shift ;;
	-v) reroll=$2; shift ;;
	--rfc) prefix="RFC PATCH" ;;
	-w) WT=$(realpath -m "$2"); shift ;;
	--tarball) TARBALL=$2; shift ;;
	--refresh) refresh=1 ;;
	-h|--help) sed -n '3,31p' "$0"; exit 0 ;;
	*) echo "make-series: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done

die() { echo "make-series: error: $*" >&2; exit 1; }
g() { git -C "$WT" "$@"; }

# Drops the identity: From: (and its folded line), Date:, sign-offs.
strip_identity() {
	awk '
		NR == 1 { hdr = 1 }
		hdr && /^From: / { skip = 1; next }
		hdr && skip && /^[ \t]/ { next }
		{ skip = 0 }
		hdr && /^Date: / { next }
		/^$/ { hdr = 0 }
		/^Signed-off-by: / { next }
		{ print }
	' "$1"
}

# The text of the stored cover letter: after its headers, up to its shortlog.
blurb() {
	awk 'body && /^.* \([0-9]+\):$/ { exit } body { print } /^$/ && !body { body = 1 }' "$1"
}

# Fills format-patch's cover letter template: cover subject blurb-file [who]
fill_cover() {
	python3 - "$@" << 'PY'
import re, sys
path, subject, blurb = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
s = open(path).read()
s = s.replace('*** SUBJECT HERE ***', subject, 1)
s = s.replace('*** BLURB HERE ***\n', blurb.rstrip('\n') + '\n', 1)
if len(sys.argv) > 4:
    s = re.sub(r'(?m)^.* \((\d+)\):$', sys.argv[4] + r' (\1):', s, count=1)
open(path, 'w').write(s)
PY
}

mapfile -t PATCHES < <(ls "$HERE"/[0-9][0-9][0-9][0-9]-*.patch | grep -v /0000-)
COVER=$HERE/0000-cover-letter.patch
[ ${#PATCHES[@]} -gt 0 ] || die "no patches in $HERE"
subject=$(sed -n 's/^Subject: \[[^]]*\] //p' "$COVER" | head -1)
[ -n "$subject" ] || die "no Subject: in $COVER"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
blurb "$COVER" > "$tmp/blurb"
[ -s "$tmp/blurb" ] || die "no text in $COVER"

# --- the base tree: the tarball as one commit, tagged "base" ---
if ! g rev-parse -q --verify base > /dev/null 2>&1; then
	[ -f "$TARBALL" ] || die "$TARBALL missing: apt-get install linux-source-6.12"
	echo "make-series: unpacking $TARBALL into $WT (a minute or two)" >&2
	rm -rf "$WT"
	mkdir -p "$WT"
	tar -xf "$TARBALL" -C "$WT" --strip-components=1
	g init -q
	g config gc.auto 0
	# Debian's .gitignore ignores everything at the top level: add with -f.
	g add -f -A .
	GIT_AUTHOR_NAME=base GIT_AUTHOR_EMAIL=base GIT_COMMITTER_NAME=base \
		GIT_COMMITTER_EMAIL=base g commit -q -m "Linux $(make -s -C "$WT" kernelversion)"
	g tag base
fi

# --- --refresh: the tree's commits back into packaging/kernel/ ---
if [ $refresh = 1 ]; then
	n=$(g rev-list --count base..HEAD)
	[ "$n" -gt 0 ] || die "no commits on top of base in $WT"
	! g log -p base..HEAD -- MAINTAINERS | grep -q '^+M:' ||
		die "a commit adds an M: line to MAINTAINERS (this script's own): drop it first"
	g format-patch -q --cover-letter -o "$tmp/out" base..HEAD
	rm -f "$HERE"/[0-9][0-9][0-9][0-9]-*.patch
	for f in "$tmp"/out/*.patch; do
		strip_identity "$f" > "$HERE/$(basename "$f")"
	done
	fill_cover "$HERE/0000-cover-letter.patch" "$subject" "$tmp/blurb" "The submitter"
	echo "make-series: wrote $n patches and the cover letter to $HERE" >&2
	exit 0
fi

# --- the identity ---
ident=$(g var GIT_AUTHOR_IDENT 2> /dev/null) || ident=""
name=${ident% <*}
email=$(echo "$ident" | sed -n 's/.*<\(.*\)>.*/\1/p')
[ -n "$ident" ] && [ -n "$name" ] && [ -n "$email" ] ||
	die "no git identity: git config --global user.name 'Your Name'; git config --global user.email you@your.domain"
case "$email" in
*.example|*.invalid|*.test|*.localhost|*noreply*|*@localhost|base)
	die "'$name <$email>' is not an address you can sign off with (git config user.email)" ;;
esac
echo "make-series: author and Signed-off-by: $name <$email>" >&2

# --- the series as commits ---
g checkout -q -f -B stackmap-series base
g clean -q -fdx
for p in "${PATCHES[@]}"; do
	g mailinfo -k "$tmp/msg" "$tmp/diff" < "$p" > "$tmp/info"
	s=$(sed -n 's/^Subject: //p' "$tmp/info" | sed 's/^\[[^]]*\] *//')
	[ -n "$s" ] || die "$(basename "$p"): no Subject:"
	{ echo "$s"; echo; cat "$tmp/msg"; } > "$tmp/commit"
	if ! g apply --index "$tmp/diff" 2> /dev/null; then
		# MAINTAINERS has the M: line added below: merge around it.
		g apply --index --3way "$tmp/diff" ||
			die "$(basename "$p") does not apply to $(g log -1 --format=%s base)"
	fi
	# The entry the series creates is maintained by its submitter.
	if grep -qx 'FTRACE STACK MAP' "$WT/MAINTAINERS" &&
	   ! grep -A1 -x 'FTRACE STACK MAP' "$WT/MAINTAINERS" | grep -q '^M:'; then
		sed -i "/^FTRACE STACK MAP\$/a M:\t$name <$email>" "$WT/MAINTAINERS"
		g add MAINTAINERS
	fi
	g commit -q --no-verify -F "$tmp/commit"
done

# --- signed patches and the cover letter ---
mkdir -p "$OUT"
rm -f "$OUT"/*.patch
args=(-q -s --cover-letter -o "$OUT" --subject-prefix="$prefix")
[ -z "$reroll" ] || args+=(-v "$reroll")
g format-patch "${args[@]}" base..HEAD
fill_cover "$(ls "$OUT"/*0000-cover-letter.patch)" "$subject" "$tmp/blurb"

# --- checkpatch, as a maintainer will run it ---
bad=0
for f in "$OUT"/*.patch; do
	case "$f" in *0000-cover-letter.patch) continue ;; esac
	(cd "$WT" && ./scripts/checkpatch.pl --strict -q "$f") || bad=1
done
if [ $bad = 0 ]; then
	echo "make-series: checkpatch --strict: clean" >&2
else
	echo "make-series: checkpatch --strict reported problems (above)" >&2
fi
echo "make-series: $(ls "$OUT"/*.patch | wc -l) files in $OUT" >&2
exit $bad
