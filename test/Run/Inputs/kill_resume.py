# Interrupts mt-run while it writes checkpoints and resumes it each time from the last complete
# one; the run that finishes must end with the uninterrupted run's weights and metrics.
#   kill_resume.py sigkill KILLS MT_RUN PLAN DATA STEPS WORK   SIGKILL at random moments
#   kill_resume.py sigterm 1 MT_RUN PLAN DATA STEPS WORK       SIGTERM once the run is going:
#                                                              exit 143, a checkpoint of the
#                                                              step it names
# Prints what it checked; exits 1 on a difference.
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

mode, kills, mt_run, plan, data, steps, work = sys.argv[1:8]
kills, steps = int(kills), int(steps)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
checkpoints = os.path.join(work, "checkpoints")
common = [mt_run, plan, "--data", data, "--steps", str(steps), "--schedule", "cosine",
          "--warmup", "2"]


def run(extra, **kwargs):
    return subprocess.Popen(common + extra, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, **kwargs)


def complete():
    # What mt-run resumes from: a folder step-N with its manifest. A write cut short leaves
    # step-N.partial, whose manifest may already be there (it is written before the rename).
    return any(re.fullmatch(r"step-\d+", d) and
               os.path.exists(os.path.join(checkpoints, d, "manifest.json"))
               for d in os.listdir(checkpoints)) if os.path.isdir(checkpoints) else False


def interrupted(extra):
    return (["--resume", checkpoints] if complete() else []) + extra


reference = run(["--metrics", os.path.join(work, "reference.jsonl"),
                 "--save-weights", os.path.join(work, "reference.safetensors")])
if reference.wait() != 0:
    sys.exit("the uninterrupted run failed: " + reference.stderr.read())
own = ["--checkpoint-dir", checkpoints, "--checkpoint-every", "1", "--keep-checkpoints", "2",
       "--metrics", os.path.join(work, "run.jsonl"),
       "--save-weights", os.path.join(work, "run.safetensors")]
rng = random.Random(1234)
killed = finished = 0
if mode == "sigkill":
    while killed < kills:
        process = run(interrupted(own))
        time.sleep(rng.uniform(0.0, 0.12))
        process.send_signal(signal.SIGKILL)
        code = process.wait()
        if code == 0:  # it finished before the kill: start over, checkpoints and all
            finished += 1
            shutil.rmtree(checkpoints)
            continue
        if code != -signal.SIGKILL:
            sys.exit(f"mt-run exited {code} before the kill: {process.stderr.read()}")
        killed += 1
else:
    process = run(own)
    metrics = os.path.join(work, "run.jsonl")
    while not (os.path.exists(metrics) and len(open(metrics).readlines()) >= 3):
        if process.poll() is not None:
            sys.exit("mt-run ended before the signal: " + process.stderr.read())
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    code = process.wait()
    message = process.stderr.read()
    stopped = re.search(r"stopped by SIGTERM after step (\d+), checkpoint written", message)
    if code != 143 or not stopped:
        sys.exit(f"SIGTERM: exit {code}, stderr {message!r}")
    step = int(stopped.group(1))
    if not os.path.exists(os.path.join(checkpoints, f"step-{step:08d}", "manifest.json")):
        sys.exit(f"SIGTERM: no checkpoint of step {step}")
    print(f"SIGTERM: exit 143 after step {step}, its checkpoint written")
    killed = 1
last = run(interrupted(own))
if last.wait() != 0:
    sys.exit("the last resumed run failed: " + last.stderr.read())


def records(path):
    # What a step computed, not its times (nor a device's measures of them).
    keys = ("step", "loss", "lr", "grad_norm", "skipped", "skipped_steps")
    return [tuple(json.loads(line).get(key) for key in keys) for line in open(path)]


same_weights = (open(os.path.join(work, "run.safetensors"), "rb").read() ==
                open(os.path.join(work, "reference.safetensors"), "rb").read())
same_metrics = records(os.path.join(work, "run.jsonl")) == records(
    os.path.join(work, "reference.jsonl"))
print(f"{killed} interruptions, each resumed from the last complete checkpoint: weights "
      f"{'bitwise the same' if same_weights else 'DIFFER'}, metrics of {steps} steps "
      f"{'the same' if same_metrics else 'DIFFER'}")
sys.exit(0 if same_weights and same_metrics else 1)
