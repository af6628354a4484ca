# Reads mt-test-print-buffers' lines for a step without persistent weights and one with,
# and prints how many more device buffers the second keeps to the step's last op: each
# persistent weight's bytes stay from one step into the next.
import re
import sys


def kept_to_end(path):
    lives = [tuple(map(int, m.groups()))
             for m in (re.search(r"live \[(\d+), (\d+)\]", line) for line in open(path)) if m]
    end = max(last for _, last in lives)
    return sum(1 for _, last in lives if last == end)


more = kept_to_end(sys.argv[2]) - kept_to_end(sys.argv[1])
print(f"buffers kept to the step's end: {more} more")
