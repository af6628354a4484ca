# Sets every value of one tensor of a safetensors file (F32) to VALUE: weights that make a
# step's loss and gradients non-finite. Plain struct and json: it runs where no safetensors
# package is installed (the device machine).
#   poison_weights.py IN.safetensors OUT.safetensors TENSOR VALUE
import json
import struct
import sys

source, target, name, value = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
data = bytearray(open(source, "rb").read())
header_bytes = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + header_bytes])
if name not in header or header[name]["dtype"] != "F32":
    sys.exit(f"{source} has no F32 tensor {name}")
begin, end = header[name]["data_offsets"]
at = 8 + header_bytes
data[at + begin:at + end] = struct.pack("<f", value) * ((end - begin) // 4)
open(target, "wb").write(data)
