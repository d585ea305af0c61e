#!/usr/bin/env bash
# Mutation testing of the core: cargo-mutants over the coherence state machine (which is also
# the copy planner: `plan_acquire` and `cheapest_source`), the allocators, the host-loop
# splitter that `parallel_for!` expands into, and the macro's analysis.
#
# Every mutant must be caught by some test of the workspace (or make one hang past the
# timeout), unless it is listed in scripts/mutants-equivalent.txt with the reason it cannot
# change behaviour. The script fails if any other mutant is missed.
#
# Two stages, because the whole workspace's tests take minutes per mutant on a small machine
# (the CLI runs apps, trybuild compiles every ui case) and there are about 800 mutants:
#
#   1. each file's mutants against the tests written for that file (an incremental rebuild
#      and seconds of tests each);
#   2. the mutants stage 1 missed against every test of the workspace, so a mutant counts as
#      missed only when no test anywhere catches it.
#
# It mutates the source tree in place (and puts it back, also when interrupted): run it on a
# clean checkout, and let it finish or press Ctrl-C once. Results go to mutants.out/.
#
#   scripts/mutants.sh                                  # every file below, both stages
#   scripts/mutants.sh rimms-runtime/src/alloc/nf.rs    # only the files named
#
# Too slow for every CI run on a small machine: run it before each release and after
# changing the files it covers. Needs cargo-mutants: `cargo install cargo-mutants --locked`.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo-mutants >/dev/null || {
    echo "cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
    exit 2
}

# Each file, and the tests stage 1 runs for it: the packages, then what follows `cargo test`
# (`--cargo-arg` also narrows the build, which otherwise covers every test target and example
# of those packages).
declare -A tests_of=(
    [rimms-runtime/src/coherence/mod.rs]="--test-package rimms-runtime -- --lib"
    [rimms-runtime/src/alloc/nf.rs]="--test-package rimms-runtime -- --lib --test it alloc"
    [rimms-runtime/src/alloc/bitset.rs]="--test-package rimms-runtime -- --lib --test it alloc"
    [rimms-runtime/src/alloc/runs.rs]="--test-package rimms-runtime -- --lib --test it alloc"
    [rimms-runtime/src/host_loop.rs]="--test-package rimms-runtime --test-package rimms --cargo-arg=--lib --cargo-arg=--test=it -- -- host_loop macros soundness reductions"
    [rimms-macros/src/parallel_for/analysis.rs]="--test-package rimms-macros -- --lib"
)
order=(
    rimms-runtime/src/coherence/mod.rs
    rimms-runtime/src/alloc/nf.rs
    rimms-runtime/src/alloc/bitset.rs
    rimms-runtime/src/alloc/runs.rs
    rimms-runtime/src/host_loop.rs
    rimms-macros/src/parallel_for/analysis.rs
)
files=("$@")
[ ${#files[@]} -gt 0 ] || files=("${order[@]}")
for f in "${files[@]}"; do
    [ -n "${tests_of[$f]:-}" ] || { echo "no stage-1 tests are set for $f (see tests_of)" >&2; exit 2; }
done

# The property tests' case counts are the bulk of each run; a few hundred cases still reach
# every operation many times over.
export RIMMS_PROPTEST_CASES="${RIMMS_PROPTEST_CASES:-300}"
# A mutant's failing cases are not regressions of the real code: keep them out of the tree.
export PROPTEST_DISABLE_FAILURE_PERSISTENCE=true

out=mutants.out
rm -rf "$out"
mkdir -p "$out"
start=$(date +%s)
interrupted=false
trap 'interrupted=true' INT

# Runs cargo-mutants into $out/$1; 0: all caught, 2: some missed, 3: some timed out.
mutate() {
    local dir=$1
    shift
    local status=0
    cargo mutants --in-place --no-shuffle --workspace --output "$out/$dir" "$@" || status=$?
    case $status in 0 | 2 | 3) ;; *) $interrupted || {
        echo "cargo-mutants failed (exit $status)" >&2
        exit "$status"
    } ;; esac
}
lines() { cat "$out"/*/mutants.out/"$1" 2>/dev/null | sed '/^$/d' || true; }

for f in "${files[@]}"; do
    $interrupted && break
    echo "== stage 1: $f (${tests_of[$f]})"
    # shellcheck disable=SC2086 # the test arguments are words
    mutate "stage1-$(basename "$(dirname "$f")")-$(basename "$f" .rs)" --file "$f" ${tests_of[$f]}
done

# Compare what was missed with the documented equivalents, by file and description (line
# numbers move with every edit).
strip() { sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /'; }
equivalent=$({ grep -v '^\s*\(#\|$\)' scripts/mutants-equivalent.txt || true; } |
    sed -E 's/\s+#.*$//' | sort -u)
listed() { grep -Fxq "$(echo "$1" | strip)" <<<"$equivalent"; }

# Stage 2: what stage 1 missed, by exact name, against the whole workspace; a mutant listed as
# equivalent changes nothing a test can see, so it is not run again.
missed1=$(cat "$out"/stage1-*/mutants.out/missed.txt 2>/dev/null | sed '/^$/d' || true)
survivors=$(while IFS= read -r m; do [ -z "$m" ] || listed "$m" || echo "$m"; done <<<"$missed1")
if [ -n "$survivors" ] && ! $interrupted; then
    echo "== stage 2: $(echo "$survivors" | wc -l) mutants stage 1 missed, against every test of the workspace"
    re="^($(echo "$survivors" | sed 's/[][\\.^$*+?(){}|/]/\\&/g' | paste -sd '|'))\$"
    args=()
    for f in "${files[@]}"; do args+=(--file "$f"); done
    # The tests passed on this tree in stage 1's baselines; the workspace's own baseline
    # would take as long as one mutant.
    mutate stage2 "${args[@]}" --test-workspace=true --baseline=skip --re "$re"
