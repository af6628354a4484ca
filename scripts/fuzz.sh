#!/usr/bin/env bash
# Builds the fuzz targets (test/Fuzz) with clang, libFuzzer, ASan and UBSan into build-fuzz/
# and runs each for SECONDS (default 120) from a copy of its seed corpus, the new inputs kept
# in build-fuzz/corpus/TARGET. A target that crashes, leaks past the limits or trips a
# sanitizer stops with its input saved (build-fuzz/crash-*); the summary is
# appended to build-fuzz/fuzz-results.txt: executions and the corpus grown, per target.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET ...]   (targets: plan tokens safetensors onnx
#        onnx-text; default all)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"
seconds="${1:-120}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(plan tokens safetensors onnx onnx-text)

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMT_FUZZERS=ON \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
cmake --build "$build" --target "${targets[@]/#/mt-fuzz-}"

# A hostile size must come back as an error, not a crash: allocations the allocator cannot
# make return null (std::bad_alloc), and none may exceed 2 GiB.
# The targets write each input to a file (the loaders read paths): in memory where it can.
[[ -d /dev/shm && -w /dev/shm ]] && export TMPDIR=/dev/shm
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== $(date -u +%F\ %T) clang $(clang -dumpversion), $seconds s a target" >> "$build/fuzz-results.txt"
for target in "${targets[@]}"; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  if [[ $target == onnx-text ]]; then
    cp "$root"/test/Frontend/*.onnxtxt "$root"/test/Fuzz/Corpus/onnx-text/* "$corpus/"
  else
    cp "$root/test/Fuzz/Corpus/$target"/* "$corpus/"
  fi
  log="$build/fuzz-$target.log"
  (cd "$build" && "./test/Fuzz/mt-fuzz-$target" "$corpus" -max_total_time="$seconds" \
    -rss_limit_mb=4096 -malloc_limit_mb=2048 -timeout=30 -print_final_stats=1 >"$log" 2>&1) ||
    { echo "$target: FAILED (see $log)" | tee -a "$build/fuzz-results.txt"; continue; }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "$target: $runs executions in $seconds s, nothing found, corpus $(ls "$corpus" | wc -l) inputs" |
    tee -a "$build/fuzz-results.txt"
done
