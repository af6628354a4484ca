"""Checks the device profile mt-run --profile-into wrote: its kernel rates are the last step's
measured ones (products and the loss for GEMMs, attention, the memory-bound families), so is
the CPU's AdamW rate, and the rest of the profile is the calibration's.
  check_profile_into.py CALIBRATED.json WRITTEN.json METRICS.jsonl"""
import json
import sys

calibrated, written = (json.load(open(path)) for path in sys.argv[1:3])
last = [json.loads(line) for line in open(sys.argv[3])][-1]


def rate(families, unit, scale):
    ms = sum(last.get(f"profile_{f}_ms", 0.0) for f in families)
    work = sum(last.get(f"profile_{f}_{unit}", 0.0) * last.get(f"profile_{f}_ms", 0.0)
               for f in families)
    return work / ms * scale


expected = {
    "gemm_flops_per_second": rate(["products", "loss"], "tflops", 1e12),
    "attention_flops_per_second": rate(["attention"], "tflops", 1e12),
    "memory_bytes_per_second": rate(["norms", "rope", "elementwise"], "gbps", 1e9),
    "host_adam_params_per_second": last["profile_adamw_gparams"] * 1e9,
}
for key, value in expected.items():
    if not abs(written[key] - value) <= 1e-4 * value:
        sys.exit(f"{key}: {written[key]}, the step measured {value}")
for key, value in calibrated.items():
    if key not in expected and written.get(key) != value:
        sys.exit(f"{key} changed: {value} -> {written.get(key)}")
print("rates of the last step written; the rest as calibrated")
