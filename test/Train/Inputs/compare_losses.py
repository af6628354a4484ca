# Compares mt-run's per-step losses (--metrics JSONL) with PyTorch's reference losses: the
# first within 1e-5 relative, every step within 1e-3 relative. Exit 1 when they differ.
import json
import sys


def main():
    metrics, reference = sys.argv[1], sys.argv[2]
    got = [json.loads(line)["loss"] for line in open(metrics)]
    want = json.load(open(reference))["losses"]
    if len(got) != len(want):
        sys.exit(f"{len(got)} steps in {metrics}, {len(want)} in {reference}")
    errors = [abs(g - w) / abs(w) for g, w in zip(got, want)]
    worst = max(range(len(errors)), key=errors.__getitem__)
    print(f"first loss {got[0]:.7f} vs {want[0]:.7f} (relative error {errors[0]:.2e}); "
          f"worst step {worst + 1}: {got[worst]:.7f} vs {want[worst]:.7f} ({errors[worst]:.2e})")
    if errors[0] > 1e-5 or errors[worst] > 1e-3:
        sys.exit("mt does not match PyTorch")
    print(f"matches PyTorch over {len(got)} steps")


if __name__ == "__main__":
    main()
