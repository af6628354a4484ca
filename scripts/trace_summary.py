# Where a step's time goes, from a trace (mt-run --trace, or mtc --emit=timeline): each track's
# busy time, and the longest idle gaps of the compute stream and of the CPU's updates with
# what ran on the other tracks meanwhile. Usage: trace_summary.py TRACE.json [--gaps N]
import argparse
import json


def merged(spans):
    """The union of (begin, end) spans, in order."""
    out = []
    for begin, end in sorted(spans):
        if out and begin <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([begin, end])
    return out


def gaps(busy, begin, end):
    """The idle spans of `busy` (merged) within [begin, end]."""
    found, at = [], begin
    for b, e in busy:
        if b > at:
            found.append((at, b))
        at = max(at, e)
    if end > at:
        found.append((at, end))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trace")
    parser.add_argument("--gaps", type=int, default=5, help="idle gaps listed a track")
    args = parser.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    slices = [e for e in events if e["ph"] == "X"]
    tracks = {tid: [s for s in slices if s["tid"] == tid] for tid in names}
    device = [s for s in slices if names.get(s["tid"]) not in ("cpu", "device updates")]
    # The step: from the trace's origin (the step's start) to its last slice on the plan's
    # streams; the CPU's updates, and the device's (--device-updates), may run past it.
    begin = 0.0
    end = max(s["ts"] + s["dur"] for s in device)
    print(f"step {(end - begin) / 1e3:.3f} ms")
    busy = {}
    for tid, name in sorted(names.items()):
        spans = [(max(s["ts"], begin), min(s["ts"] + s["dur"], end)) for s in tracks[tid]]
        busy[tid] = merged([(b, e) for b, e in spans if e > b])
        total = sum(e - b for b, e in busy[tid])
        print(f"{name:8} busy {total / 1e3:10.3f} ms  {100 * total / (end - begin):5.1f}%")
    for tid, name in sorted(names.items()):
        if name not in ("compute", "cpu") or not tracks[tid]:
            continue
        idle = sorted(gaps(busy[tid], begin, end), key=lambda g: g[0] - g[1])[: args.gaps]
        for b, e in sorted(idle):
            beside = []
            for other, other_name in sorted(names.items()):
                ran = [s["name"] for s in tracks[other]
                       if other != tid and s["ts"] < e and s["ts"] + s["dur"] > b]
                if ran:
                    beside.append(f"{other_name}: {ran[0]}" +
                                  (f" .. {ran[-1]} ({len(ran)})" if len(ran) > 1 else ""))
            print(f"{name} idle {(b - begin) / 1e3:10.3f} .. {(e - begin) / 1e3:10.3f} ms "
                  f"({(e - b) / 1e3:.3f} ms): " + ("; ".join(beside) or "nothing else runs"))


if __name__ == "__main__":
    main()
