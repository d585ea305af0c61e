#!/usr/bin/env bash
# CI: NVRTC compiles every built-in kernel, on a machine with no GPU and no CUDA toolkit.
#
# Fetches a pinned NVRTC wheel (nvidia-cuda-nvrtc-cu12, checked against its SHA-256) with
# pip, unpacks its libraries into target/nvrtc-wheel/, names that folder in
# RIMMS_CUDA_LIB_DIRS (the runtime's own library search) and runs the NVRTC tests: every
# kernel compiled for the H200's architecture (sm_90, machine code) and a generic one
# (compute_75, PTX), failing on any compile error or warning, and the library found in a pip
# and a toolkit layout. RIMMS_REQUIRE_NVRTC=1 turns a missing library into a failure.
#
#   scripts/nvrtc-check.sh          # prints the folder it used on its last line
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

VERSION=12.6.77
WHEEL="nvidia_cuda_nvrtc_cu12-${VERSION}-py3-none-manylinux2014_x86_64.whl"
SHA256=35b0cc6ee3a9636d5409133e79273ce1f3fd087abb0532d2d2e8fff1fe9efc53
DIR="$PWD/target/nvrtc-wheel/$VERSION"

if [[ ! -f "$DIR/lib/libnvrtc.so.12" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 "nvidia-cuda-nvrtc-cu12==$VERSION" -d "$tmp"
  echo "$SHA256  $tmp/$WHEEL" | sha256sum --check --quiet
  python3 -m zipfile -e "$tmp/$WHEEL" "$tmp/x"
  mkdir -p "$DIR"
  rm -rf "$DIR/lib"
  mv "$tmp/x/nvidia/cuda_nvrtc/lib" "$DIR/lib"
fi

export RIMMS_CUDA_LIB_DIRS="$DIR/lib" RIMMS_REQUIRE_NVRTC=1
out=$(cargo test -p rimms-runtime --test it -- --nocapture cuda_nvrtc:: 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -E "^test |test result|^NVRTC"
# A filter or a skip that ran nothing would pass silently.
grep -q "test result: ok. 5 passed" <<<"$out" || { echo "nvrtc-check: not all 5 NVRTC tests ran"; exit 1; }
grep -q "compute_75: .* no warnings" <<<"$out" || { echo "nvrtc-check: no compile seen"; exit 1; }
out=$(cargo test -p rimms-runtime --lib -- backend::cuda::nvrtc backend::cuda::libs 2>&1) ||
  { echo "$out"; exit 1; }
echo "$out" | grep -E "^test |test result"
grep -q "test result: ok. 6 passed" <<<"$out" ||
  { echo "nvrtc-check: the NVRTC log and library search tests did not all run"; exit 1; }
echo "nvrtc-check: every kernel compiled with $DIR/lib"
