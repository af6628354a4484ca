#!/usr/bin/env bash
# The README's first command: set up, build, and compile the bundled example model.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/build/tools/mtc" "$root/examples/tiny-gpt/model.onnx" --input-shape input_ids:8x64 --summary
