# Runs a command and fails when it takes longer than LIMIT seconds: timed.py LIMIT CMD...
import subprocess
import sys
import time

limit, command = float(sys.argv[1]), sys.argv[2:]
start = time.monotonic()
code = subprocess.call(command)
elapsed = time.monotonic() - start
print(f"finished with exit code {code} in {elapsed:.1f} s (limit {limit:.0f} s)")
sys.exit(code or (elapsed > limit))
