# Exports the bundled example, a GPT-2-style model over bytes (vocabulary 256), to model.onnx
# beside this script: /usr/bin/python3 examples/tiny-gpt/export.py
import os
import sys

import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import make_fixtures  # noqa: E402

make_fixtures.configure(vocab=256, hidden=64, layers=4, seq=64)
model = make_fixtures.build(make_fixtures.GptModel)
# GPT-2's initialization: with torch's N(0, 1) embedding, the tied head would start with a
# loss near 40 instead of ln(256). Biases get tiny random values rather than zeros because
# torch's exporter merges initializers with equal contents, which would tie every layer's
# biases together.
for module in model.modules():
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, 0.0, 0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.normal_(module.bias, 0.0, 0.002)
make_fixtures.save(make_fixtures.export(model, opset=17), os.path.dirname(os.path.abspath(__file__)),
                   "model.onnx")
