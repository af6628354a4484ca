# Times mt-run from its launch: prints each start-up line and the first steps' lines with the
# seconds since launch, then the total. python3 scripts/time_startup.py MT-RUN ARGS...
import subprocess
import sys
import time

begin = time.time()
run = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for line in run.stdout:
    if line.startswith(("start-up", "step 1/", "step 2/", "host state", "device mem")):
        print(f"{time.time() - begin:7.1f} s | {line.rstrip()[:150]}", flush=True)
run.wait()
print(f"rc {run.returncode}, total {time.time() - begin:.1f} s")
sys.exit(run.returncode)
