#!/usr/bin/env bash
# GPU check of the CUDA backend (rimms-runtime, feature `cuda`) and of gpu(n) as a runtime
# device: a release build, the GPU tests, the FZF benchmark (2,048 points x 512: baseline,
# runtime baseline, tracked, hand-written cudarc), the SAR benchmark
# (baseline, tracked, hand-written cudarc), and the `rimms bench` table with its gpu rows.
#
# Run it on a machine with an NVIDIA GPU, its driver, the CUDA 12 (or 13) runtime libraries
# libnvrtc and libcufft, and a Rust toolchain; a machine without cargo runs the prebuilt kit
# instead (scripts/gpu-kit.sh). No CUDA toolkit is needed to build: the libraries are opened
# when the program runs.
#
#   scripts/gpu-check.sh                  # fails if there is no usable GPU
#   RIMMS_REQUIRE_GPU=0 scripts/gpu-check.sh   # passes without one (tests report skips)
#   FRAMES=50 scripts/gpu-check.sh        # frames per benchmark variant (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
export RIMMS_REQUIRE_GPU="${RIMMS_REQUIRE_GPU:-1}"
FRAMES="${FRAMES:-20}"

if ! command -v cargo >/dev/null; then
  echo "gpu-check: cargo is not installed on this machine" >&2
  exit 2
fi

echo "== GPU"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
else
  echo "(no nvidia-smi)"
fi

# The runtime finds NVRTC, cuFFT and nvJitLink of CUDA 12 or 13 itself (the loader path,
# RIMMS_CUDA_LIB_DIRS, CUDA_HOME, /usr/local/cuda*, pip's nvidia/*/lib next to any python3),
# and says what it loaded:
cargo run --release -q -p rimms-runtime --example gpu_fzf_bench -- --probe

echo "== build (release)"
cargo build --release -p rimms-runtime --lib --test it --example gpu_fzf_bench
cargo build --release -p rimms --test it
cargo build --release -p rimms-cli --bins --example gpu_sar

echo "== GPU tests (RIMMS_REQUIRE_GPU=$RIMMS_REQUIRE_GPU)"
# One test binary per crate: the module filters pick the GPU tests out of it.
cargo test --release -p rimms-runtime --test it -- --include-ignored --nocapture \
  cuda_no_gpu:: cuda_gpu:: cuda_nvrtc::
cargo test --release -p rimms-runtime --lib backend::cuda
# gpu(n) as a runtime device: the card tests on GPU 0, the apps on the gpu mapping.
cargo test --release -p rimms --test it -- --include-ignored --nocapture gpu::
cargo test --release -p rimms-cli --test it -- modes:: cli::

echo "== FZF benchmark (2,048 points x 512)"
cargo run --release -p rimms-runtime --example gpu_fzf_bench -- --frames "$FRAMES"
echo "== 2FFT benchmark (2,048 points x 512)"
cargo run --release -p rimms-runtime --example gpu_fzf_bench -- --chain 2fft --frames "$FRAMES"

echo "== SAR on the GPU (256 x 512: baseline, tracked, hand-written cudarc)"
cargo run --release -p rimms-cli --example gpu_sar -- "$FRAMES"

echo "== rimms bench (every app and mapping, gpu included)"
./target/release/rimms bench --frames "$FRAMES"
