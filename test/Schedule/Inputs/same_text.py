# Prints "same" when two IR files hold the same text (blank lines aside), else their first
# differing line: same_text.py A B
import sys

def lines(path):
    return [line for line in open(path).read().splitlines() if line.strip()]

a, b = lines(sys.argv[1]), lines(sys.argv[2])
for i, (x, y) in enumerate(zip(a, b)):
    if x != y:
        print(f"line {i + 1} differs:\n{x}\n{y}")
        sys.exit(1)
print("same" if len(a) == len(b) else f"lengths differ: {len(a)} and {len(b)} lines")
