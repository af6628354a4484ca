#!/usr/bin/env bash
# Installs what mt needs from Debian 12's packages (only what is missing) and builds it into
# build/. `setup.sh --tests` also installs what the test suite uses.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
packages=(build-essential cmake ninja-build llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
          libprotobuf-dev protobuf-compiler libonnx-dev python3)
if [[ "${1:-}" == "--tests" ]]; then
  # Fixture models are exported by Debian's torch 1.13 and rewritten with its onnx 1.12.
  packages+=(python3-torch python3-onnx python3-numpy)
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

cmake -S "$root" -B "$root/build" -G Ninja \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
cmake --build "$root/build"
