# Compares two safetensors files of fp32 weights (mt-run --save-weights): the same tensors,
# each within --tolerance of the reference tensor's largest element. Exit 1 when they differ.
import argparse
import json
import struct
import sys

import numpy as np


def tensors(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            sys.exit(f"{path}: {name} is {entry['dtype']}, not F32")
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(entry["shape"])
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("weights")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()
    got, want = tensors(args.weights), tensors(args.reference)
    if got.keys() != want.keys():
        sys.exit(f"the tensors differ: {sorted(got.keys() ^ want.keys())}")
    errors = {name: float(np.max(np.abs(got[name] - w)) / max(float(np.max(np.abs(w))), 1e-30))
              for name, w in want.items()}
    worst = max(errors, key=errors.get)
    print(f"{len(errors)} tensors; worst {worst}: {errors[worst]:.2e} of its largest element")
    if errors[worst] > args.tolerance:
        sys.exit(f"{worst} differs by {errors[worst]:.2e} (tolerance {args.tolerance:.0e})")


if __name__ == "__main__":
    main()
