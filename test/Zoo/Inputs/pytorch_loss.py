# Loads weights mt-run saved (--save-weights) into the zoo's PyTorch model of FAMILY, strictly
# by name, and writes the loss it computes on the zoo's batch as a metrics line. Needs the
# zoo's venv (torch, transformers): scripts/make_zoo.sh.
# Usage: pytorch_loss.py FAMILY WEIGHTS.safetensors OUT.jsonl
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts"))
import make_zoo  # noqa: E402
import numpy as np  # noqa: E402
import safetensors.torch  # noqa: E402
import torch  # noqa: E402

family, weights, out = sys.argv[1:4]
model = make_zoo.build(family)
model.load_state_dict(safetensors.torch.load_file(weights), strict=True)
windows = torch.from_numpy(make_zoo.tokens().astype(np.int64)).view(make_zoo.BATCH,
                                                                     make_zoo.SEQ + 1)
with torch.no_grad():
    logits = model(windows[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             windows[:, 1:].reshape(-1))
with open(out, "w") as f:
    f.write(json.dumps({"step": 1, "loss": loss.item()}) + "\n")
