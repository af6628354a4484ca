# Exports the bundled example, a GPT-2-style model over bytes (vocabulary 256), to model.onnx
# beside this script: /usr/bin/python3 examples/tiny-gpt/export.py
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import make_fixtures  # noqa: E402

make_fixtures.configure(vocab=256, hidden=64, layers=4, seq=64)
model = make_fixtures.export(make_fixtures.build(make_fixtures.GptModel), opset=17)
make_fixtures.save(model, os.path.dirname(os.path.abspath(__file__)), "model.onnx")
