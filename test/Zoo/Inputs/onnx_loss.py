# Runs an ONNX model (onnxruntime, CPU) on one batch of a token file, as mt-run batches it,
# and writes the mean cross-entropy of its logits against the next tokens as a metrics line.
# Usage: onnx_loss.py MODEL TOKENS BATCH SEQUENCE OUT.jsonl
import json
import sys

import numpy as np
import onnxruntime

model, tokens, batch, sequence, out = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:5]), sys.argv[5]
windows = np.fromfile(tokens, dtype=np.uint16)[:batch * (sequence + 1)].astype(np.int64)
windows = windows.reshape(batch, sequence + 1)
session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
logits = session.run(None, {"input_ids": windows[:, :-1]})[0].astype(np.float64)
shifted = logits - logits.max(-1, keepdims=True)
log_probabilities = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
loss = -np.take_along_axis(log_probabilities, windows[:, 1:, None], -1).mean()
with open(out, "w") as f:
    f.write(json.dumps({"step": 1, "loss": float(loss)}) + "\n")
