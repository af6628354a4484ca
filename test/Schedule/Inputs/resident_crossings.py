# Reads the tiny GPT's summaries at resident-layers 0, 1, 2, 4 (one JSON a line) and prints
# each plan's weights prefetches and how many layer crossings fewer the cost model counts than
# at 0. Its layers are equal, so a crossing is the h2d bytes that resident-layers 1 saves (one
# of the last layer's); each other plan must save a whole number of them, as many as the
# schedule drops prefetches.
import json
import sys

summaries = [json.loads(line) for line in open(sys.argv[1])]
base = summaries[0]
unit = base["h2d_bytes_per_step"] - summaries[1]["h2d_bytes_per_step"]
assert unit > 0, "resident-layers 1 saves nothing in the cost model"
print(f"resident 0: {base['ops']['mt.prefetch']} prefetches")
for resident, summary in zip([1, 2, 4], summaries[1:]):
    prefetches = summary["ops"]["mt.prefetch"]
    fewer = base["h2d_bytes_per_step"] - summary["h2d_bytes_per_step"]
    assert fewer % unit == 0, (fewer, unit)
    crossings = fewer // unit
    assert crossings == base["ops"]["mt.prefetch"] - prefetches, (crossings, prefetches)
    print(f"resident {resident}: {prefetches} prefetches, {crossings} layer crossing"
          f"{'s' if crossings > 1 else ''} fewer in the cost model")
peaks = [s["peak_device_bytes"] for s in summaries]
assert peaks == sorted(peaks) and peaks[-1] > peaks[0], peaks
print("device memory grows with resident layers")
