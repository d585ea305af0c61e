#!/usr/bin/env bash
# Mutation testing of the core: cargo-mutants over the coherence state machine (which is also
# the copy planner: `plan_acquire` and `cheapest_source`), the allocators, the host-loop
# splitter that `parallel_for!` expands into, and the macro's analysis.
#
# Every mutant must be caught by some test (or make one hang past the timeout), unless it is
# listed in scripts/mutants-equivalent.txt with the reason it cannot change behaviour. The
# script fails if any other mutant is missed.
#
# Too slow for every CI run on a small machine (each mutant is a rebuild and a test run): run
# it before each release and after changing the files it covers.
#
#   scripts/mutants.sh                       # everything below, tests of the whole workspace
#   scripts/mutants.sh --workspace -f rimms-runtime/src/alloc/nf.rs \
#       --test-package rimms-runtime -- --lib --test it
#                                            # one file, some of one package's tests (faster)
#
# Extra arguments go to cargo-mutants; `-f`/`--file` replaces the default file set.
# Needs cargo-mutants: `cargo install cargo-mutants --locked`.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo-mutants >/dev/null || {
    echo "cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
    exit 2
}

files=(
    rimms-runtime/src/coherence/mod.rs
    rimms-runtime/src/alloc/nf.rs
    rimms-runtime/src/alloc/bitset.rs
    rimms-runtime/src/alloc/levels.rs
    rimms-runtime/src/host_loop.rs
    rimms-macros/src/parallel_for/analysis.rs
)
args=()
own_files=false
for a in "$@"; do
    case "$a" in -f | --file | --file=*) own_files=true ;; esac
done
if ! $own_files; then
    for f in "${files[@]}"; do args+=(--file "$f"); done
    args+=(--workspace --test-workspace=true)
fi

# The property tests' case counts are the bulk of each run; a few hundred cases still reach
# every operation many times over.
export RIMMS_PROPTEST_CASES="${RIMMS_PROPTEST_CASES:-300}"
# A mutant's failing cases are not regressions of the real code: keep them out of the tree.
export PROPTEST_DISABLE_FAILURE_PERSISTENCE=true
out=mutants.out
start=$(date +%s)
status=0
# Interrupted (Ctrl-C, or `timeout -s INT` on the whole process group), cargo-mutants puts the
# source back and stops; the summary below then covers the mutants tested so far.
interrupted=false
trap 'interrupted=true' INT
cargo mutants --no-shuffle --output . "${args[@]}" "$@" || status=$?
wall=$(($(date +%s) - start))
# 0: all caught; 2: some missed; 3: some timed out. Anything else is a failure of the run.
if $interrupted; then
    echo "== interrupted after ${wall}s: the summary covers the mutants tested until then"
else
    case $status in 0 | 2 | 3) ;; *) echo "cargo-mutants failed (exit $status)" >&2; exit "$status" ;; esac
fi

# Compare what was missed with the documented equivalents, by file and description (line
# numbers move with every edit).
lines() { [ -f "$out/$1" ] && sed '/^$/d' "$out/$1" || true; }
count() { lines "$1" | wc -l; }
strip() { sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /'; }
equivalent=$({ grep -v '^\s*\(#\|$\)' scripts/mutants-equivalent.txt || true; } |
    sed -E 's/\s+#.*$//' | sort -u)
unexplained=$(comm -23 <(lines missed.txt | strip | sort -u) <(echo "$equivalent"))
caught=$(count caught.txt) missed=$(count missed.txt) timeouts=$(count timeout.txt)
unviable=$(count unviable.txt)
echo "== mutants: tested $((caught + missed + timeouts + unviable)): caught $caught," \
    "missed $missed ($(echo "$unexplained" | sed '/^$/d' | wc -l) not listed as equivalent)," \
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
    echo "timed out (a test hung or ran past --timeout):"
    lines timeout.txt | sed 's/^/  /'
fi
exit $fail
