#!/usr/bin/env bash
# The performance rows of #16 in one call on the device machine: mt (every weight in host
# memory) beside PyTorch with the whole model on the GPU and FSDP2 with CPU offload
# (shared/bench/peer_bench.py), and mt's profile of each row. It builds nothing: carry
# build/tools/mt-run and build/device made with WITH_PERF=1 scripts/make_device_plans.sh.
# Writes $OUT/bench.md (the table, with ratios) and $OUT/bench.tar.gz (every log and metrics
# file, and per row a device profile: the machine's --calibrate with the row's kernel rates
# written in by --profile-into, for mtc --target to predict the row from). BENCH_ROWS (a regex over row names) runs a subset; BENCH_PEERS=0 leaves the peers out;
# BENCH_STEPS sets mt's steps a row (default 5; the first is left out of the medians); MT_RUN
# another mt-run (a build before a change, carried beside, for the same rows in one call);
# MT_ARGS more of mt-run's flags (e.g. --attention=own, mt's attention kernels against cuDNN's);
# BENCH_PEER_KINDS (a regex over gpu and fsdpf) a subset of the peers; BENCH_TRACE (a regex
# over row names) writes those rows' last step as trace-ROW.json into bench.tar.gz, and prints
# scripts/trace_summary.py of it.
set -uo pipefail
final="${OUT:-/tmp/mt-device-bench}"
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar czf "$final/bench.tar.gz" -C "$out" .' EXIT
run=${MT_RUN:-build/tools/mt-run}
plans=build/device
steps=${BENCH_STEPS:-5}

