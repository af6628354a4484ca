#!/usr/bin/env bash
# The GPU suite and the benchmarks in one call on the device machine. It builds nothing: the
# binaries and plans are made here first (scripts/setup.sh, then scripts/make_device_plans.sh)
# and carried:
#   device run: scripts/device-suite.sh   carry: build/tools/mt-run build/test/mt-gpu-*
#   build/test/mt-adamw-test build/device
# The whole zoo's plans and the tree pass the device tool's 64 MiB: carry half of the zoo
# (build/device/zoo's *.mask.mtp and their .weights, or the others) a call, with
# SUITE_PARTS=zoo in the second.
# Each part's output goes to NAME.txt in $OUT/suite.tar.gz (the device tool brings back few
# files), a line per part to $OUT/summary.txt; the exit code counts the parts that failed.
# SUITE_PARTS (a regex over part names) runs a subset; SUITE_SKIP (another) leaves parts out.
set -uo pipefail
final="${OUT:-/tmp/mt-device-suite}"
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar czf "$final/suite.tar.gz" -C "$out" . && cp "$out"/*.json "$final/" 2>/dev/null' EXIT
run=build/tools/mt-run
plans=build/device
compare=test/Train/Inputs/compare_losses.py
failed=0
part() {
  local name=$1
  shift
  [[ "$name" =~ ${SUITE_PARTS:-.} ]] || return 0
  [[ -n "${SUITE_SKIP:-}" && "$name" =~ $SUITE_SKIP ]] && return 0
  echo "== $name"
  local start=$SECONDS
  "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.txt"
  echo "-- $name: rc $rc, $((SECONDS - start)) s" | tee -a "$final/summary.txt"
  [ $rc -eq 0 ] || { echo "!! $name failed"; failed=$((failed + 1)); }
}

# Trains PLAN for STEPS steps on the device and on the host backend from the same weights and
# tokens, with mt-run's further ARGS, into metrics NAME (default: the plan's); the losses and
# the gradient norms must agree within 2e-2 relative at every step.
train_both() {
  local plan=$1 data=$2 steps=$3 name=${4:-$(basename "$1" .mtp)}
  shift 4 2>/dev/null || shift $#
  $run "$plan" --data "$data" --steps "$steps" --backend=cuda --metrics "$out/$name.cuda.jsonl" "$@" &&
    $run "$plan" --data "$data" --steps "$steps" --backend=host --metrics "$out/$name.host.jsonl" "$@" &&
    python3 $compare "$out/$name.cuda.jsonl" "$out/$name.host.jsonl" --tolerance 2e-2 --grad-norms
}

part device nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
part gpu-matmul build/test/mt-gpu-matmul-test
part gpu-pinned build/test/mt-gpu-pinned-test $plans/demo.mtp
# The device's AdamW (--device-updates) against the host's, bit for bit.
part gpu-device-adamw build/test/mt-gpu-device-adamw-test

# Every kernel, forward and backward, against the host backend: one step of each op family's
# test graph, loss and every gradient. With fp32 device storage they must agree to 1e-4: each
# kernel's own error. With bf16 storage the error is the rounding carried through the graph
# (within 6e-2 of each gradient's largest element; 1e-1 for the elementwise graph, whose
# gradient of b is a difference of terms ten times its size, so that bf16's rounding of each
# term, 0.4%, comes to 4-6% of it).
for plan in $plans/gradients/*.mtp; do
  name=$(basename "$plan" .mtp)
  bound=6e-2
  [[ $name == elementwise ]] && bound=1e-1
  part "kernels-$name" $run "$plan" --check-against-host --init random --seed 1 \
    --data $plans/gradients/ids.tokens --check-tolerance $bound
  part "kernels-fp32-$name" $run $plans/gradients-fp32/$name.mtp --check-against-host \
    --init random --seed 1 --data $plans/gradients/ids.tokens --check-tolerance 1e-4
  # Each kernel alone with bf16 storage: the host backend runs every command again from the
  # operands the device read, within 1e-2 of the result's largest element.
  part "kernels-each-$name" $run "$plan" --check-kernels --init random --seed 1 \
    --data $plans/gradients/ids.tokens
done
# cuDNN's attention on the attention graphs (mt-run's default, cudnn: forward and backward,
# dq summed with atomics; cudnn-deterministic; cudnn-forward). The device has cuDNN: the
# first part fails unless cuDNN ran the forward, the next two unless it ran the backward
# (attention-inner: gradients that stay in bf16, as in a model's layers).
part cudnn-attention bash -c "$run $plans/gradients/attention-tiles.mtp --check-against-host \
  --init random --seed 1 --data $plans/gradients/ids.tokens --check-tolerance 6e-2 \
  | tee /dev/stderr | grep -q '[1-9][0-9]* forward and [0-9]* backward calls on cuDNN'"
for kernels in cudnn cudnn-deterministic; do
  part "$kernels-attention-backward" bash -c "$run $plans/gradients/attention-inner.mtp \
    --attention=$kernels --check-against-host --init random --seed 1 \
    --data $plans/gradients/ids.tokens --check-tolerance 6e-2 \
    | tee /dev/stderr | grep -q 'forward and [1-9][0-9]* backward calls on cuDNN'"
done
for name in attention-tiles attention-rope attention-rows attention-inner; do
  for kernels in cudnn cudnn-deterministic cudnn-forward own; do
    part "kernels-$kernels-$name" $run $plans/gradients/$name.mtp --attention=$kernels \
      --check-against-host --init random --seed 1 --data $plans/gradients/ids.tokens \
      --check-tolerance 6e-2
    part "kernels-each-$kernels-$name" $run $plans/gradients/$name.mtp --attention=$kernels \
      --check-kernels --init random --seed 1 --data $plans/gradients/ids.tokens
  done
done
part "kernels-each-llama-m2-flat" $run $plans/llama-m2-flat.mtp --check-kernels \
  --data $plans/llama-m2.tokens
# The full gradient of the fixture models and the demo model, device against host.
for model in gpt2 llama llama-k2-m2; do
  tokens=$plans/${model%%-*}.tokens
  [[ $model == *-m2 ]] && tokens=$plans/llama-m2.tokens
  part "gradient-$model" $run $plans/$model.mtp --data $tokens --check-against-host
done
for model in gpt2 llama; do
  part "gradient-fp32-$model" $run $plans/$model-fp32.mtp --data $plans/$model.tokens \
    --check-against-host --check-tolerance 1e-4
done
part gradient-demo $run $plans/demo.mtp --data $plans/corpus.bin --check-against-host

# 20 training steps, device against host.
part train-gpt2 train_both $plans/gpt2.mtp $plans/gpt2.tokens 20
part train-llama train_both $plans/llama.mtp $plans/llama.tokens 20
part train-llama-k2-m2 train_both $plans/llama-k2-m2.mtp $plans/llama-m2.tokens 20
part train-demo train_both $plans/demo.mtp $plans/corpus.bin 20
# Clipped (the updates once every gradient is measured), and with sample-major micro-batches
# (the updates after the step).
part train-llama-clip train_both $plans/llama.mtp $plans/llama.tokens 20 llama-clip --grad-clip 0.5
# Clipped by a measuring pass: each step runs twice, the gradients landing in the ring.
part train-llama-clip-recompute train_both $plans/llama.mtp $plans/llama.tokens 20 \
  llama-clip-recompute --grad-clip 0.5 --grad-clip-memory recompute
part train-llama-k2-m2-clip-recompute train_both $plans/llama-k2-m2.mtp $plans/llama-m2.tokens \
  20 llama-k2-m2-clip-recompute --grad-clip 0.5 --grad-clip-memory recompute
part train-llama-s2 train_both $plans/llama-s2.mtp $plans/llama.tokens 10
# cuDNN's deterministic backward: two runs of the same steps give the same losses and
# gradient norms (to the 9 digits the metrics keep), with cuDNN running the backward (the
# Llama fixture, whose attention cuDNN serves; a graph without token ids cannot train).
same_bits() {
  for i in 1 2; do
    $run $plans/llama.mtp --steps 5 --data $plans/llama.tokens --backend=cuda \
      --attention=cudnn-deterministic \
      --metrics "$out/same-bits-$i.jsonl" || return 1
  done
  python3 - "$out/same-bits-1.jsonl" "$out/same-bits-2.jsonl" <<'PY'
import json, sys
runs = [[json.loads(line) for line in open(path)] for path in sys.argv[1:]]
assert runs[0][-1]["cudnn_attention_backward_calls"] > 0, "cuDNN ran no backward"
for a, b in zip(*runs):
    assert (a["loss"], a["grad_norm"]) == (b["loss"], b["grad_norm"]), (a, b)
print(len(runs[0]), "steps, the same in both runs")
PY
}
part cudnn-deterministic-same-bits same_bits

# The fixture zoo: each Hugging Face decoder mtc compiles, 20 steps on the device against
# PyTorch fp32 (every loss within 2e-2; not the gradient norms, whose spikes in a tiny model
# bf16 storage moves to other steps: docs/MODELS.md); the Llama from its pretrained
# weights (save_pretrained's shards, and bf16) against PyTorch's steps from them.
# A call carries half the zoo (the header): the half left behind runs no part.
for plan in $plans/zoo/*.mtp; do
  [[ -f $plan ]] || continue
  name=$(basename "$plan" .mtp)
  part "zoo-$name" bash -c "$run $plan --data $plans/zoo/zoo.tokens --steps 20 --backend=cuda \
    --metrics $out/zoo-$name.jsonl && python3 $compare $out/zoo-$name.jsonl \
    $plans/zoo/${name%%.*}.losses.json --tolerance 2e-2"
done
# The masked exports on padded batches (the mask 0 at padding, padding targets left out of
# the loss: the cross-entropy's ignored rows) against PyTorch's padded runs: right padding,
# then left and right padding (the first token's target, predicted at padding, left out too).
for batch in padded left-padded; do
  for plan in $plans/zoo/*.mask.mtp; do
    [[ -f $plan ]] || continue
    name=$(basename "$plan" .mtp)
    part "zoo-$batch-$name" bash -c "$run $plan --data $plans/zoo/zoo-$batch.tokens \
      --pad-token-id 0 --steps 20 --backend=cuda --metrics $out/zoo-$batch-$name.jsonl && \
      python3 $compare $out/zoo-$batch-$name.jsonl $plans/zoo/${name%%.*}.$batch.losses.json \
      --tolerance 2e-2"
  done
done
# Gemma's weights go in plus 1 (its RMSNorm's folded `1 + weight`).
for weights in llama.pretrained llama.pretrained-bf16.safetensors gemma.pretrained; do
  reference=$plans/zoo/${weights%.safetensors}.losses.json
  part "zoo-weights-${weights%.safetensors}" bash -c "$run $plans/zoo/${weights%%.*}.dynamo.mtp \
    --data $plans/zoo/zoo.tokens --steps 6 --backend=cuda --weights $plans/zoo/$weights \
    --metrics $out/zoo-$weights.jsonl && python3 $compare $out/zoo-$weights.jsonl $reference \
    --tolerance 2e-2"
done

# Checkpoints on the device: a run stopped after 7 steps and resumed to 12 ends with the
# uninterrupted run's weights bit for bit and its losses (the kernels are deterministic),
# through the overlapped updates and through layer-major micro-batches; SIGTERM mid-run
# writes the step's checkpoint and exits 143, and the resumed run ends with the same bits.
# Weights with a NaN final norm scale make every gradient NaN, the first to land included:
# with --on-nonfinite skip no update applies on the device either (the gated guard), and the
# saved weights are the loaded ones bit for bit; stop exits 3.
resume_both() {
  local plan=$1 data=$2 dir=$out/resume-$(basename "$1" .mtp)${3:+-more}
  shift 2 # the rest: mt-run's flags for every run, less --init for the resumed one (the
  # checkpoint holds the weights, and mt-run refuses both)
  local resumed=() skip=0 a
  for a in "$@"; do
    if ((skip)); then skip=0 && continue; fi
    case "$a" in --init) skip=1 ;; --init=*) ;; *) resumed+=("$a") ;; esac
  done
  rm -rf "$dir" && mkdir -p "$dir" &&
    $run "$plan" --data "$data" --steps 12 --metrics "$dir/full.jsonl" \
      --save-weights "$dir/full.safetensors" "$@" &&
    $run "$plan" --data "$data" --steps 7 --checkpoint-dir "$dir/ck" --checkpoint-every 3 \
      --metrics "$dir/part.jsonl" "$@" &&
    $run "$plan" --data "$data" --steps 12 --resume "$dir/ck" --metrics "$dir/part.jsonl" \
      --save-weights "$dir/part.safetensors" "${resumed[@]}" &&
    cmp "$dir/full.safetensors" "$dir/part.safetensors" &&
    diff <(sed 's/,"ms".*//' "$dir/full.jsonl") <(sed 's/,"ms".*//' "$dir/part.jsonl") &&
    echo "resumed after step 7: weights and losses bitwise the uninterrupted run's"
}
part resume-llama resume_both $plans/llama.mtp $plans/llama.tokens
part resume-llama-k2-m2 resume_both $plans/llama-k2-m2.mtp $plans/llama-m2.tokens
part sigterm-llama python3 test/Run/Inputs/kill_resume.py sigterm 1 $run $plans/llama.mtp \
  $plans/llama.tokens 300 "$out/sigterm"
