#!/usr/bin/env bash
# Writes the fuzz targets' seed corpus (test/Fuzz/Corpus), run by developers after a build
# (build/tools, build/test/fixtures); the ONNX text target's seeds are test/Frontend's models.
#   plan/         plans mtc compiles: a Llama, GPT-2 with two micro-batches, a Gemma with an
#                 attention mask, fp32 storage with K=2; and one cut short
#   tokens/       the first byte picks the format (even: uint16, odd: uint32), the rest a file
#   safetensors/  weights mt-run saves, and a small bf16/f16 file
#   onnx/         binary models from test/Frontend's text ones
#   onnx-text/    (the text target's seeds are test/Frontend's models; here only found-*)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
corpus="$root/test/Fuzz/Corpus"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The inputs fuzzing found faults with (found-*) stay: they are the regression seeds.
find "$corpus" -type f ! -name 'found-*' -delete 2>/dev/null || true
mkdir -p "$corpus"/{plan,tokens,safetensors,onnx,onnx-text}

mtc="$build/tools/mtc" fixtures="$build/test/fixtures"
"$mtc" "$fixtures/llama_opset14.onnx" --input-shape input_ids:2x16 -o "$corpus/plan/llama.mtp"
"$mtc" "$fixtures/gpt2_opset14.onnx" --input-shape input_ids:2x16 --micro-batches 2 \
  -o "$corpus/plan/gpt2-m2.mtp"
"$mtc" "$fixtures/llama_opset14.onnx" --input-shape input_ids:2x16 --device-precision=fp32 \
  --recompute-interval=2 -o "$corpus/plan/llama-fp32-k2.mtp"
gzip -dc "$root/test/Zoo/Models/gemma.dynamo.mask.onnx.gz" > "$work/gemma.onnx"
"$mtc" "$work/gemma.onnx" --input-shape input_ids:2x16 --input-shape attention_mask:2x16 \
  -o "$corpus/plan/gemma-mask.mtp"
head -c 5000 "$corpus/plan/llama.mtp" > "$corpus/plan/llama-cut.mtp"
rm -f "$corpus"/plan/*.weights

/usr/bin/python3 - "$corpus" <<'PY'
import json, struct, sys
corpus = sys.argv[1]
tokens = [(7 * i + 3) % 96 for i in range(200)]
open(f"{corpus}/tokens/u16", "wb").write(b"\x00" + struct.pack("<200H", *tokens))
open(f"{corpus}/tokens/u32", "wb").write(b"\x01" + struct.pack("<200I", *tokens))
header = struct.pack("<256i", 20240520, 1, 200, *([0] * 253))
open(f"{corpus}/tokens/llmc", "wb").write(b"\x02" + header + struct.pack("<200H", *tokens))
meta = {"a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
        "b": {"dtype": "F16", "shape": [4], "data_offsets": [12, 20]},
        "__metadata__": {"format": "pt"}}
text = json.dumps(meta).encode()
open(f"{corpus}/safetensors/half.safetensors", "wb").write(
    struct.pack("<Q", len(text)) + text + bytes(range(20)))
PY
tail -c +2 "$corpus/tokens/u16" > "$work/tokens"
"$build/tools/mt-run" "$corpus/plan/llama.mtp" --init random --data "$work/tokens" \
  --steps 1 --save-weights "$corpus/safetensors/llama.safetensors" > /dev/null

/usr/bin/python3 - "$root/test/Frontend" "$corpus/onnx" <<'PY'
import glob, os, sys
import onnx.parser
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.onnxtxt"))):
    try:
        model = onnx.parser.parse_model(open(path).read())
    except Exception:
        continue  # text the parser of this onnx refuses: the text target's seed alone
    name = os.path.basename(path).replace(".onnxtxt", ".onnx")
    open(os.path.join(sys.argv[2], name), "wb").write(model.SerializeToString())
PY
du -sh "$corpus"
