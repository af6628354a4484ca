# Compares the per-step losses of an mt-run --metrics file with a reference: PyTorch's
# losses (JSON with "losses"), where the first must agree within 1e-5 relative and every step
# within 1e-3, or another metrics file, where every step must agree within --tolerance.
# Exit 1 when they differ.
import argparse
import json
import sys


def losses(path):
    if path.endswith(".json"):
        return json.load(open(path))["losses"]
    return [json.loads(line)["loss"] for line in open(path)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("metrics")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, help="one bound for every step")
    args = parser.parse_args()
    got, want = losses(args.metrics), losses(args.reference)
    if len(got) != len(want):
        sys.exit(f"{len(got)} steps in {args.metrics}, {len(want)} in {args.reference}")
    errors = [abs(g - w) / abs(w) for g, w in zip(got, want)]
    worst = max(range(len(errors)), key=errors.__getitem__)
    print(f"first loss {got[0]:.7f} vs {want[0]:.7f} (relative error {errors[0]:.2e}); "
          f"worst step {worst + 1}: {got[worst]:.7f} vs {want[worst]:.7f} ({errors[worst]:.2e})")
    first, every = (args.tolerance, args.tolerance) if args.tolerance else (1e-5, 1e-3)
    if errors[0] > first or errors[worst] > every:
        sys.exit("the losses differ")
    print(f"matches over {len(got)} steps")


if __name__ == "__main__":
    main()