fi
wall=$(($(date +%s) - start))
$interrupted && echo "== interrupted after ${wall}s: the summary covers the mutants tested until then"

# Stage 1's caught and unviable mutants are final; its misses were retried in stage 2, whose
# verdict stands.
count() { echo "$1" | sed '/^$/d' | wc -l; }
caught=$(count "$(lines caught.txt)")
unviable=$(count "$(lines unviable.txt)")
timeouts=$(count "$(lines timeout.txt)")
missed_list=$(cat "$out"/stage2/mutants.out/missed.txt 2>/dev/null | sed '/^$/d' || true)
[ -d "$out/stage2" ] || missed_list=$survivors
# The listed equivalents stage 1 missed are missed too.
missed_list=$(printf '%s\n%s\n' "$missed_list" \
    "$(while IFS= read -r m; do [ -n "$m" ] && listed "$m" && echo "$m"; done <<<"$missed1")")
missed=$(count "$missed_list")
unexplained=$(comm -23 <(echo "$missed_list" | sed '/^$/d' | strip | sort -u) <(echo "$equivalent"))
echo "== mutants: tested $((caught + missed + timeouts + unviable)): caught $caught" \
    "($(count "$(cat "$out"/stage2/mutants.out/caught.txt 2>/dev/null || true)") of them in stage 2)," \
    "missed $missed ($(count "$unexplained") not listed as equivalent)," \
    "timeouts $timeouts, unviable $unviable; wall ${wall}s"
fail=0
if [ -n "$unexplained" ]; then
    echo "missed, and not in scripts/mutants-equivalent.txt:"
    echo "$unexplained" | sed 's/^/  /'
    fail=1
fi
# A mutant that makes a test hang is detected, not missed; listed so a slow machine's false
# timeouts can be told apart.
if [ "$timeouts" -gt 0 ]; then
    echo "timed out (a test hung or ran past the timeout):"
    lines timeout.txt | sed 's/^/  /'
fi
exit $fail
