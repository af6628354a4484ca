#!/usr/bin/env bash
# The GPU suite and the benchmarks in one call on the device machine. It builds nothing: run
# it from the repository root with build/ carried (binaries from scripts/setup.sh here), e.g.
#   device run: scripts/device-suite.sh   carry: build/tools/mt-run build/test build/demo
# Each part's output goes to $OUT/NAME.txt; the exit code counts the parts that failed.
set -uo pipefail
out="${OUT:-/tmp/mt-device-suite}"
mkdir -p "$out"
failed=0
part() {
  local name=$1
  shift
  echo "== $name"
  "$@" 2>&1 | tee "$out/$name.txt" || { echo "!! $name failed"; failed=$((failed + 1)); }
}

part device nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
part gpu-matmul build/test/mt-gpu-matmul-test
part gpu-pinned build/test/mt-gpu-pinned-test build/demo/model.mtp
part adamw build/test/mt-adamw-test
part torch-adamw bash -c 'python3 scripts/bench_adamw.py fused && python3 scripts/bench_adamw.py foreach'
part calibrate-gpu build/tools/mt-run --calibrate "$out/gpu-profile.json" --backend=cuda
part calibrate-host build/tools/mt-run --calibrate "$out/host-profile.json" --backend=host
exit "$failed"
