# Compiles a model with every recompute interval K, micro-batch count M and accumulation mode
# given, trains each scheduled plan with --check-schedule and compares its losses with the
# unscheduled, unsegmented stage-2 plan of the same M. Prints one line per plan; exit 1 when
# any differs by more than the tolerance.
# Usage: schedule_matrix.py MTC MT_RUN MODEL SHAPE TOKENS STEPS TOLERANCE OUTDIR
import itertools
import json
import subprocess
import sys

mtc, mt_run, model, shape, tokens, steps, tolerance, out = sys.argv[1:9]
tolerance = float(tolerance)


def train(name, flags, check):
    plan = f"{out}.{name}.mtp"
    subprocess.run([mtc, model, "--input-shape", shape, "-o", plan, *flags], check=True)
    metrics = f"{out}.{name}.jsonl"
    run = [mt_run, plan, "--data", tokens, "--steps", steps, "--metrics", metrics]
    subprocess.run(run + (["--check-schedule"] if check else []), check=True,
                   stdout=subprocess.DEVNULL)
    return [json.loads(line)["loss"] for line in open(metrics)]


worst = 0.0
for micro in (1, 2):
    reference = train(f"flat{micro}", ["--segment-layers=false", "--schedule=false",
                                        f"--micro-batches={micro}",
                                        "--accumulation=sample-major"], False)
    modes = ("layer-major", "sample-major") if micro > 1 else ("layer-major",)
    for k, mode in itertools.product((1, 2), modes):
        flags = [f"--micro-batches={micro}", f"--accumulation={mode}",
                 f"--recompute-interval={k}", "--checkpoints=device" if k > 1 else "--checkpoints=host"]
        losses = train(f"k{k}m{micro}{mode}", flags, True)
        error = max(abs(a - b) / abs(b) for a, b in zip(losses, reference))
        worst = max(worst, error)
        print(f"K={k} M={micro} {mode}: checked schedule, max relative difference {error:.1e}")
print("all within tolerance" if worst <= tolerance else f"worst {worst:.1e} exceeds {tolerance}")
sys.exit(0 if worst <= tolerance else 1)
