#!/usr/bin/env bash
# The GPU run kit: built here, run on a lent GPU machine that has no Rust toolchain and no
# network.
#
#   scripts/gpu-kit.sh build        # release-builds every GPU test binary, the GPU examples
#                                   # and `rimms`, strips and packs them into
#                                   # target/gpu-kit/rimms-gpu-kit.tar.gz (target/ is ignored)
#   scripts/gpu-kit.sh run [ARCHIVE] # unpacks into a fresh folder and runs every part there
#
# `run` needs only bash, coreutils (timeout), tar with gzip, and python3 for the JSON. It
# prints the GPU, the driver and the CUDA libraries the backend found (the runtime itself
# looks in the loader path, RIMMS_CUDA_LIB_DIRS, CUDA_HOME, /usr/local/cuda*, and pip's
# nvidia/*/lib next to every python3 on PATH, CUDA 12 or 13), then runs each part under its
# own timeout, all within KIT_BUDGET seconds (default 450, so the whole run ends in under 8
# minutes): the stream-ordering model of the compute and copy streams (which fails should it
# find no test), the backend's other unit tests (NVRTC), the no-GPU paths, NVRTC compiling
# every kernel, the GPU tests (`--include-ignored`), a copy in and out overlapping queued
# kernels on the GPU (the `overlap:` figure), gpu(n) through the runtime, the app modes, the
# FZF, 2FFT and SAR benchmarks (baseline, tracked, hand-written cudarc), FZF on the GPU scoped and
# double-buffered (frame k+1's input sent while frame k computes) and `rimms bench`. It
# writes gpu-kit.log and gpu-kit.json (every part's status and time, and the benchmarks' and
# the overlap's figures) under $OUT when set, else in the unpacked folder, and exits non-zero
# if any part failed. Where there is no usable GPU every GPU part reports
# "skipped: no GPU (<reason>)" and the run passes; where there is one, RIMMS_REQUIRE_GPU=1
# makes a GPU test that skips a failure.
#
# The device call (the working tree travels with the carried kit; 64 MiB at most):
#
#   run(command="scripts/gpu-kit.sh run", carry=["target/gpu-kit"], timeout_s=540)
#
# Environment: FRAMES (frames per benchmark variant, default 20), KIT_BUDGET (seconds, default
# 450), RIMMS_GPU_KIT_DIR (where `build` puts the archive and `run` looks for it), KIT_PROFILE
# (cargo profile, default release; CI checks the kit's packing and paths with `dev`, which
# reuses its test build instead of compiling everything again optimised).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KIT_DIR="${RIMMS_GPU_KIT_DIR:-$ROOT/target/gpu-kit}"
ARCHIVE_NAME="rimms-gpu-kit.tar.gz"
FRAMES="${FRAMES:-20}"
KIT_BUDGET="${KIT_BUDGET:-450}"
KIT_PROFILE="${KIT_PROFILE:-release}"

# A line for the console and the log alike.
say() {
  echo "$*"
  [[ -z "${LOG:-}" ]] || echo "$*" >>"$LOG"
}

die() {
  echo "gpu-kit: $*" >&2
  exit 2
}

# ---- build ----

# executables PACKAGE CARGO-ARGS...: runs a cargo command on PACKAGE with JSON messages and
# prints "KIND NAME PATH" for each executable. Every crate has one integration-test binary,
# `it`, so a test binary is named after its package: rimms_runtime_it, rimms_it, rimms_cli_it.
executables() {
  local package=$1
  shift
  nice -n 10 cargo "$@" -p "$package" --profile "$KIT_PROFILE" \
    --message-format=json-render-diagnostics |
    python3 -c '
import json, sys
package = sys.argv[1].replace("-", "_")
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    kind = t["kind"][0]
    name = t["name"].replace("-", "_")
    if kind == "lib":
        name += "_unit"
    elif kind == "test":
        name = package + "_" + name
    print(kind, name, m["executable"])
' "$package"
}

