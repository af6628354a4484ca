# Trains the fixture models in PyTorch (Debian's torch 1.13, fp32) on one fixed batch with
# torch.optim.AdamW, unclipped and clipped, writing the token file and the per-step losses and
# gradient norms that mt must reproduce.
# Usage: make_reference.py OUTDIR [STEPS]
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import make_fixtures as fx


def train(model, inputs, targets, steps, clip=0, mask=None):
    """torch.optim.AdamW with mt-run's defaults on one batch: each step's loss and gradient
    norm (before clipping to `clip`, when given). With an attention `mask`, the model takes
    it, and targets of -100 count for nothing."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.01)
    losses, norms = [], []
    for _ in range(steps):
        optimizer.zero_grad()
        logits = model(inputs) if mask is None else model(inputs, attention_mask=mask)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        # An infinite bound measures only: the gradients are multiplied by 1.
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip or float("inf"))
        optimizer.step()
        losses.append(loss.item())
        norms.append(norm.item())
    return losses, norms


def reference(model, name, outdir, steps, clip):
    # A file of exactly B*(T+1) tokens: mt-run's windows wrap, so every step sees this batch.
    generator = np.random.default_rng(1)
    tokens = generator.integers(0, fx.VOCAB, size=fx.BATCH * (fx.SEQ + 1)).astype(np.uint16)
    tokens.tofile(os.path.join(outdir, name + ".tokens"))
    windows = torch.from_numpy(tokens.astype(np.int64)).view(fx.BATCH, fx.SEQ + 1)
    losses, norms = train(model, windows[:, :-1], windows[:, 1:], steps, clip)
    suffix = f".clip{clip:g}" if clip else ""
    with open(os.path.join(outdir, name + suffix + ".losses.json"), "w") as out:
        json.dump({"lr": 1e-3, "weight_decay": 0.01, "grad_clip": clip, "losses": losses,
                   "grad_norms": norms}, out)
    print(f"{name}{suffix}: {steps} steps, loss {losses[0]:.6f} -> {losses[-1]:.6f}, "
          f"gradient norm {norms[0]:.4f} -> {norms[-1]:.4f}")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: make_reference.py OUTDIR [STEPS]")
    outdir = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) == 3 else 20
    os.makedirs(outdir, exist_ok=True)
    # The same seeded modules that make_fixtures.py exported: the ONNX files hold these weights.
    # The clip bounds lie below every step's norm, so that each step is clipped.
    for model, name, clip in (fx.GptModel, "gpt2", 1.0), (fx.LlamaModel, "llama", 0.5):
        reference(fx.build(model), name, outdir, steps, 0)
        reference(fx.build(model), name, outdir, steps, clip)


if __name__ == "__main__":
    main()
