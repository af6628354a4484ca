# Exits nonzero unless two metrics files hold the same steps with the same losses and
# gradient norms (to the digits the metrics keep). python3 same_metrics.py A.jsonl B.jsonl
import json
import sys

runs = [[json.loads(line) for line in open(path)] for path in sys.argv[1:3]]
if len(runs[0]) != len(runs[1]):
    sys.exit(f"{len(runs[0])} steps against {len(runs[1])}")
for a, b in zip(*runs):
    if (a["step"], a["loss"], a["grad_norm"]) != (b["step"], b["loss"], b["grad_norm"]):
        sys.exit(f"step {a['step']}: loss {a['loss']} and {b['loss']}, "
                 f"grad norm {a['grad_norm']} and {b['grad_norm']}")
print(f"the same over {len(runs[0])} steps")