build() {
  command -v cargo >/dev/null || die "build needs cargo"
  command -v python3 >/dev/null || die "build needs python3 (to read cargo's messages)"
  cd "$ROOT"
  export CARGO_TERM_COLOR=never
  local started=$SECONDS stage list
  stage="$(mktemp -d)"
  list="$stage/list"
  mkdir -p "$stage/kit/bin"
  {
    executables rimms-runtime test --no-run --lib --test it
    executables rimms test --no-run --test it
    executables rimms-cli test --no-run --test it
    executables rimms-runtime build --example gpu_fzf_bench
    executables rimms-cli build --example gpu_sar --bin rimms
  } | sort -u -k2,2 >"$list"
  local kind name path n=0
  while read -r kind name path; do
    strip -o "$stage/kit/bin/$name" "$path"
    echo "$kind $name" >>"$stage/kit/MANIFEST"
    n=$((n + 1))
  done <"$list"
  for want in rimms_runtime_unit rimms_runtime_it rimms_it rimms_cli_it gpu_fzf_bench gpu_sar \
    rimms; do
    [[ -x "$stage/kit/bin/$want" ]] || die "the build made no $want"
  done
  {
    echo "commit $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), profile $KIT_PROFILE"
  } >"$stage/kit/BUILD"
  mkdir -p "$KIT_DIR"
  rm -f "$KIT_DIR/$ARCHIVE_NAME"
  tar -C "$stage" -czf "$KIT_DIR/$ARCHIVE_NAME" kit
  rm -rf "$stage"
  local bytes
  bytes=$(stat -c %s "$KIT_DIR/$ARCHIVE_NAME")
  echo "gpu-kit: $n binaries in $KIT_DIR/$ARCHIVE_NAME: $((bytes / 1024 / 1024)) MiB" \
    "($bytes bytes), built in $((SECONDS - started)) s"
  # What travels to a GPU machine is the release kit, with the working tree, in 64 MiB.
  [[ "$KIT_PROFILE" != release ]] || ((bytes < 60 * 1024 * 1024)) || die "the kit is over 60 MiB"
}

# ---- run ----

GPU_REASON=""   # why there is no GPU; empty when there is one
PARTS_FILE=""   # one line per part: name<TAB>status<TAB>seconds