part nonfinite-llama bash -c "$run $plans/llama.mtp --data $plans/llama.tokens --steps 1 \
  --lr 0 --save-weights $out/nf-initial.safetensors && python3 test/Run/Inputs/poison_weights.py \
  $out/nf-initial.safetensors $out/nf-poisoned.safetensors norm.weight nan && \
  $run $plans/llama.mtp --data $plans/llama.tokens --steps 3 --weights $out/nf-poisoned.safetensors \
  --on-nonfinite skip --save-weights $out/nf-after.safetensors && \
  cmp $out/nf-poisoned.safetensors $out/nf-after.safetensors && \
  { $run $plans/llama.mtp --data $plans/llama.tokens --steps 3 --weights \
  $out/nf-poisoned.safetensors; test \$? -eq 3; }"
# Faults on the GPU (MT_INJECT_FAULT, runtime/cuda/FaultInjection): a kernel that traps in
# step 4 of a run checkpointed every step ends it nonzero with an error naming the step and
# the failed call, and leaves the checkpoint of step 3 whole: resumed, the run ends with the
# uninterrupted run's weights and losses bit for bit. A failed registration of pinned memory
# names what was pinned and leaves the checkpoints as they were. A device whose memory another
# process holds refuses the plan (1.95 GiB) with the numbers before allocating any of it.
fault_step() {
  local plan=$1 data=$2 dir=$out/fault-step
  rm -rf "$dir" && mkdir -p "$dir" &&
    $run "$plan" --data "$data" --steps 8 --metrics "$dir/full.jsonl" \
      --save-weights "$dir/full.safetensors" || return 1
  MT_INJECT_FAULT=step:4 $run "$plan" --data "$data" --steps 8 --checkpoint-dir "$dir/ck" \
    --checkpoint-every 1 --metrics "$dir/part.jsonl" 2>"$dir/error.txt"
  local rc=$?
  cat "$dir/error.txt"
  [ $rc -ne 0 ] && grep -q "mt-run: step 4: .*failed at .*: unspecified launch failure" \
    "$dir/error.txt" && ls "$dir/ck" && [ -d "$dir/ck/step-00000003" ] &&
    [ ! -d "$dir/ck/step-00000004" ] || return 1
  (cd "$dir/ck" && sha256sum step-00000003/*) >"$dir/before.txt" &&
    MT_INJECT_FAULT=pin $run "$plan" --data "$data" --steps 8 --resume "$dir/ck" \
      --checkpoint-dir "$dir/ck" 2>"$dir/pin.txt"
  rc=$?
  cat "$dir/pin.txt"
  [ $rc -ne 0 ] && grep -q "pinning the host state for the device failed (0.0 of .* MiB pinned): cudaHostRegister of" \
    "$dir/pin.txt" && (cd "$dir/ck" && sha256sum -c --quiet "$dir/before.txt") || return 1
  $run "$plan" --data "$data" --steps 8 --resume "$dir/ck" --metrics "$dir/part.jsonl" \
    --save-weights "$dir/part.safetensors" &&
    cmp "$dir/full.safetensors" "$dir/part.safetensors" &&
    diff <(sed 's/,"ms".*//' "$dir/full.jsonl") <(sed 's/,"ms".*//' "$dir/part.jsonl") &&
    echo "a trap in step 4: named, checkpoint 3 whole, resumed to the uninterrupted bits"
}
part fault-step-llama fault_step $plans/llama.mtp $plans/llama.tokens
part fault-device-memory python3 -c "
import subprocess, torch
free, total = torch.cuda.mem_get_info()
held = torch.empty(free - (1536 << 20), dtype=torch.uint8, device='cuda')
r = subprocess.run(['$run', '$plans/bench-1b.mtp', '--init', 'random', '--data',
                    '$plans/bench-1b.tokens', '--steps', '1', '--backend=cuda'],
                   capture_output=True, text=True)
print(r.returncode, r.stderr)
assert r.returncode != 0 and 'GiB of device memory' in r.stderr and 'GiB free of' in r.stderr
"

# Weights streamed from the whole fp32 masters and cast on the device train as from the high
# halves of the host's split masters, 12 bytes a parameter either way: the cast rounds ties
# to even, the halves away from zero (one value in 65536 differs in its last bit), so the
# losses agree to 1e-4, not bit for bit.
part stream-masters bash -c "$run $plans/llama-masters.mtp --data $plans/llama.tokens \
  --steps 10 --backend=cuda --metrics $out/llama-masters.jsonl | grep 'host state.*| 12.0 bytes' && \
  $run $plans/llama-copies.mtp --data $plans/llama.tokens --steps 10 --backend=cuda \
  --metrics $out/llama-copies.jsonl | grep 'host state.*| 12.0 bytes' && python3 -c \"
import json, sys
steps = [[(s['loss'], s['grad_norm']) for s in map(json.loads, open(f))] for f in sys.argv[1:]]
print(steps[0][-1], steps[1][-1])
assert len(steps[0]) == 10 and len(steps[1]) == 10
assert all(abs(a[0] - b[0]) <= 1e-4 * abs(b[0]) for a, b in zip(*steps))
\" $out/llama-masters.jsonl $out/llama-copies.jsonl"
# The gradient ring (the plan's depth of layers' gradients on the host, each slot reused once
# its update has run) trains the 20-layer 1.1B model bit for bit as every gradient in a slot
# of its own does (--grad-clip 1e30: a clip that never clips, whose updates wait for the whole
# backward). cuDNN's deterministic backward: the default sums dq with atomics, in any order.
part gradient-ring bash -c "$run $plans/llama-1b.mtp --init random --data $plans/llama-1b.tokens \
  --steps 4 --backend=cuda --attention=cudnn-deterministic --metrics $out/ring.jsonl && \
  $run $plans/llama-1b.mtp --init random --data $plans/llama-1b.tokens --steps 4 --backend=cuda \
  --attention=cudnn-deterministic --grad-clip 1e30 --metrics \
  $out/no-ring.jsonl && python3 -c \"
import json, sys
steps = [[s['loss'] for s in map(json.loads, open(f))] for f in sys.argv[1:]]
print(steps)
assert steps[0] == steps[1] and len(steps[0]) == 4
\" $out/ring.jsonl $out/no-ring.jsonl"
# The 3.82B model's step with each source at 8 and 32 sequences (4 layer-major micro-batches).
if [[ -f $plans/bench-3.8b-fp32.mtp ]]; then
  for plan in bench-3.8b-bf16 bench-3.8b-fp32 bench-3.8b-m4-bf16 bench-3.8b-m4-fp32; do
    part "stream-$plan" $run $plans/$plan.mtp --init random --data $plans/bench-3.8b.tokens \
      --steps 4 --lr 1e-4 --backend=cuda --metrics "$out/stream-$plan.jsonl"
  done
fi
# The largest models the host holds: 10 steps of the 6.74B and the 9.2B plans (and the 9.2B
# with every weight persistent and pulled, 9b-u), the host's available memory sampled
# every 2 s (its least printed); the 9.2B plan with clipping (every gradient held until the
# norm is known: 34 GiB more) refused with the numbers.
for model in 7b 9b 9b-u; do
  [[ -f $plans/bench-$model.mtp ]] && part bench-$model bash -c "free -g; (while sleep 2; do \
    grep MemAvailable /proc/meminfo; done) >$out/bench-$model-memory.txt & $run \
    $plans/bench-$model.mtp --init random --data $plans/bench-7b.tokens --steps 10 --lr 1e-4 \
    --backend=cuda --metrics $out/bench-$model.jsonl; rc=\$?; kill %1; sort -k2 -n \
    $out/bench-$model-memory.txt | head -1; exit \$rc"
done
if [[ -f $plans/bench-9b.mtp ]]; then
  part bench-9b-clip-refused bash -c "$run $plans/bench-9b.mtp --init random --data \
    $plans/bench-7b.tokens --steps 1 --grad-clip 1 --backend=cuda 2>&1 | tee /dev/stderr | \
    grep 'need .* GiB of host memory beside the host state'"
fi

# The Llama-3-8B shape at 32768 tokens in a 16 GiB plan, its loss fused with its head
# (u32 tokens: the vocabulary passes 65536), 3 steps.
[[ -f $plans/long3-32768.mtp ]] && part long3-32768 $run $plans/long3-32768.mtp --init random \
  --data $plans/long3-32768.tokens --data-dtype u32 --steps 3 --lr 1e-4 --backend=cuda \
  --metrics "$out/long3-32768.jsonl"
# Long context: the 7B shape at sequences 32768, 57344 and 65536 in 16 GiB plans, 3 steps each
# (2 past 40000).
for seq in 32768 57344 65536; do
  [[ -f $plans/long-$seq.mtp ]] && part long-$seq $run $plans/long-$seq.mtp --init random \
    --data $plans/long-$seq.tokens --steps $((seq > 40000 ? 2 : 3)) --lr 1e-4 --backend=cuda --metrics "$out/long-$seq.jsonl"
done

# Two layer structures: the 1.1B shape at 8192 tokens with alternating windowed and global
# layers, and all global, 5 steps each.
for name in window global; do
  [[ -f $plans/$name-8192.mtp ]] && part "$name-8192" $run $plans/$name-8192.mtp --init random \
    --data $plans/window-8192.tokens --steps 5 --lr 1e-4 --backend=cuda --metrics "$out/$name-8192.jsonl"
done

# The 120.7B graph's layer measured: its 2- and 4-layer plans, 5 steps each.
for layers in 2 4; do
  [[ -f $plans/s120-$layers.mtp ]] && part "s120-$layers" $run $plans/s120-$layers.mtp \
    --init random --data $plans/s120.tokens --steps 5 --lr 1e-4 --backend=cuda \
    --metrics "$out/s120-$layers.jsonl"
done

# Checkpoints written while the next steps train: the 1.0B benchmark model (12 GB of masters
# and moments) every 2 of 6 steps, keeping one (the disk of 64 GiB holds two of them while
# the newer is written, not two of the 3.82B's 45.8 GB); their time, what the updates waited
# for them, the steps beside them, and a resume's read and check. Then the 3.82B model's one
# checkpoint after 2 steps, resumed for a third.
part checkpoint-1b bash -c "$run $plans/bench-1b.mtp --init random --data $plans/bench-1b.tokens \
  --steps 6 --lr 1e-4 --checkpoint-dir /tmp/ck-1b --checkpoint-every 2 --keep-checkpoints 1 && \
  $run $plans/bench-1b.mtp --data $plans/bench-1b.tokens --steps 7 --lr 1e-4 --resume /tmp/ck-1b; \
  rc=\$?; du -sb /tmp/ck-1b; rm -rf /tmp/ck-1b; exit \$rc"
if [[ -f $plans/bench-3.8b.mtp ]]; then
  part checkpoint-3.8b bash -c "$run $plans/bench-3.8b.mtp --init random --data \
    $plans/bench-3.8b.tokens --steps 2 --checkpoint-dir /tmp/ck-3.8b && \
    $run $plans/bench-3.8b.mtp --data $plans/bench-3.8b.tokens --steps 3 --resume /tmp/ck-3.8b; \
    rc=\$?; du -sb /tmp/ck-3.8b; rm -rf /tmp/ck-3.8b; exit \$rc"
fi

# Data parallel in the executor: two ranks on this GPU (the collectives relayed through the
# host), each uploading and offloading its shards, against one rank with twice the batch.
for model in gpt2 llama; do
  part "data-parallel-$model" build/test/mt-gpu-data-parallel-test $plans/$model.mtp \
    $plans/$model-b4.mtp $plans/parallel.tokens
done
# Data parallel through NCCL with one rank (this machine has one GPU): the same losses as the
# plain run of the same plan and tokens (train-llama above), and through its sharded AdamW;
# with clipping (the norm over the ranks), the plain clipped run's.
part nccl-1-llama bash -c "$run $plans/llama.mtp --data $plans/llama.tokens --steps 20 \
  --nproc-per-node 1 --metrics $out/nccl1.jsonl && python3 $compare $out/nccl1.jsonl \
  $out/llama.cuda.jsonl --tolerance 1e-6"
# The final weights (gathered from the ranks' shards) are the plain run's.
part nccl-1-llama-clip bash -c "$run $plans/llama.mtp --data $plans/llama.tokens --steps 10 \
  --grad-clip 0.5 --backend=cuda --metrics $out/clip.jsonl --save-weights $out/clip.safetensors \
  && $run $plans/llama.mtp --data $plans/llama.tokens --steps 10 --grad-clip 0.5 \
  --nproc-per-node 1 --metrics $out/nccl1-clip.jsonl --save-weights $out/nccl1-clip.safetensors \
  && python3 $compare $out/nccl1-clip.jsonl $out/clip.jsonl --tolerance 1e-5 && python3 \
  test/Train/Inputs/compare_weights.py $out/nccl1-clip.safetensors $out/clip.safetensors"
part nccl-1-bench-1b $run $plans/bench-1b.mtp --init random --data $plans/bench-1b.tokens \
  --steps 4 --lr 1e-4 --nproc-per-node 1
# A bad token id at step 6 of 10 over NCCL: the rank stops with the error naming it, while
# the update worker may be in the last step's collective, and does not hang.
part nccl-1-bad-token bash -c "python3 -c \"
import numpy as np
t = (7 * np.arange(4000) + 3) % 96
t[200] = 5000
t.astype(np.uint16).tofile('$out/bad.tokens')\" && timeout 120 $run $plans/llama.mtp \
  --data $out/bad.tokens --steps 10 --nproc-per-node 1 > $out/bad.out 2>&1; rc=\$?; \
  cat $out/bad.out; [ \$rc -ne 0 ] && [ \$rc -ne 124 ] && grep -q 'token 5000 at position 200' $out/bad.out"
# Two ranks, where the machine has two GPUs or more (nvidia-h200-x2): the losses of one rank
# with twice the batch, within bf16 rounding; the 1b model for the scaling part below.
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
if [ "$gpus" -ge 2 ]; then
  part nccl-2-llama bash -c "$run $plans/llama.mtp --data $plans/parallel.tokens --steps 20 \
    --nproc-per-node 2 --metrics $out/nccl2.jsonl && $run $plans/llama-b4.mtp \
    --data $plans/parallel.tokens --steps 20 --backend=cuda --metrics $out/b4.jsonl && \
    python3 $compare $out/nccl2.jsonl $out/b4.jsonl --tolerance 2e-2"
  part nccl-2-bench-1b $run $plans/bench-1b.mtp --init random --data $plans/bench-1b.tokens \
    --steps 8 --lr 1e-4 --nproc-per-node 2 --metrics "$out/nccl2-bench-1b.jsonl"
fi

# The debug switch: one stream, no buffer reuse, same losses as the scheduled run.
part serialize bash -c "$run $plans/llama-k2-m2.mtp --data $plans/llama-m2.tokens --steps 5 \
  --backend=cuda --serialize --metrics $out/serial.jsonl && \
  $run $plans/llama-k2-m2.mtp --data $plans/llama-m2.tokens --steps 5 --backend=cuda \
  --metrics $out/streams.jsonl && python3 $compare $out/serial.jsonl $out/streams.jsonl --tolerance 1e-6"

# compute-sanitizer on a small plan running on three streams.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  part "sanitizer-$tool" "${sanitizer:-compute-sanitizer}" --tool $tool --error-exitcode 1 \
    $run $plans/llama-k2-m2.mtp --data $plans/llama-m2.tokens --steps 2 --backend=cuda
done

# The tensor-core attention kernels (bf16, depths 64 and 128), without and with key lengths,
# with a sliding window and soft cap, and sequence-major, under memcheck and racecheck.
for tool in memcheck racecheck; do
  for graph in attention-tiles attention-padding attention-window attention-rows; do
    part "sanitizer-flash-$tool-$graph" "${sanitizer:-compute-sanitizer}" --tool $tool \
      --error-exitcode 1 $run $plans/gradients/$graph.mtp --check-against-host --init random \
      --seed 1 --check-tolerance 6e-2
  done
done

# A 1.1B-parameter model, all weights and optimizer state in host memory; AdamW overlaps
# the backward (no clipping), then with clipping (each gradient measured as it lands, the
# updates after the backward, overlapping the next forward).
part llama-1b $run $plans/llama-1b.mtp --init random --data $plans/llama-1b.tokens --steps 12 \
  --lr 3e-4 --warmup 4 --backend=cuda --metrics "$out/llama-1b.jsonl" --trace "$out/llama-1b-trace.json"
# The trace: the device's three streams and the CPU's updates on one clock. Every update of
# the last step runs once, after its gradient's copy began (the first d2h command), and within
# a few seconds of the step.
part llama-1b-trace python3 -c "
import collections, json, sys
events = [e for e in json.load(open('$out/llama-1b-trace.json'))['traceEvents'] if e['ph'] == 'X']
d2h = min(e['ts'] for e in events if e['tid'] == 2)
last = [e for e in events if e['tid'] == 3 and e['args']['step'] == 12]
twice = [n for n, k in collections.Counter(e['name'] for e in last).items() if k > 1]
early = [e['name'] for e in last if e['ts'] < d2h]
late = [e['name'] for e in last if e['ts'] > 5e6 or e['dur'] < 0]
print(len(last), 'updates of the last step; twice:', twice, 'before any gradient:', early, 'off the clock:', late)
sys.exit(1 if not last or twice or early or late else 0)"
part llama-1b-clip $run $plans/llama-1b.mtp --init random --data $plans/llama-1b.tokens --steps 8 \
  --lr 3e-4 --warmup 4 --grad-clip 1 --backend=cuda --metrics "$out/llama-1b-clip.jsonl"

# Pulled gradients (mtc --gradient-ring=device): the gradient ring in device memory, each
# update pulling its gradient across PCIe in chunks of 4, 8, then 16 MB (the 1.1B model's
# embedding and head in 17 each), against the same plan with each gradient landing in host memory. The updates are
# elementwise those of landed gradients: with cuDNN's deterministic backward both runs give the
# same losses, bit for bit; their norms sum the chunks' squares in another order.
pulled_same_losses() {
  for ring in host device; do
    $run $plans/llama-1b-ring-$ring.mtp --init random --data $plans/llama-1b.tokens --steps 6 \
      --lr 3e-4 --warmup 4 --backend=cuda --attention=cudnn-deterministic \
      --metrics "$out/llama-1b-ring-$ring.jsonl" || return 1
  done
  python3 - "$out/llama-1b-ring-host.jsonl" "$out/llama-1b-ring-device.jsonl" <<'PY'
import json, sys
runs = [[json.loads(line) for line in open(path)] for path in sys.argv[1:]]
assert runs[0][-1].get("gradient_ring_device_bytes", 0) == 0, "the host ring's run pulled"
assert runs[1][-1].get("gradient_ring_device_bytes", 0) > 0, "no gradient was pulled"
for a, b in zip(*runs):
    assert a["loss"] == b["loss"], (a["step"], a["loss"], b["loss"])
    assert abs(a["grad_norm"] - b["grad_norm"]) <= 1e-6 * a["grad_norm"], (a, b)
assert all(r.get("pulled_gbps", 0) > 0 and "pull_wait_ms" in r for r in runs[1][1:]), runs[1]
print(len(runs[0]), "steps, the same losses landed and pulled; step ms landed",
      [round(r["ms"]) for r in runs[0]], "pulled", [round(r["ms"]) for r in runs[1]],
      "of which the updates waited for pulls", [round(r["pull_wait_ms"], 1) for r in runs[1]])
PY
}
part llama-1b-pulled pulled_same_losses

# Persistent weights (mtc --persistent-layers): every weight kept on the device across steps,
# each update's bf16 copy sent to it, gradients landed and pulled. The weights each step reads
# are the same bf16 values as the streamed plan's: the same losses, bit for bit, as the
# landed run above (which this part needs), and no weight crosses within a step after the
# first.
persistent_same_losses() {
  for ring in host device; do
    $run $plans/llama-1b-persistent-$ring.mtp --init random --data $plans/llama-1b.tokens \
      --steps 6 --lr 3e-4 --warmup 4 --backend=cuda --attention=cudnn-deterministic \
      --metrics "$out/llama-1b-persistent-$ring.jsonl" || return 1
  done
  python3 - "$out/llama-1b-ring-host.jsonl" "$out/llama-1b-persistent-host.jsonl" \
    "$out/llama-1b-persistent-device.jsonl" <<'PY'
import json, sys
runs = [[json.loads(line) for line in open(path)] for path in sys.argv[1:]]
for run in runs[1:]:
    for a, b in zip(runs[0], run):
        assert a["loss"] == b["loss"], (a["step"], a["loss"], b["loss"])
    assert all(r["sent_gbps"] > 0 for r in run[1:]), [r["sent_gbps"] for r in run]
    # The first step fills the weights; later ones move checkpoints alone to the device.
    assert all(b["h2d_gbps"] < 0.5 * a["h2d_gbps"] for a, b in zip(runs[0][1:], run[1:])), [
        (a["h2d_gbps"], b["h2d_gbps"]) for a, b in zip(runs[0], run)]
print(len(runs[0]), "steps, the same losses streamed and persistent; step ms streamed",
      [round(r["ms"]) for r in runs[0]], "persistent", [round(r["ms"]) for r in runs[1]],
      "persistent and pulled", [round(r["ms"]) for r in runs[2]], "sent GB/s",
      [round(r["sent_gbps"], 1) for r in runs[1]])
PY
}
part llama-1b-persistent persistent_same_losses

# Updates on the device (mt-run --device-updates): the persistent weights' AdamW runs on the
# device from their gradients in the device's ring, their state resident in device memory:
# every weight's, (=8) 8 layers' and the embedding's with the host updating the rest, and
# every weight's with the state crossing in and back at each update (streamed).
# The device does the host's fp32 operations in its order: the same losses, and saved, the
# same weights bit for bit, as the same plan updated on the host; the norms within 1e-6 (the
# host sums a pulled gradient's squares by its pulled chunks). Checkpointed and resumed, the
# run ends with the uninterrupted run's weights and losses.
device_updates_same_bits() {
  for where in host device device=8 streamed; do
    $run $plans/llama-1b-persistent-device.mtp --init random --data $plans/llama-1b.tokens \
      --steps 6 --lr 3e-4 --warmup 4 --backend=cuda --attention=cudnn-deterministic \
      $([[ $where == device* ]] && echo --${where/device/device-updates}) \
      $([[ $where == streamed ]] && echo --device-updates --device-update-state=streamed) \
      --metrics "$out/llama-1b-updates-$where.jsonl" \
      --save-weights "$out/llama-1b-updates-$where.safetensors" >"$out/updates-$where.txt" ||
      return 1
  done
  grep '^updates' "$out/updates-device.txt" "$out/updates-device=8.txt" \
    "$out/updates-streamed.txt" &&
    grep -q 'the state of 100.0% of theirs resident' "$out/updates-device.txt" &&
    grep -q 'the state of 100.0% of theirs resident' "$out/updates-device=8.txt" &&
    grep -q 'the state of 0.0% of theirs resident' "$out/updates-streamed.txt" &&
    ! grep -q '^updates' "$out/updates-host.txt" &&
    cmp "$out/llama-1b-updates-host.safetensors" "$out/llama-1b-updates-device.safetensors" &&
    cmp "$out/llama-1b-updates-host.safetensors" "$out/llama-1b-updates-device=8.safetensors" &&
    cmp "$out/llama-1b-updates-host.safetensors" "$out/llama-1b-updates-streamed.safetensors" &&
    python3 - "$out/llama-1b-updates-host.jsonl" "$out/llama-1b-updates-device.jsonl" \
      "$out/llama-1b-updates-device=8.jsonl" "$out/llama-1b-updates-streamed.jsonl" <<'PY'
import json, sys
runs = [[json.loads(line) for line in open(path)] for path in sys.argv[1:]]
assert [len(run) for run in runs] == [6, 6, 6, 6]
for run in runs[1:]:
    for a, b in zip(runs[0], run):
        assert a["loss"] == b["loss"], (a["step"], a["loss"], b["loss"])
        assert abs(a["grad_norm"] - b["grad_norm"]) <= 1e-6 * a["grad_norm"], (a, b)
# Resident state crosses in with the first step's updates and not again; streamed, every step.
for run in runs[1:3]:
    assert all(r["device_update_gbps"] == 0 for r in run[2:]), run
assert all(r["device_update_gbps"] > 0 for r in runs[3][1:]), runs[3]
print("6 steps, the same losses and weights updated on the host, on the device (resident), "
      "split and streamed; step ms", *[[round(r["ms"]) for r in run] for run in runs],
      "; the device's updates moved GB/s", *[[round(r["device_update_gbps"], 1) for r in run]
                                             for run in runs[1:]])
PY
}
part llama-1b-device-updates device_updates_same_bits
part resume-llama-1b-device-updates resume_both $plans/llama-1b-persistent-device.mtp \
  $plans/llama-1b.tokens --init random --backend=cuda --attention=cudnn-deterministic \
  --device-updates=8

# Saved activations (mtc --saved-layers): every layer keeps the products' and attentions'
# results its backward reads instead of recomputing its forward there. The same kernels on the
# same inputs make them, but the saving forward runs each attention with its log-sum-exp,
# which the recomputing one makes only in the backward: the losses agree with the landed run
# above (which this part needs) to 1e-4 (identical where cuDNN's forward with statistics
# gives the same output), and the step executes fewer FLOPs.
saved_same_losses() {
  $run $plans/llama-1b-saved.mtp --init random --data $plans/llama-1b.tokens --steps 6 \
    --lr 3e-4 --warmup 4 --backend=cuda --attention=cudnn-deterministic \
    --metrics "$out/llama-1b-saved.jsonl" || return 1
  python3 - "$out/llama-1b-ring-host.jsonl" "$out/llama-1b-saved.jsonl" <<'PY'
import json, sys
runs = [[json.loads(line) for line in open(path)] for path in sys.argv[1:]]
gaps = [abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(*runs)]
assert len(gaps) == 6 and max(gaps) <= 1e-4, gaps
print(len(gaps), "steps, losses recomputed and saved within", max(gaps), "; step ms recomputed",
      [round(r["ms"]) for r in runs[0]], "saved", [round(r["ms"]) for r in runs[1]])
PY
}
part llama-1b-saved saved_same_losses

# Measured device memory (the executor's buffers and the most scratch a command used) within
# the plan's peak (its arena and reserve), at every step of every device run but the
# serialized one, which gives every buffer its own memory on purpose. cuDNN's own workspace,
# for an engine asking more than the plan's scratch holds, is cuDNN's choice at run time; the
# ring of pulled gradients (a plan's pull_gradients) and the device's updates' pieces
# (--device-updates) lie beside the plan: all are reported, and left out of the comparison.
part memory python3 -c "
import glob, json, sys
rows = [(f, json.loads(line)) for f in sorted(glob.glob('$out/*.jsonl')) for line in open(f)]
rows = [(f, r) for f, r in rows if 'plan_peak_bytes' in r and 'serial' not in f]
beside = lambda r: (r.get('cudnn_beside_bytes', 0) + r.get('gradient_ring_device_bytes', 0) +
                   r.get('device_updates_bytes', 0))
over = [(f, r['step']) for f, r in rows if r['device_bytes'] - beside(r) > r['plan_peak_bytes']]
cudnn = sorted({(f, beside(r)) for f, r in rows if beside(r) > 0})
print(len(rows), 'device steps;', len(over), 'over the plan:', over)
print('cuDNN workspace, pulled gradients and device updates beside the plan:', cudnn)
sys.exit(1 if over or not rows else 0)"

# Side by side with the peers (shared/bench/peer_bench.py) at their "1b" shape, 4 x 2048
# tokens a step: mt streaming every layer from host memory, PyTorch with the whole model on
# the GPU, and PyTorch FSDP2 with CPU offload. Steps are medians (mt: its metrics).
# Launch to the first steps, timed from outside (docs/PERFORMANCE.md, "Start-up").
part startup-1b python3 scripts/time_startup.py $run $plans/bench-1b.mtp --init random \
  --data $plans/bench-1b.tokens --steps 2 --lr 1e-4 --backend=cuda
part bench-mt-1b $run $plans/bench-1b.mtp --init random --data $plans/bench-1b.tokens --steps 8 \
  --lr 1e-4 --backend=cuda --metrics "$out/bench-mt-1b.jsonl"
# The same with every gradient measured before any update (a clip that never clips): what
# the gated non-finite guard saves by letting the updates overlap the backward.
part bench-mt-1b-measured-first $run $plans/bench-1b.mtp --init random --data \
  $plans/bench-1b.tokens --steps 8 --lr 1e-4 --grad-clip 1e30 --backend=cuda \
  --metrics "$out/bench-mt-1b-measured-first.jsonl"
# Two GPUs' throughput against one's (median tokens a second after the first step): at
# least 1.8 times.
if [ "$gpus" -ge 2 ]; then
  part scaling-2 python3 -c "
import json, statistics, sys
rate = lambda f: statistics.median(json.loads(l)['tokens_per_s'] for l in list(open(f))[1:])
ratio = rate('$out/nccl2-bench-1b.jsonl') / rate('$out/bench-mt-1b.jsonl')
print(f'2 GPUs: {ratio:.2f}x the tokens a second of one')
sys.exit(0 if ratio >= 1.8 else 1)"
fi
part bench-peer-gpu-1b python3 $plans/peer_bench.py gpu 1b 2048 4 6
part bench-peer-fsdp-1b python3 $plans/peer_bench.py fsdpf 1b 2048 4 4

part adamw build/test/mt-adamw-test
part calibrate-gpu $run --calibrate "$out/gpu-profile.json" --backend=cuda
exit "$failed"
