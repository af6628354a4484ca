# Compares the per-step losses of an mt-run --metrics file with a reference: PyTorch's
# losses (JSON with "losses"), where the first must agree within 1e-5 relative and every step
# within 1e-3, or another metrics file, where every step must agree within --tolerance. With
# --grad-norms the gradient norms (before clipping) must agree in the same way. Exit 1 when
# they differ. With --from-step K the metrics are compared with as many of the reference's
# steps from its step K on (a run resumed from the weights after K steps).
import argparse
import json
import sys


# A metrics file's key and the reference JSON's list of it.
REFERENCE_KEYS = {"loss": "losses", "grad_norm": "grad_norms"}


def series(path, key):
    if path.endswith(".json"):
        return json.load(open(path))[REFERENCE_KEYS[key]]
    return [json.loads(line)[key] for line in open(path)]


def compare(args, key):
    """Prints how far the metrics' `key` is from the reference's; exits when too far."""
    got, want = series(args.metrics, key), series(args.reference, key)
    if args.from_step is not None:
        want = want[args.from_step:][:len(got)]
    if len(got) != len(want):
        sys.exit(f"{len(got)} steps in {args.metrics}, {len(want)} in {args.reference}")
    errors = [abs(g - w) / abs(w) for g, w in zip(got, want)]
    worst = max(range(len(errors)), key=errors.__getitem__)
    name = key.replace("_", " ")
    print(f"first {name} {got[0]:.7f} vs {want[0]:.7f} (relative error {errors[0]:.2e}); "
          f"worst step {worst + 1}: {got[worst]:.7f} vs {want[worst]:.7f} ({errors[worst]:.2e})")
    first, every = (args.tolerance, args.tolerance) if args.tolerance else (1e-5, 1e-3)
    if errors[0] > first or errors[worst] > every:
        sys.exit(f"the {REFERENCE_KEYS[key].replace('_', ' ')} differ")
    return len(got)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("metrics")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, help="one bound for every step")
    parser.add_argument("--from-step", type=int,
                        help="compare with as many of the reference's steps from this one on")
    parser.add_argument("--grad-norms", action="store_true",
                        help="compare the gradient norms too")
    args = parser.parse_args()
    steps = compare(args, "loss")
    if args.grad_norms:
        compare(args, "grad_norm")
    print(f"matches over {steps} steps")


if __name__ == "__main__":
    main()
