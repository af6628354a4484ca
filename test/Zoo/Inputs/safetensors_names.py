# Prints each tensor of a safetensors file (or a folder of shards) as "name shape", sorted,
# read from the headers alone (no torch).
import json
import os
import struct
import sys


def headers(path):
    files = [path]
    if os.path.isdir(path):
        files = [os.path.join(path, f) for f in sorted(os.listdir(path))
                 if f.endswith(".safetensors")]
    for name in files:
        with open(name, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            yield json.loads(f.read(size))


for header in headers(sys.argv[1]):
    for name, entry in sorted(header.items()):
        if name != "__metadata__":
            print(name, "x".join(map(str, entry["shape"])))
