#!/usr/bin/env bash
# Compiles here (where mtc is) every plan the GPU suite runs on the device machine (which
# has no mtc), with their token files, into build/device; scripts/device-suite.sh runs them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# MTC_CHECKPOINTS=host (or device) compiles every plan that names neither --checkpoints nor
# --resident-layers with it, in place of mtc's placement policy (auto).
mtc() {
  local args=("$@")
  if [[ -n "${MTC_CHECKPOINTS:-}" && ! " $* " =~ --checkpoints|--resident-layers ]]; then
    args+=("--checkpoints=$MTC_CHECKPOINTS")
  fi
  "$root/build/tools/mtc" "${args[@]}"
}
fixtures="$root/build/test/fixtures"
out="$root/build/device"
rm -rf "$out"
mkdir -p "$out/gradients" "$out/gradients-fp32"

# One plan per family of ops: every kernel's forward and backward against the host backend,
# with bf16 device storage and with fp32 (where the device must agree to fp32 rounding).
for model in "$root"/test/Gradients/*.mlir; do
  mtc "$model" -o "$out/gradients/$(basename "$model" .mlir).mtp"
  mtc "$model" --device-precision=fp32 -o "$out/gradients-fp32/$(basename "$model" .mlir).mtp"
done
# Token ids below the embedding-loss graph's vocabulary of 5.
/usr/bin/python3 -c "
import numpy as np
np.random.default_rng(0).integers(0, 5, 64, dtype=np.uint16).tofile('$out/gradients/ids.tokens')"

# The stage-2 fixtures, and the Llama one with two layers per checkpoint and two layer-major
# micro-batches (recompute, accumulation, checkpoint copies).
mtc "$fixtures/gpt2_opset17.onnx" --input-shape input_ids:2x16 -o "$out/gpt2.mtp"
mtc "$fixtures/llama_opset17.onnx" --input-shape input_ids:2x16 -o "$out/llama.mtp"
mtc "$fixtures/llama_opset17.onnx" --input-shape input_ids:2x16 --recompute-interval 2 \
  --micro-batches 2 --accumulation layer-major -o "$out/llama-k2-m2.mtp"
# Two sample-major micro-batches: the step runs twice and the host sums the gradients, so the
# updates wait for the whole step.
mtc "$fixtures/llama_opset17.onnx" --input-shape input_ids:2x16 --micro-batches 2 \
  --accumulation sample-major -o "$out/llama-s2.mtp"
# The same without layer templates, so that --check-kernels sees every kernel of the step
# (the summed weight gradients become products with an addend).
mtc "$fixtures/llama_opset17.onnx" --input-shape input_ids:2x16 --micro-batches 2 \
  --accumulation layer-major --segment-layers=false -o "$out/llama-m2-flat.mtp"
mtc "$fixtures/llama_opset17.onnx" --input-shape input_ids:2x16 --device-precision=fp32 \
  -o "$out/llama-fp32.mtp"
# Weights streamed from the host's bf16 copies (split masters' high halves) and from the whole
# fp32 masters (cast on the device).
mtc "$fixtures/llama_opset17.onnx" --input-shape input_ids:2x16 --stream-weights=bf16 \
  -o "$out/llama-copies.mtp"
mtc "$fixtures/llama_opset17.onnx" --input-shape input_ids:2x16 --stream-weights=fp32 \
  -o "$out/llama-masters.mtp"
mtc "$fixtures/gpt2_opset17.onnx" --input-shape input_ids:2x16 --device-precision=fp32 \
  -o "$out/gpt2-fp32.mtp"
cp "$fixtures/reference/gpt2.tokens" "$fixtures/reference/llama.tokens" "$out/"
# Two layer-major micro-batches read two batches a run: the reference tokens twice.
cat "$fixtures/reference/llama.tokens" "$fixtures/reference/llama.tokens" > "$out/llama-m2.tokens"
# Twice the batch, against which two data-parallel ranks of the plans above train, on tokens
# of the fixtures' vocabulary whose batches differ (the reference files hold one batch).
/usr/bin/python3 -c "
import numpy as np
np.random.default_rng(2).integers(0, 96, 4000, dtype=np.uint16).tofile('$out/parallel.tokens')"
mtc "$fixtures/gpt2_opset17.onnx" --input-shape input_ids:4x16 -o "$out/gpt2-b4.mtp"
mtc "$fixtures/llama_opset17.onnx" --input-shape input_ids:4x16 -o "$out/llama-b4.mtp"

# The fixture zoo (Hugging Face decoders exported by a current torch): every model, with and
# without an attention_mask input; PyTorch's losses, and the Llama's pretrained weights with
# PyTorch's steps from them.
zoo="$root/test/Zoo/Models"
mkdir -p "$out/zoo"
for packed in "$zoo"/*.onnx.gz; do
  name=$(basename "$packed" .onnx.gz)
  shapes=(--input-shape input_ids:2x16)
  [[ "$name" == *.mask ]] && shapes+=(--input-shape attention_mask:2x16)
  gzip -dc "$packed" > "$out/zoo/model.onnx"
  mtc "$out/zoo/model.onnx" "${shapes[@]}" -o "$out/zoo/$name.mtp"
done
rm "$out/zoo/model.onnx"
cp "$zoo"/*.losses.json "$zoo"/*.safetensors "$zoo"/zoo*.tokens "$out/zoo/"
cp -r "$zoo"/*.pretrained "$out/zoo/"

# The demo model at its training shape, with its corpus.
/usr/bin/python3 "$root/examples/tiny-gpt/prepare_data.py" "$out" >/dev/null
mtc "$root/examples/tiny-gpt/model.onnx" --input-shape input_ids:8x64 -o "$out/demo.mtp"

# A Llama-style model of 1.1B parameters (hidden 2048, 20 layers, 16 heads over 8 key/value
# heads, SwiGLU 5632, vocabulary 32000), 4 x 1024 tokens a step, random weights, and random
# tokens for 20 steps.
/usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/llama-1b.onnx" 20 2048 16 8 5632 32000 1024
mtc "$out/llama-1b.onnx" --input-shape input_ids:4x1024 --summary
mtc "$out/llama-1b.onnx" --input-shape input_ids:4x1024 -o "$out/llama-1b.mtp"
# Its gradients landing in host memory and pulled from a device ring, for the suite to compare;
# and with every weight persistent on the device across steps, each way, every update on the
# host unless mt-run --device-updates asks (the suite compares the two).
for ring in host device; do
  mtc "$out/llama-1b.onnx" --input-shape input_ids:4x1024 --gradient-ring=$ring \
    -o "$out/llama-1b-ring-$ring.mtp"
  mtc "$out/llama-1b.onnx" --input-shape input_ids:4x1024 --gradient-ring=$ring \
    --persistent-layers=20 --device-updates=0 -o "$out/llama-1b-persistent-$ring.mtp"
done
# Every layer keeping the activations its backward reads, in place of recomputing its forward.
mtc "$out/llama-1b.onnx" --input-shape input_ids:4x1024 --gradient-ring=host --saved-layers=20 \
  -o "$out/llama-1b-saved.mtp"
/usr/bin/python3 -c "
import numpy as np
np.random.default_rng(0).integers(0, 32000, 4 * 1024 * 24, dtype=np.uint16).tofile('$out/llama-1b.tokens')"
rm "$out/llama-1b.onnx"

# The peers' "1b" shape (shared/bench/peer_bench.py: hidden 2048, 16 layers, 16 heads,
# SwiGLU 5632, vocabulary 32000) at 4 x 2048 tokens a step, for the side-by-side benchmark;
# the peer script travels with the plans.
/usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/bench-1b.onnx" 16 2048 16 16 5632 32000 2048
mtc "$out/bench-1b.onnx" --input-shape input_ids:4x2048 -o "$out/bench-1b.mtp"
/usr/bin/python3 -c "
import numpy as np
np.random.default_rng(1).integers(0, 32000, 4 * 2049 * 12, dtype=np.uint16).tofile('$out/bench-1b.tokens')"
rm "$out/bench-1b.onnx"
cp "$root/../shared/bench/peer_bench.py" "$out/"

# With WITH_3_8B=1, the 3.82B benchmark model (hidden 3072, 32 layers, 24 heads, SwiGLU 8192,
# vocabulary 32000) at 8 x 2048 tokens, for the suite's checkpoint of 45.8 GB (minutes, and
# most of the device's disk: left out unless asked for).
if [[ "${WITH_3_8B:-0}" == 1 ]]; then
  /usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/bench-3.8b.onnx" 32 3072 24 24 8192 32000 2048
  mtc "$out/bench-3.8b.onnx" --input-shape input_ids:8x2048 -o "$out/bench-3.8b.mtp"
  # Both sources of the streamed weights, at 8 and 32 sequences a step (every layer
  # recomputing: saved activations would fill an H200's memory at 32).
  for source in bf16 fp32; do
    mtc "$out/bench-3.8b.onnx" --input-shape input_ids:8x2048 --stream-weights=$source \
      -o "$out/bench-3.8b-$source.mtp"
    mtc "$out/bench-3.8b.onnx" --input-shape input_ids:8x2048 --micro-batches 4 \
      --saved-layers 0 --stream-weights=$source -o "$out/bench-3.8b-m4-$source.mtp"
  done
  /usr/bin/python3 -c "
import numpy as np
np.random.default_rng(2).integers(0, 32000, 8 * 2049 * 16, dtype=np.uint16).tofile('$out/bench-3.8b.tokens')"
  rm "$out/bench-3.8b.onnx"
fi

# With WITH_9B=1, the largest Llama-style models for the device's host (#17), 8 x 2048 tokens a
# step: the Llama-2-7B shape (hidden 4096, 32 layers, 32 heads, SwiGLU 11008, vocabulary 32000:
# 6.74B parameters) streaming the whole fp32 masters, as asked, and a 9.2B one (41 layers, 32
# heads over 8 key-value heads, SwiGLU 14336: 111 GiB on the host with three layers' gradients
# and the checkpoints) streaming the bf16 copies, mtc's auto: split masters hold them in the
# same 12 bytes a parameter.
if [[ "${WITH_9B:-0}" == 1 ]]; then
  for model in "7b 32 4096 32 32 11008 fp32" "9b 41 4096 32 8 14336 auto"; do
    read -r name layers hidden heads kv ffn source <<<"$model"
    /usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/bench-$name.onnx" $layers $hidden $heads $kv $ffn 32000 2048
    mtc "$out/bench-$name.onnx" --input-shape input_ids:8x2048 --stream-weights=$source --summary -o - >"$out/bench-$name.summary"
    mtc "$out/bench-$name.onnx" --input-shape input_ids:8x2048 --stream-weights=$source -o "$out/bench-$name.mtp"
    # The 9.2B step with every weight persistent and the gradients pulled, and updates on the
    # device as many as mtc's auto picks, their state resident where the device has room: the
    # host's AdamW bounds the step above.
    [[ $name == 9b ]] && mtc "$out/bench-$name.onnx" --input-shape input_ids:8x2048 \
      --persistent-layers $layers --gradient-ring=device --device-updates=auto \
      -o "$out/bench-$name-u.mtp"
    rm "$out/bench-$name.onnx"
  done
  /usr/bin/python3 -c "
import numpy as np
np.random.default_rng(3).integers(0, 32000, 8 * 2049 * 11, dtype=np.uint16).tofile('$out/bench-7b.tokens')"
fi

# With WITH_120B=1, the 120.7B graph's layers (#17): hidden 10240, 80 heads over 8 key-value
# heads, SwiGLU 28672, 8 x 2048 tokens a step. The host holds 2 and 4 of them (35 and 61 GB at
# 12 bytes a parameter), not 108 (1.45 TB): the device measures the 2- and 4-layer steps, whose
# difference is a layer's, and mtc's prediction for all 108 is kept beside them.
if [[ "${WITH_120B:-0}" == 1 ]]; then
  for layers in 2 4 108; do
    /usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/s120-$layers.onnx" $layers 10240 80 8 28672 32000 2048
    mtc "$out/s120-$layers.onnx" --input-shape input_ids:8x2048 --summary=json \
      -o "$out/s120-$layers.summary.json"
    [[ $layers == 108 ]] || mtc "$out/s120-$layers.onnx" --input-shape input_ids:8x2048 -o "$out/s120-$layers.mtp"
    rm "$out/s120-$layers.onnx"
  done
  /usr/bin/python3 -c "
import numpy as np
np.random.default_rng(4).integers(0, 32000, 8 * 2049 * 6, dtype=np.uint16).tofile('$out/s120.tokens')"
fi

# With WITH_WINDOW=1, two layer structures in one model (#17): the 1.1B benchmark shape (16
# layers, hidden 2048, 16 heads) at one sequence of 8192 tokens, its even layers attending
# through a sliding window of 2048 keys and its odd ones globally (two templates), beside the
# same model all global.
if [[ "${WITH_WINDOW:-0}" == 1 ]]; then
  for name in window global; do
    /usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/$name-8192.onnx" 16 2048 16 16 5632 32000 8192 \
      $([[ $name == window ]] && echo window=2048)
    mtc "$out/$name-8192.onnx" --input-shape input_ids:1x8192 --summary -o - >"$out/$name-8192.summary"
    mtc "$out/$name-8192.onnx" --input-shape input_ids:1x8192 -o "$out/$name-8192.mtp"
    rm "$out/$name-8192.onnx"
  done
  /usr/bin/python3 -c "
import numpy as np
np.random.default_rng(6).integers(0, 32000, 8193 * 6, dtype=np.uint16).tofile('$out/window-8192.tokens')"
fi

# With WITH_PERF=1, the performance rows of #16 for scripts/device-bench.sh: the 3.82B
# benchmark model (hidden 3072, 32 layers, 24 heads, SwiGLU 8192), a 32B model's layer shape
# (hidden 5120, 40 heads, SwiGLU 27648) x 8 layers and a 120B model's (hidden 10240, 80 heads,
# SwiGLU 28672) x 4 layers, each with the peers' full-width heads and vocabulary 32000, at 8
# sequences of 2048 a step and at 32 (four layer-major micro-batches).
if [[ "${WITH_PERF:-0}" == 1 ]]; then
  for model in "3.8b 32 3072 24 8192" "32bl 8 5120 40 27648" "120bl 4 10240 80 28672"; do
    read -r name layers hidden heads ffn <<<"$model"
    /usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/perf-$name.onnx" $layers $hidden $heads $heads $ffn 32000 2048
    # Every layer recomputing its forward in the backward (--saved-layers 0; mtc's auto would
    # fill an H200's memory with saved activations at 32 sequences): the -32s rows' baseline.
    for micro in 1 4; do
      mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --micro-batches $micro \
        --accumulation layer-major --saved-layers 0 \
        -o "$out/perf-$name-$((8 * micro)).mtp"
    done
    # Every layer's weights resident from forward to backward: the 8-sequence rows, whose
    # step is the host memory's, with a crossing a step less.
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --resident-layers $layers \
      -o "$out/perf-$name-8r.mtp"
    # Without the compiler's placement where AdamW is behind (mtc --checkpoints=auto, the
    # default: checkpoints and as many layers resident as the device has room for, where it
    # predicts a faster step): checkpoints in host memory, weights streamed twice.
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --checkpoints=host \
      -o "$out/perf-$name-8h.mtp"
    # Pulled gradients (mtc --gradient-ring=device: a device ring each update pulls its
    # gradient from), beside the default's, which land in host memory; the summary says
    # whether auto would pull them too.
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --gradient-ring=auto --summary |
      grep '^gradients'
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --gradient-ring=device \
      -o "$out/perf-$name-8p.mtp"
    # Every weight persistent on the device across steps (each update's bf16 copy sent to
    # it a piece at a time as the update writes it), gradients landed and pulled, every
    # update on the host (mtc's auto would put some on the device: the -8kpu rows).
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --persistent-layers $layers \
      --summary | grep -E '^(device|per step)'
    for ring in host device; do
      mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --persistent-layers $layers \
        --gradient-ring=$ring --device-updates=0 \
        -o "$out/perf-$name-8k$([[ $ring == device ]] && echo p).mtp"
    done
    # Updates on the device (every weight persistent, gradients pulled), their state resident
    # in device memory: the count the cost model picks for an H100, recomputing (-8kpu) and
    # every layer saving its activations (-8kpsu).
    for saved in 0 $layers; do
      flags=(--input-shape input_ids:8x2048 --saved-layers $saved --persistent-layers $layers
        --gradient-ring=device --device-updates=auto --target h100)
      mtc "$out/perf-$name.onnx" "${flags[@]}" --summary | grep -E '^(updates|per step)'
      mtc "$out/perf-$name.onnx" "${flags[@]}" \
        -o "$out/perf-$name-8kp$([[ $saved == 0 ]] || echo s)u.mtp"
    done
    # Every layer keeping the activations its backward reads (mtc --saved-layers) in place of
    # recomputing its forward there: a quarter of the products less, at a layer's activations
    # each on the device; streamed, and persistent with pulled gradients.
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --saved-layers $layers \
      --summary | grep -E '^(device|per step|recompute)'
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --saved-layers $layers \
      -o "$out/perf-$name-8s.mtp"
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --saved-layers $layers \
      --persistent-layers $layers --gradient-ring=device --device-updates=0 \
      -o "$out/perf-$name-8kps.mtp"
    # At 32 sequences (four layer-major micro-batches) a saving layer keeps four micro-batches'
    # activations: as many layers save as an H100's memory leaves room for (mtc's auto for
    # the built-in H100 profile, so that the row runs on either card).
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --micro-batches 4 \
      --accumulation layer-major --saved-layers auto --target h100 --summary | grep '^saved'
    mtc "$out/perf-$name.onnx" --input-shape input_ids:8x2048 --micro-batches 4 \
      --accumulation layer-major --saved-layers auto --target h100 \
      -o "$out/perf-$name-32s.mtp"
    rm "$out/perf-$name.onnx"
  done
  /usr/bin/python3 -c "
import numpy as np
np.random.default_rng(8).integers(0, 32000, 32 * 2049 * 6, dtype=np.uint16).tofile('$out/perf.tokens')"
fi

# With WITH_LONG=1, long context (#17): the Llama-2-7B shape at sequences 32768, 57344 and
# 65536 (opset 23's causal Attention: no sequence x sequence mask in the model) within a 16 GiB
# device budget (their plans' peaks are 8.4, 13.7 and 15.3 GiB).
if [[ "${WITH_LONG:-0}" == 1 ]]; then
  # The Llama-3-8B shape (32 layers, hidden 4096, 32 heads over 8, SwiGLU 14336, vocabulary
  # 128256: 8.03B parameters) at 32768: its head's logits alone would be 8 GiB in bf16; the
  # loss fused with the head makes them a chunk at a time.
  /usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/long3-32768.onnx" 32 4096 32 8 14336 128256 32768 causal
  mtc "$out/long3-32768.onnx" --input-shape input_ids:1x32768 --device-memory=16GiB --summary -o - >"$out/long3-32768.summary"
  mtc "$out/long3-32768.onnx" --input-shape input_ids:1x32768 --device-memory=16GiB -o "$out/long3-32768.mtp"
  rm "$out/long3-32768.onnx"
  /usr/bin/python3 -c "
import numpy as np
np.random.default_rng(7).integers(0, 128256, 32769 * 4, dtype=np.uint32).tofile('$out/long3-32768.tokens')"
  for seq in 32768 57344 65536; do
    /usr/bin/python3 "$root/scripts/make_scale_model.py" "$out/long-$seq.onnx" 32 4096 32 32 11008 32000 $seq causal
    mtc "$out/long-$seq.onnx" --input-shape input_ids:1x$seq --device-memory=16GiB --summary -o - >"$out/long-$seq.summary"
    mtc "$out/long-$seq.onnx" --input-shape input_ids:1x$seq --device-memory=16GiB -o "$out/long-$seq.mtp"
    rm "$out/long-$seq.onnx"
    /usr/bin/python3 -c "
import numpy as np
np.random.default_rng(5).integers(0, 32000, ($seq + 1) * 4, dtype=np.uint16).tofile('$out/long-$seq.tokens')"
  done
fi
