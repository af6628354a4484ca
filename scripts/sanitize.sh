#!/usr/bin/env bash
# Builds mt and its tests under AddressSanitizer and UndefinedBehaviorSanitizer into
# build-asan/ (gcc, no CUDA backend: the sanitizers see the host side) and runs the whole
# lit suite there; a test that trips a sanitizer fails with its report.
# Usage: scripts/sanitize.sh [LIT FILTER REGEX]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-asan"
cmake -S "$root" -B "$build" -G Ninja -DMT_SANITIZE=ON -DMT_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
cmake --build "$build"
# Leaks of the tools at exit are not errors (MLIR's contexts are torn down by the OS); the
# rest is: any sanitizer report fails the test that caused it.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cmake --build "$build" --target mt-fixtures
# The onnxruntime oracle of the save-onnx tests: the normal build's venv (scripts/setup.sh).
[[ -d "$root/build/test-venv" ]] && ln -sfn "$root/build/test-venv" "$build/test-venv"
PATH=/usr/lib/llvm-19/bin:$PATH python3 /usr/lib/llvm-19/build/utils/lit/lit.py -sv \
  ${1:+--filter "$1"} "$build/test"
