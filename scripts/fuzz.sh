#!/usr/bin/env bash
# fuzz.sh: run every Go fuzz target of the repository, one after another.
#
#   FUZZTIME  how long each target runs: a duration (10s, 1m) or a count of
#             executions (1000x), as go test -fuzztime takes it. Default 10s.
#   FUZZMINIMIZETIME  how long the fuzzer may spend minimizing each new
#             input (go test -fuzzminimizetime). Default 5s: go's own 60s
#             lets one large input stall a target for most of a short run,
#             since no new input is tried meanwhile.
#   GO        the go command. Default go.
#
# Targets are found per package with `go test -list '^Fuzz'`, so a new one
# is picked up without touching this script. They run one at a time: each
# already uses every CPU (go test -fuzz starts GOMAXPROCS workers). The first
# failure stops the run, naming the package and the target; the input that
# failed is then in that package's testdata/fuzz/<target>/ (commit it once
# fixed: plain go test runs it from then on).
#
# Works from any directory: it runs from the repository root.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO="${GO:-go}"
FUZZTIME="${FUZZTIME:-10s}"
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-5s}"

# Listing a package's tests compiles its test binary, so only packages whose
# test files mention "func Fuzz" are listed.
packages="$("$GO" list -f '{{.ImportPath}}{{"\t"}}{{.Dir}}{{"\t"}}{{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)"
candidates=()
declare -A dirs
while IFS=$'\t' read -r pkg dir files; do
	dirs[$pkg]="$dir"
	files="${files# }"
	[ -n "${files// /}" ] || continue
	# shellcheck disable=SC2086 # files is a space-separated list of names
	if (cd "$dir" && grep -qs '^func Fuzz' $files); then
		candidates+=("$pkg")
	fi
done <<<"$packages"

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
ran=0
for pkg in ${candidates[@]+"${candidates[@]}"}; do
	if ! listing="$("$GO" test -list '^Fuzz' "$pkg")"; then
		echo "fuzz: FAIL: listing the fuzz targets of $pkg:" >&2
		echo "$listing" >&2
		exit 1
	fi
	for target in $(grep '^Fuzz' <<<"$listing" || true); do
		echo "fuzz: $pkg $target for $FUZZTIME"
		corpus="${dirs[$pkg]}/testdata/fuzz/$target"
		before="$(ls "$corpus" 2>/dev/null || true)"
		if ! "$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" 2>&1 | tee "$out"; then
			# Go 1.26's fuzz coordinator can fail a duration-bounded run at
			# its deadline with a bare "context deadline exceeded" and no
			# input (go.dev/issue/75804, fixed in 1.27): not a finding. A
			# real one writes its input into the corpus directory.
			if [ "$(ls "$corpus" 2>/dev/null || true)" = "$before" ] && grep -q '^    context deadline exceeded$' "$out"; then
				echo "fuzz: $pkg $target: stopped by go.dev/issue/75804 at the deadline, no failing input: not a failure" >&2
			else
				echo "fuzz: FAIL: $pkg $target (the failing input is under $corpus/)" >&2
				exit 1
			fi
		fi
		ran=$((ran + 1))
	done
done

if [ "$ran" -eq 0 ]; then
	echo "fuzz: FAIL: no fuzz target found" >&2
	exit 1
fi
echo "fuzz: ok: $ran targets, $FUZZTIME each"
