"""Checks mt-run --profile's metrics: every step times each op family the plan runs, products
and attention are rated in TFLOP/s (the plan carries their FLOPs), memory-bound families in
GB/s, and the compute stream's families with its waits add up to the step."""
import json
import sys

COMPUTE = ["products", "attention", "norms", "rope", "elementwise", "loss", "waits"]
steps = [json.loads(line) for line in open(sys.argv[1])]
for record in steps:
    shares = sum(record.get(f"profile_{f}_share", 0.0) for f in COMPUTE)
    if abs(shares - 1.0) > 1e-3:
        sys.exit(f"step {record['step']}: the compute stream's shares add to {shares}")
    for family in ["products", "attention", "loss"]:
        if not record.get(f"profile_{family}_tflops", 0) > 0:
            sys.exit(f"step {record['step']}: no TFLOP/s for {family}")
    for family in ["norms", "elementwise", "adamw"]:
        if not record.get(f"profile_{family}_gbps", 0) > 0:
            sys.exit(f"step {record['step']}: no GB/s for {family}")
    if not record["profile_adamw_ms"] > 0 or not record.get("profile_adamw_gparams", 0) > 0:
        sys.exit(f"step {record['step']}: AdamW took no time, or updated no parameters")
print(f"profiled {len(steps)} steps")
