#!/usr/bin/env bash
# bench-vs-asynq.sh: delayq's drain against asynq's on the same Redis, in
# the same minutes (docs/benchmarks.md, "Side by side with asynq").
#
# It builds delayq and bench/asynq (a module of its own: asynq never enters
# delayq's go.mod), then runs ROUNDS rounds of three drains of N jobs with
# C handlers: `delayq bench drain` (a redis topic, every claim recorded in
# the SQL ledger), `delayq bench drain --durable`, and `asynq-bench drain`
# (asynq's client fills a queue of its own, then an asynq server with C
# no-op handlers starts). The order rotates from round to round, so that no
# drain always runs first on a machine whose speed changes by the minute.
# It prints each run's jobs/s, its costs per job, and delayq's ratios to
# asynq's run of the same round; the JSON of every run stays in OUT.
#
# Environment: REDIS (127.0.0.1:6379), DSN (the ledger's MySQL DSN), N
# (50000), C (50), ROUNDS (3), OUT (a new temporary directory). Needs go
# and jq.
set -euo pipefail

REDIS=${REDIS:-127.0.0.1:6379}
DSN=${DSN:-root@tcp(127.0.0.1:3306)/test?parseTime=true}
N=${N:-50000}
C=${C:-50}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$(mktemp -d -t delayq-vs-asynq.XXXXXX)}

command -v jq >/dev/null || { echo "bench-vs-asynq: jq is needed to read the runs' JSON" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
go build -o "$OUT/delayq" ./app/delayq
(cd bench/asynq && go build -o "$OUT/asynq-bench" .)
echo "delayq: $(git rev-parse --short HEAD 2>/dev/null || echo '?'); asynq: $(go version -m "$OUT/asynq-bench" | awk '$2 == "github.com/hibiken/asynq" {print $3}')" >&2
echo "N=$N C=$C, Redis $REDIS; runs' JSON in $OUT" >&2

# run KIND ROUND: one drain, its JSON in $OUT/KIND-ROUND.json.
run() {
	local kind=$1 round=$2 file="$OUT/$1-$2.json"
	case $kind in
	redis) "$OUT/delayq" bench drain -n "$N" -c "$C" --json --redis "$REDIS" --sql-dsn "$DSN" >"$file" ;;
	durable) "$OUT/delayq" bench drain -n "$N" -c "$C" --durable --json --redis "$REDIS" --sql-dsn "$DSN" >"$file" ;;
	asynq) "$OUT/asynq-bench" drain -n "$N" -c "$C" --json --redis "$REDIS" >"$file" ;;
	esac
	echo "round $round: $kind done at $(date -u +%H:%M:%S)" >&2
}

kinds=(redis durable asynq)
for ((r = 1; r <= ROUNDS; r++)); do
	for ((i = 0; i < 3; i++)); do
		run "${kinds[$(((r - 1 + i) % 3))]}" "$r"
	done
done

# fields KIND ROUND: rate, ledger commits/1k, Redis commands/job, script
# calls/job, process CPU µs/job, missing ("-" for what a run has not).
fields() {
	local file="$OUT/$1-$2.json"
	jq -r '(if has("results") then .results[0] else . end)
		| [.rate, (.costs.ledger_commits_per_1k_jobs // "-"), (.costs.redis_commands_per_job // "-"),
		   (.costs.redis_script_calls_per_job // "-"), (.costs.process_cpu_us_per_job // "-"), .missing]
		| map(tostring) | join(" ")' "$file"
}

{
	echo "ROUND KIND JOBS/s COMMITS/1k REDIS_CMDS/JOB SCRIPT_CALLS/JOB CPU_µs/JOB MISSING RATIO_TO_ASYNQ"
	for ((r = 1; r <= ROUNDS; r++)); do
		read -r arate _ <<<"$(fields asynq "$r")"
		for kind in redis durable asynq; do
			read -r rate commits cmds scripts cpu missing <<<"$(fields "$kind" "$r")"
			awk -v r="$r" -v k="$kind" -v rate="$rate" -v commits="$commits" -v cmds="$cmds" -v scripts="$scripts" \
				-v cpu="$cpu" -v missing="$missing" -v arate="$arate" 'BEGIN {
				printf "%s %s %.0f %s %s %s %s %s %.2fx\n", r, k, rate,
					(commits == "-" ? "-" : sprintf("%.1f", commits)), (cmds == "-" ? "-" : sprintf("%.2f", cmds)),
					(scripts == "-" ? "-" : sprintf("%.3f", scripts)), (cpu == "-" ? "-" : sprintf("%.1f", cpu)), missing, rate / arate
			}'
		done
	done
} | column -t

# The medians of each kind's rates, and their ratios.
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
declare -A med
for kind in redis durable asynq; do
	med[$kind]=$(for ((r = 1; r <= ROUNDS; r++)); do fields "$kind" "$r" | cut -d' ' -f1; done | median)
done
awk -v a="${med[asynq]}" -v r="${med[redis]}" -v d="${med[durable]}" 'BEGIN {
	printf "\nmedian jobs/s: delayq redis topic %.0f, delayq durable %.0f, asynq %.0f; delayq / asynq: redis topic %.2fx, durable %.2fx\n", r, d, a, r / a, d / a
}'
