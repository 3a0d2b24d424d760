#!/usr/bin/env bash
# The regression check of a pull request: measures its base and head commits with asv (each built offline
# into this Python, see `tierbench nightly --existing-env`), writes `tierbench compare`'s Markdown report,
# and exits as compare does: 0 no confirmed regression, 1 a regression that a paired A/B re-run of the
# suspect series confirmed (both commits measured here, alternating, in this one session) or benchmarks
# that failed, 2 bad input. Two stored runs only nominate suspects, and controls (code this project does
# not build) only report machine drift: neither fails the check.
#
#   examples/ci/compare_pr.sh BASE HEAD [REPORT.md]       run from the root of a tierbench checkout
#
# Environment:
#   TIERBENCH          the command (default: tierbench on PATH; e.g. ".venv/bin/python -m tierbench.suite.cli")
#   TIERBENCH_MACHINE  asv machine name (default: <gpu model>-<host>, e.g. h200-node7)
#   TIERBENCH_BENCH    only the benchmarks whose name matches this regex (default: all)
#   TIERBENCH_CONFIRM  0: report suspects without re-measuring them A/B: nothing is confirmed, nothing
#                      fails on timings (default: 1)
#   TIERBENCH_ROUNDS   rounds of the A/B (default: compare's, 10)
set -uo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 BASE HEAD [REPORT.md]" >&2
  exit 2
fi
read -r -a tb <<< "${TIERBENCH:-tierbench}"  # a command of several words is fine
report=${3:-tierbench-compare.md}

fail() {  # a report that says what went wrong, so that the pull request's comment is never empty
  printf '**tierbench**: %s\n' "$1" > "$report"
  echo "compare_pr: $1" >&2
  exit 2
}

base=$(git rev-parse --verify --quiet "$1^{commit}") || fail "unknown base commit \`$1\`"
head=$(git rev-parse --verify --quiet "$2^{commit}") || fail "unknown head commit \`$2\`"

common=()
if [ -n "${TIERBENCH_MACHINE:-}" ]; then common+=(--machine "$TIERBENCH_MACHINE"); fi
if [ -n "${TIERBENCH_BENCH:-}" ]; then common+=(--bench "$TIERBENCH_BENCH"); fi
confirm=(--confirm)
if [ -n "${TIERBENCH_ROUNDS:-}" ]; then confirm+=(--rounds "$TIERBENCH_ROUNDS"); fi
if [ "${TIERBENCH_CONFIRM:-1}" = 0 ]; then confirm=(); fi

# Both commits, each built offline and measured here; a commit with results on this machine is kept.
"${tb[@]}" nightly --commits "$base,$head" --existing-env --skip-existing --no-compare --no-publish --no-report \
  ${common[@]+"${common[@]}"}
measured=$?
if [ "$measured" -eq 2 ]; then
  fail "could not measure ${base:0:8} and ${head:0:8} (tierbench nightly exited 2; see the job's log)"
fi

"${tb[@]}" compare "$base" "$head" ${confirm[@]+"${confirm[@]}"} --md "$report" ${common[@]+"${common[@]}"}
verdict=$?
if [ "$verdict" -eq 2 ]; then
  fail "could not compare ${base:0:8} with ${head:0:8} (tierbench compare exited 2; see the job's log)"
fi
if [ "$measured" -ne 0 ]; then
  printf '\n**Some benchmarks failed** while measuring (see the job'"'"'s log).\n' >> "$report"
  verdict=1
fi
exit "$verdict"
