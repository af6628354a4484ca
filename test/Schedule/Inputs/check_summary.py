# Asserts facts about mtc --summary=json outputs: check_summary.py EXPR FILE...
# EXPR is a Python expression over s[0], s[1], ... (the parsed summaries); prints it.
import json
import sys

s = [json.load(open(path)) for path in sys.argv[2:]]
result = eval(sys.argv[1])
print(f"{sys.argv[1]}: {result}")
sys.exit(0 if result else 1)
