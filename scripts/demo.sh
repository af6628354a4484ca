#!/usr/bin/env bash
# The README's first command: set up and build, then train the bundled GPT-style model on
# the host backend (about a minute on 2 cores) and draw its loss curve.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"

out="$root/build/demo"
model="$root/examples/tiny-gpt/model.onnx"
/usr/bin/python3 "$root/examples/tiny-gpt/prepare_data.py" "$out"
"$root/build/tools/mtc" "$model" --input-shape input_ids:8x64 --summary
"$root/build/tools/mtc" "$model" --input-shape input_ids:8x64 -o "$out/model.mtp"
"$root/build/tools/mt-run" "$out/model.mtp" --data "$out/corpus.bin" --steps 600 \
  --lr 3e-3 --warmup 30 --schedule cosine --min-lr 3e-4 \
  --metrics "$out/metrics.jsonl" --save-weights "$out/weights.safetensors"
/usr/bin/python3 "$root/scripts/plot_loss.py" "$out/metrics.jsonl" "$out/loss.png"