# part NAME TIMEOUT GPU_ONLY CMD...: runs CMD in the kit folder under its own timeout (capped by
# what is left of the budget); its output goes to parts/NAME.out and the log.
part() {
  local name=$1 limit=$2 gpu_only=$3
  shift 3
  local left=$((KIT_BUDGET - SECONDS)) status rc=0 started=$SECONDS out="parts/$name.out"
  if ((left < 5)); then
    status="failed: not run, the kit's $KIT_BUDGET s were spent"
    printf '%s\t%s\t0\n' "$name" "$status" >>"$PARTS_FILE"
    say "== $name: $status"
    return
  fi
  ((limit < left)) || limit=$left
  say "== $name (timeout ${limit} s): $*"
  timeout --kill-after=10 "$limit" "$@" >"$out" 2>&1 || rc=$?
  local took=$((SECONDS - started))
  if ((rc == 124 || rc == 137)); then
    status="failed: timed out after $limit s"
  elif ((rc != 0)); then
    status="failed: exit status $rc"
  elif [[ "$gpu_only" == gpu && -n "$GPU_REASON" ]]; then
    local own
    own=$(grep -m1 -oE '(skipped: no GPU \(.*\)|^no GPU: .*)' "$out" || true)
    own=${own#skipped: no GPU (}
    own=${own%)}
    own=${own#no GPU: }
    status="skipped: no GPU (${own:-$GPU_REASON})"
  else
    status="passed"
  fi
  cat "$out" >>"$LOG"
  if [[ "$status" == failed* ]]; then
    echo "-- last lines of $name:"
    tail -n 40 "$out"
  elif [[ "$gpu_only" == gpu && -z "$GPU_REASON" ]] || [[ "$name" == probe ]]; then
    # Results on a GPU: the tables and test summaries, for the caller to read.
    grep -vE '^test .* \.\.\. ok$|^running [0-9]+ tests?$|^$' "$out" | tail -n 40
  fi
  say "== $name: $status (${took} s)"
  printf '%s\t%s\t%s\n' "$name" "$status" "$took" >>"$PARTS_FILE"
}

write_json() {
  local json=$1
  command -v python3 >/dev/null || {
    echo "gpu-kit: no python3: $json not written" >&2
    return
  }
  python3 - "$json" "$PARTS_FILE" parts <<'PY'
import json, re, sys
path, parts_file, outs = sys.argv[1:4]

def read(name):
    try:
        with open(f"{outs}/{name}.out", errors="replace") as f:
            return f.read()
    except OSError:
        return ""

def table(text, labels):
    rows = {}
    for line in text.splitlines():
        for label in labels:
            m = re.match(rf"^{re.escape(label)}\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$", line)
            if m:
                rows[label] = {"median_ms": float(m.group(1)),
                               "x_hand_written": float(m.group(2)),
                               "x_faster_than_baseline": float(m.group(3))}
    return rows

def submits(text):
    # `submit NAME` then the run's JSON line: each submit mode's median frame time.
    medians, submit = {}, None
    for line in text.splitlines():
        if line.startswith("submit "):
            submit = line.split()[1]
        elif submit and line.startswith("{"):
            try:
                medians[submit] = json.loads(line).get("median_ms")
            except ValueError:
                pass
    if medians.get("scoped") and medians.get("double-buffered"):
        medians["scoped_over_double_buffered"] = medians["scoped"] / medians["double-buffered"]
    return medians

parts = []
with open(parts_file) as f:
    for line in f:
        name, status, secs = line.rstrip("\n").split("\t")
        parts.append({"name": name, "status": status, "seconds": int(secs)})
probe = read("probe")
doc = {
    "probe": [l for l in probe.splitlines() if l.strip()],
    "parts": parts,
    "fzf": table(read("fzf"), ["baseline", "rt baseline", "tracked", "hand-written"]),
    "2fft": table(read("twofft"), ["baseline", "rt baseline", "tracked", "hand-written"]),
    "sar": table(read("sar"), ["baseline", "tracked", "hand-written"]),
    "bench_gpu_rows": [l for l in read("bench").splitlines() if "gpu" in l],
    "overlap": [l for l in read("overlap").splitlines() if l.startswith("overlap:")],
    "fzf_submit": submits(read("double_buffered")),
    "passed": all(not p["status"].startswith("failed") for p in parts),
}
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
PY
}

run() {
  local archive=${1:-$KIT_DIR/$ARCHIVE_NAME}
  [[ -f "$archive" ]] || die "no kit at $archive: run 'scripts/gpu-kit.sh build' first"
  local work
  work="$(mktemp -d "${TMPDIR:-/tmp}/rimms-gpu-kit.XXXXXX")"
  tar -C "$work" -xzf "$archive"
  # Run from the unpacked folder, away from any source tree: a binary that looks for one
  # fails here too, not only on the lent machine.
  cd "$work/kit"
  mkdir -p parts
  local dest=${OUT:-$work/kit}
  mkdir -p "$dest"
  LOG="$dest/gpu-kit.log"
  PARTS_FILE="$work/kit/parts.tsv"
  : >"$LOG"
  : >"$PARTS_FILE"
  SECONDS=0
  {
    echo "== kit"
    cat BUILD
    echo "== machine: $(uname -srm), $(nproc) cores"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader ||
        true
    else
      echo "(no nvidia-smi)"
    fi
  } | tee -a "$LOG"

  part probe 60 any bin/gpu_fzf_bench --probe
  if grep -q '^gpu0: ' parts/probe.out; then
    GPU_REASON=""
    export RIMMS_REQUIRE_GPU=1
  else
    GPU_REASON=$(sed -n 's/^no GPU: //p' parts/probe.out | head -n1)
    GPU_REASON=${GPU_REASON:-the probe found no GPU 0}
    export RIMMS_REQUIRE_GPU=0
    say "== no GPU here: $GPU_REASON"
  fi

  # The stream-ordering model runs everywhere; a filter that matched no test would pass
  # silently, so the part fails unless some test ran.
  part ordering_model 30 any bash -c 'out=$(bin/rimms_runtime_unit backend::cuda::ordering:: 2>&1)
    rc=$?
    echo "$out"
    ((rc == 0)) || exit "$rc"
    grep -qE "^test result: ok\. [1-9][0-9]* passed" <<<"$out" || {
      echo "gpu-kit: no test of the stream-ordering model ran"
      exit 1
    }'
  part unit 60 any bin/rimms_runtime_unit --include-ignored backend::cuda \
    --skip backend::cuda::ordering:: --skip copies_overlap_a_running_kernel_on_the_gpu
  # One test binary per crate; a module filter picks each part's tests out of it.
  part no_gpu_paths 60 any bin/rimms_runtime_it --include-ignored --nocapture cuda_no_gpu::
  part nvrtc 60 any bin/rimms_runtime_it --include-ignored --nocapture cuda_nvrtc::
  part gpu_tests 150 gpu bin/rimms_runtime_it --include-ignored --nocapture cuda_gpu::
  # A copy in and out returning while gemms queued before them still run: the copy and
  # compute streams overlap (it fails if the copies returned only after the kernels).
  part overlap 60 gpu bin/rimms_runtime_unit --include-ignored --nocapture --exact \
    backend::cuda::device::tests::copies_overlap_a_running_kernel_on_the_gpu
  part runtime_gpu 90 gpu bin/rimms_it --include-ignored --nocapture gpu::
  part device_memory 60 any bin/rimms_it --include-ignored device_memory::
  part app_modes 90 any bin/rimms_cli_it --include-ignored modes::
  part fzf 90 gpu bin/gpu_fzf_bench --frames "$FRAMES"
  part twofft 90 gpu bin/gpu_fzf_bench --chain 2fft --frames "$FRAMES"
  part sar 90 gpu bin/gpu_sar "$FRAMES"
  # FZF on the GPU scoped, then double-buffered (frame k+1's input goes to the GPU while frame
  # k computes, so its copies overlap kernels): the two median frame times, in gpu-kit.json.
  if [[ -z "$GPU_REASON" ]]; then
    part double_buffered 60 gpu bash -c 'for submit in scoped double-buffered; do
        echo "submit $submit"
        bin/rimms run fzf --map gpu --submit "$submit" --frames "$1" --json || exit
      done' double_buffered "$FRAMES"
  else
    printf '%s\t%s\t0\n' double_buffered "skipped: no GPU ($GPU_REASON)" >>"$PARTS_FILE"
    say "== double_buffered: skipped: no GPU ($GPU_REASON)"
  fi
  # The paper's three chains, as the kit's budget was sized for: `rimms bench`'s default now
  # adds the three radar apps, which in CI's dev-profile kit takes most of this part's limit.
  part bench 120 gpu bin/rimms bench --wide --frames "$FRAMES" --app 2fft --app fzf --app zip3x

  write_json "$dest/gpu-kit.json"
  echo "== summary (${SECONDS} s; log $LOG, figures $dest/gpu-kit.json)" | tee -a "$LOG"
  column -t -s $'\t' "$PARTS_FILE" 2>/dev/null | tee -a "$LOG" || tee -a "$LOG" <"$PARTS_FILE"
  if grep -q $'\tfailed' "$PARTS_FILE"; then
    echo "gpu-kit: FAILED" | tee -a "$LOG"
    return 1
  fi
  echo "gpu-kit: passed" | tee -a "$LOG"
}

case "${1:-}" in
build) build ;;
run)
  shift
  run "$@"
  ;;
*) die "usage: scripts/gpu-kit.sh build | run [ARCHIVE]" ;;
esac
