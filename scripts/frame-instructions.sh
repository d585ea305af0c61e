#!/usr/bin/env bash
# Instructions per frame of `rimms run`, RIMMS against the hand-written floor (`--mode native`),
# counted by callgrind so that machine load does not change them (issue 29's first table).
# Each cell runs the app at two frame counts and divides the difference by the extra frames, so
# start-up, input generation and the first frame's allocations cancel.
#
#   scripts/frame-instructions.sh [RIMMS_BINARY] [APPS...]
#
# Needs valgrind. Builds `rimms` in release first unless a binary is given. RAYON_NUM_THREADS=1
# keeps rayon's idle workers from adding their spins to the count.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [[ -z "$bin" ]]; then
  cargo build --release -p rimms-cli --quiet
  bin="${CARGO_TARGET_DIR:-target}/release/rimms"
else
  shift
fi
apps=("$@")
[[ ${#apps[@]} -gt 0 ]] || apps=(pulse-doppler correlator sar 2fft fzf zip3x)
command -v valgrind >/dev/null || { echo "frame-instructions: valgrind is not installed"; exit 0; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
short=2 long=6

count() { # app map mode frames -> instructions
  local out="$scratch/$1-$2-$3-$4.out"
  RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$bin" run "$1" --map "$2" --mode "$3" --frames "$4" >/dev/null 2>"$out.err" \
    || { echo "frame-instructions: $1 --map $2 --mode $3 failed:" >&2; tail -3 "$out.err" >&2; return 1; }
  awk '/^totals:/ {print $2; exit}' "$out"
}
per_frame() { # app map mode
  local a b
  a=$(count "$1" "$2" "$3" "$short") && b=$(count "$1" "$2" "$3" "$long") || return 1
  echo $(((b - a) / (long - short)))
}

printf '%-14s %-4s %14s %14s %8s\n' app map rimms native ratio
failed=0
for app in "${apps[@]}"; do
  for map in cpu sim; do
    if r=$(per_frame "$app" "$map" rimms) && n=$(per_frame "$app" "$map" native); then
      printf '%-14s %-4s %14d %14d %8s\n' "$app" "$map" "$r" "$n" \
        "$(awk -v r="$r" -v n="$n" 'BEGIN {printf "%.3fx", r / n}')"
    else
      failed=1
    fi
  done
done
# A cell that could not be measured fails the run after the others are printed.
exit "$failed"