# name | mt plan | peer model | sequences a step | mt-run's own flags; the peers run where
# they fit on the GPU. -8p: the gradients pulled from a device ring (mtc --gradient-ring=device);
# -8k: every weight persistent on the device across steps (mtc --persistent-layers), -8kp both;
# -8s: every layer keeps the activations its backward reads (mtc --saved-layers), -8kps with -8kp;
# -32s: the last layers keep them (mtc's auto: as many as an H100 holds); -8kpu, -8kpsu: -8kp
# and -8kps with the AdamW of the layers mtc's auto picks for an H100 (spread over the step)
# and the embedding's on the device, their state resident in device memory; -8kpa every
# weight's, the CPU idle but for the epilogue's; -8kpax the same, streamed
# (--device-update-state=streamed): the updater's crossing rate alone.
rows=(
  "3.8b-8 perf-3.8b-8 4b 8 gpu,fsdpf"
  "3.8b-8p perf-3.8b-8p 4b 8 -"
  "3.8b-8r perf-3.8b-8r 4b 8 -"
  "3.8b-8h perf-3.8b-8h 4b 8 -"
  "3.8b-8k perf-3.8b-8k 4b 8 -"
  "3.8b-8kp perf-3.8b-8kp 4b 8 -"
  "3.8b-8s perf-3.8b-8s 4b 8 -"
  "3.8b-8kps perf-3.8b-8kps 4b 8 -"
  "3.8b-8kpu perf-3.8b-8kpu 4b 8 -"
  "3.8b-8kpsu perf-3.8b-8kpsu 4b 8 -"
  "3.8b-8kpa perf-3.8b-8kp 4b 8 - --device-updates"
  "3.8b-8kpax perf-3.8b-8kp 4b 8 - --device-updates --device-update-state=streamed"
  "3.8b-32 perf-3.8b-32 4b 32 gpu"
  "3.8b-32s perf-3.8b-32s 4b 32 -"
  "32bl-8 perf-32bl-8 32bl 8 gpu"
  "32bl-8p perf-32bl-8p 32bl 8 -"
  "32bl-8r perf-32bl-8r 32bl 8 -"
  "32bl-8h perf-32bl-8h 32bl 8 -"
  "32bl-8k perf-32bl-8k 32bl 8 -"
  "32bl-8kp perf-32bl-8kp 32bl 8 -"
  "32bl-8s perf-32bl-8s 32bl 8 -"
  "32bl-8kps perf-32bl-8kps 32bl 8 -"
  "32bl-8kpu perf-32bl-8kpu 32bl 8 -"
  "32bl-8kpsu perf-32bl-8kpsu 32bl 8 -"
  "32bl-32 perf-32bl-32 32bl 32 -"
  "32bl-32s perf-32bl-32s 32bl 32 -"
  "120bl-8 perf-120bl-8 120bl 8 gpu"
  "120bl-8p perf-120bl-8p 120bl 8 -"
  "120bl-8r perf-120bl-8r 120bl 8 -"
  "120bl-8h perf-120bl-8h 120bl 8 -"
  "120bl-8k perf-120bl-8k 120bl 8 -"
  "120bl-8kp perf-120bl-8kp 120bl 8 -"
  "120bl-8s perf-120bl-8s 120bl 8 -"
  "120bl-8kps perf-120bl-8kps 120bl 8 -"
  "120bl-8kpu perf-120bl-8kpu 120bl 8 -"
  "120bl-8kpsu perf-120bl-8kpsu 120bl 8 -"
  "120bl-32 perf-120bl-32 120bl 32 -"
  "120bl-32s perf-120bl-32s 120bl 32 -"
)
$run --calibrate "$out/calibrated.json" --backend=cuda >"$out/calibrate.txt" 2>&1
for row in "${rows[@]}"; do
  read -r name plan model sequences peers flags <<<"$row"
  [[ "$name" =~ ${BENCH_ROWS:-.} ]] || continue
  echo "== mt $name"
  cp "$out/calibrated.json" "$out/profile-$name.json"
  trace=()
  [[ -n "${BENCH_TRACE:-}" && "$name" =~ $BENCH_TRACE ]] && trace=(--trace "$out/trace-$name.json")
  $run $plans/$plan.mtp --init random --data $plans/perf.tokens --steps "$steps" --lr 1e-4 \
    --backend=cuda --profile --profile-into "$out/profile-$name.json" \
    --metrics "$out/mt-$name.jsonl" "${trace[@]}" ${flags:-} ${MT_ARGS:-} >"$out/mt-$name.txt" 2>&1
  echo "-- mt $name: rc $?"
  [[ ${#trace[@]} -gt 0 ]] && python3 scripts/trace_summary.py "$out/trace-$name.json" --gaps 3
  grep -E "^attention +\||^gradients +\||cuDNN declines" "$out/mt-$name.txt" | head -4
  # Pulled rows: the time the updates waited for their chunks, each step after the first.
  python3 -c "import json, sys; w = [r['pull_wait_ms'] for r in map(json.loads, open(sys.argv[1])) if 'pull_wait_ms' in r][1:]; w and print('pull waits ms', [round(x, 1) for x in w])" "$out/mt-$name.jsonl"
  # Persistent weights: the updates' copies sent to the device a step, and the step's own h2d.
  python3 -c "import json, sys; r = [r for r in map(json.loads, open(sys.argv[1]))][1:]; any(x.get('sent_gbps', 0) for x in r) and print('sent GB/s', [round(x['sent_gbps'], 1) for x in r], 'h2d GB/s', [round(x['h2d_gbps'], 1) for x in r])" "$out/mt-$name.jsonl"
  tail -n 14 "$out/mt-$name.txt"
  [[ "${BENCH_PEERS:-1}" == 1 && "$peers" != - ]] || continue
  for peer in ${peers//,/ }; do
    [[ "$peer" =~ ${BENCH_PEER_KINDS:-.} ]] || continue
    echo "== $peer $name"
    python3 $plans/peer_bench.py "$peer" "$model" 2048 "$sequences" 4 >"$out/$peer-$name.txt" 2>&1
    echo "-- $peer $name: rc $?"
    tail -n 2 "$out/$peer-$name.txt"
  done
done

python3 - "$out" >"$final/bench.md" <<'EOF'
import glob, json, os, statistics, sys
out = sys.argv[1]
def peer(kind, name):
    try:
        return [json.loads(l) for l in open(f"{out}/{kind}-{name}.txt") if l.startswith("{")][-1]
    except (OSError, IndexError):
        return None
print("| row | mt step s | mt model TFLOPS | mt device GiB | PyTorch on the GPU | FSDP2 offload "
      "| mt / PyTorch | products | attention | waits |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for path in sorted(glob.glob(f"{out}/mt-*.jsonl")):
    name = os.path.basename(path)[3:-6]
    steps = [json.loads(l) for l in open(path)]
    if not steps:
        continue
    timed = steps[1:] or steps
    step_s = statistics.median(r["ms"] for r in timed) / 1000
    flops = steps[-1]["tflops"] * steps[-1]["device_ms"] / 1000  # model TFLOP a step
    last = steps[-1]
    def family(f):
        share = last.get(f"profile_{f}_share")
        rate = last.get(f"profile_{f}_tflops")
        return "" if share is None else f"{100 * share:.0f}%" + (f" at {rate:.0f}" if rate else "")
    gpu, fsdp = peer("gpu", name), peer("fsdpf", name)
    cell = lambda p: f"{p['model_tflops']:.0f} ({p['step_s']:.2f} s, {p['peak_gpu_gib']:.0f} GiB)" if p else "-"
    ratio = f"{gpu['step_s'] / step_s:.2f}" if gpu else "-"
    print(f"| {name} | {step_s:.3f} | {flops / step_s:.0f} | "
          f"{last['process_device_bytes'] / 2**30:.1f} | {cell(gpu)} | {cell(fsdp)} | {ratio} | "
          f"{family('products')} | {family('attention')} | {family('waits')} |")
print("\nTFLOPS count 6 x matmul parameters + causal attention a token (PERF.md); the step is "
      "the median wall time after the first; mt / PyTorch is PyTorch's step over mt's "
      "(above 1: mt is faster). Profile: the last step's share of the compute stream and "
      "achieved TFLOP/s (recompute included).")
EOF
cat "$final/bench.md"
