#!/usr/bin/env bash
# GPU check of the CUDA backend (rimms-runtime, feature `cuda`) and of gpu(n) as a runtime
# device: a release build, the GPU tests, the FZF benchmark (2,048 points x 512: baseline,
# runtime baseline, tracked, the CUDA layer alone, hand-written cudarc), the SAR benchmark
# (baseline, tracked, hand-written cudarc), and the `rimms bench` table with its gpu rows.
#
# Run it on a machine with an NVIDIA GPU, its driver, and the CUDA 12 (or 13) runtime
# libraries libnvrtc and libcufft. No CUDA toolkit is needed to build: cudarc opens the
# libraries when the program runs.
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

# cudarc's bindings are pinned to CUDA 12.6; it opens the libraries by their usual names
# (libnvrtc.so, .so.12, .so.11 ...; libcufft.so, .so.12, .so.11 ...) through the loader path.
# Add the folders where CUDA installs them (toolkit folders, pip's nvidia-* wheels), and where
# only a CUDA 13 libnvrtc.so.13 exists, give it the plain name in a private folder.
libdirs=()
add_dir() {
  local d
  for d in "${libdirs[@]+"${libdirs[@]}"}"; do
    [[ "$d" == "$1" ]] && return 0
  done
  libdirs+=("$1")
}
candidates=()
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib /usr/local/cuda-*/lib64 \
  /usr/local/cuda-*/targets/*/lib /opt/cuda*/lib64; do
  [[ -d "$d" ]] && candidates+=("$d")
done
if command -v python3 >/dev/null; then
  while read -r sp; do
    for d in "$sp"/nvidia/*/lib; do
      [[ -d "$d" ]] && candidates+=("$d")
    done
  done < <(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)
fi
for d in "${candidates[@]+"${candidates[@]}"}"; do
  if compgen -G "$d/libnvrtc.so*" >/dev/null || compgen -G "$d/libcufft.so*" >/dev/null; then
    add_dir "$d"
  fi
done

nvrtc_by_usual_name() {
  local d n
  for d in "${libdirs[@]+"${libdirs[@]}"}"; do
    for n in libnvrtc.so libnvrtc.so.12 libnvrtc.so.11; do
      [[ -e "$d/$n" ]] && return 0
    done
  done
  ldconfig -p 2>/dev/null | grep -qE 'libnvrtc\.so(\.1[12])? '
}
if ! nvrtc_by_usual_name; then
  newest=""
  for d in "${libdirs[@]+"${libdirs[@]}"}"; do
    for f in "$d"/libnvrtc.so.[0-9]*; do
      [[ -e "$f" && "$f" =~ libnvrtc\.so\.[0-9]+$ ]] && newest="$f"
    done
  done
  if [[ -n "$newest" ]]; then
    shim="$(mktemp -d)"
    ln -s "$newest" "$shim/libnvrtc.so"
    libdirs=("$shim" "${libdirs[@]}")
    echo "using $newest as libnvrtc.so"
  fi
fi
if ((${#libdirs[@]})); then
  LD_LIBRARY_PATH="$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"

echo "== build (release)"
cargo build --release -p rimms-runtime --lib --test cuda_gpu --test cuda_no_gpu \
  --example gpu_fzf_bench
cargo build --release -p rimms --test gpu --test device_memory
cargo build --release -p rimms-cli --bins --example gpu_sar

echo "== GPU tests (RIMMS_REQUIRE_GPU=$RIMMS_REQUIRE_GPU)"
cargo test --release -p rimms-runtime --test cuda_no_gpu --test cuda_gpu -- --nocapture
cargo test --release -p rimms-runtime --lib backend::cuda
# gpu(n) as a runtime device: the card tests on GPU 0, the apps on the gpu mapping.
cargo test --release -p rimms --test gpu -- --nocapture
cargo test --release -p rimms-cli --test modes --test cli

echo "== FZF benchmark (2,048 points x 512)"
cargo run --release -p rimms-runtime --example gpu_fzf_bench -- --frames "$FRAMES"

echo "== SAR on the GPU (256 x 512: baseline, tracked, hand-written cudarc)"
cargo run --release -p rimms-cli --example gpu_sar -- "$FRAMES"

echo "== rimms bench (every app and mapping, gpu included)"
./target/release/rimms bench --frames "$FRAMES"
