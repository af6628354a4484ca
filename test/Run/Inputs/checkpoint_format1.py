# Rewrites a checkpoint as format 1 wrote it (the same state file; the checksum over 64 MiB
# chunks of the file rather than over each array's pieces), so that a test can resume from one.
#   checkpoint_format1.py FROM TO
import json
import os
import shutil
import struct
import sys

source, target = sys.argv[1:3]
shutil.rmtree(target, ignore_errors=True)
shutil.copytree(source, target)
MASK = (1 << 64) - 1


def chunk_hash(data):
    """4 lanes of 64-bit FNV-1a over 32-bit little-endian words, as CheckpointFiles' ChunkHash."""
    lanes = [0xcbf29ce484222325, 0x84222325cbf29ce4, 0x9ce484222325cbf2, 0x2325cbf29ce48422]
    words = len(data) // 4
    for i, (word,) in enumerate(struct.iter_unpack("<I", data[:words * 4])):
        lanes[i & 3] = ((lanes[i & 3] ^ word) * 0x100000001b3) & MASK
    h = words
    for lane in lanes:
        h = ((h ^ lane) * 0x100000001b3) & MASK
    return h


state = open(os.path.join(target, "state.bin"), "rb").read()
chunk = 64 << 20
hashes = [chunk_hash(state[at:at + chunk]) for at in range(0, len(state), chunk)]
manifest_path = os.path.join(target, "manifest.json")
manifest = json.load(open(manifest_path))
manifest["format"] = 1
manifest["state_checksum"] = "%016x" % chunk_hash(b"".join(struct.pack("<Q", h) for h in hashes))
json.dump(manifest, open(manifest_path, "w"), indent=2)
