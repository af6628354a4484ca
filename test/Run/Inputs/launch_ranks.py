# Starts N processes of a command as a launcher would (torchrun's variables, a free port on
# this host), waits for all, and prints each one's output and exit code in rank order.
# Usage: launch_ranks.py N COMMAND...
import os
import socket
import subprocess
import sys

ranks, command = int(sys.argv[1]), sys.argv[2:]
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
processes = []
for rank in range(ranks):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    processes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
for rank, process in enumerate(processes):
    output, _ = process.communicate(timeout=120)
    sys.stdout.write(output)
    print(f"rank {rank} exited with {process.returncode}")
