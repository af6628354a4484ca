# Runs `mt-run PLAN --check-schedule --ignore-event N ...` for every event N of the plan and
# fails unless each run fails: every event the compiler placed is needed, and the check finds
# the dependency it stood for. Usage: drop_each_event.py MT_RUN PLAN DATA STEPS
import re
import subprocess
import sys

mt_run, plan, data, steps = sys.argv[1:5]
dump = subprocess.run([mt_run, plan, "--dump"], capture_output=True, text=True, check=True).stdout
events = sorted({int(n) for n in re.findall(r"^\s*record: (\d+)$", dump, re.M)})
caught = 0
for event in events:
    run = subprocess.run([mt_run, plan, "--data", data, "--steps", steps, "--check-schedule",
                          "--ignore-event", str(event)], capture_output=True, text=True)
    if run.returncode != 0 and "a missing dependency" in run.stderr:
        caught += 1
    else:
        print(f"dropping event {event} went unnoticed")
print(f"{caught} of {len(events)} dropped events caught")
sys.exit(0 if events and caught == len(events) else 1)
