# The device machine's PCIe crossings and host memory, alone and together: h2d, d2h, both at
# once, then both beside torch's fused CPU AdamW (#16: does the link or host memory hold a
# device update's crossings, and how much does DMA slow the host's AdamW). Prints JSON lines.
# bench_crossings.py [GiB a direction] [AdamW parameters, G] [seconds a measurement]
import json
import sys
import threading
import time

import torch

size = int(float(sys.argv[1] if len(sys.argv) > 1 else 2) * 2**30)
params = int(float(sys.argv[2] if len(sys.argv) > 2 else 1) * 1e9)
window = float(sys.argv[3] if len(sys.argv) > 3 else 3)


def emit(**row):
    print(json.dumps(row), flush=True)


host_in = torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(1)
host_out = torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(1)
device_in = torch.empty(size, dtype=torch.uint8, device="cuda")
device_out = torch.ones(size, dtype=torch.uint8, device="cuda")
streams = {"h2d": torch.cuda.Stream(), "d2h": torch.cuda.Stream()}


def crossings(directions):
    """Repeats each direction's copy on its own stream for `window` seconds; GB/s each."""
    moved = {d: 0 for d in directions}
    start = time.perf_counter()
    while time.perf_counter() - start < window:
        for d in directions:
            with torch.cuda.stream(streams[d]):
                if d == "h2d":
                    device_in.copy_(host_in, non_blocking=True)
                else:
                    host_out.copy_(device_out, non_blocking=True)
            moved[d] += size
        for d in directions:  # at most one copy queued ahead of the clock
            streams[d].synchronize()
    seconds = time.perf_counter() - start
    return {f"{d}_gbps": round(moved[d] / seconds / 1e9, 1) for d in directions}


param = torch.nn.Parameter(torch.empty(params).fill_(0.5))
param.grad = torch.empty(params).fill_(0.01)
optimizer = torch.optim.AdamW([param], lr=1e-4, fused=True)
optimizer.step()


def adamw_rate(stop=None):
    steps, start = 0, time.perf_counter()
    while (stop is None and time.perf_counter() - start < window) or (stop and not stop.is_set()):
        optimizer.step()
        steps += 1
    return params * steps / (time.perf_counter() - start) / 1e9


emit(kind="host", threads=torch.get_num_threads(), gib_a_direction=size / 2**30, adamw_params=params)
emit(kind="adamw_alone", gparams_s=round(adamw_rate(), 2))
for directions in (["h2d"], ["d2h"], ["h2d", "d2h"]):
    emit(kind="crossings_alone", **crossings(directions))
    rate = {}
    stop = threading.Event()
    worker = threading.Thread(target=lambda: rate.update(g=adamw_rate(stop)))
    worker.start()
    time.sleep(0.5)  # the AdamW loop under way first
    moved = crossings(directions)
    stop.set()
    worker.join()
    emit(kind="crossings_beside_adamw", **moved, adamw_gparams_s=round(rate["g"], 2))
