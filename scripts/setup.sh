#!/usr/bin/env bash
# Installs what mt needs from Debian 12's packages (only what is missing) and builds it into
# build/. `setup.sh --tests` also installs what the test suite uses.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
packages=(build-essential cmake ninja-build llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
          libprotobuf-dev protobuf-compiler libonnx-dev python3)
if [[ "${1:-}" == "--tests" ]]; then
  # Fixture models are exported by Debian's torch 1.13 and rewritten with its onnx 1.12.
  packages+=(python3-torch python3-onnx python3-numpy python3-venv)
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=()
  [[ "$(id -u)" -ne 0 ]] && sudo=(sudo)
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# onnxruntime, the oracle for the models mt-run --save-onnx writes, comes from PyPI into a
# venv of the build (Debian has no package of it).
if [[ "${1:-}" == "--tests" ]]; then
  venv="$root/build/test-venv"
  if ! "$venv/bin/python" -c "import onnxruntime, numpy" 2>/dev/null; then
    echo "setup: installing onnxruntime and numpy from PyPI into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q onnxruntime numpy
  fi
fi

cmake -S "$root" -B "$root/build" -G Ninja \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
cmake --build "$root/build"
