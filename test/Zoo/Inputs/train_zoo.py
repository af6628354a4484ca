# Compiles and trains every model of the fixture zoo (scripts/make_zoo.py) and compares each
# with PyTorch: the first loss within 1e-5 relative, every step's loss and gradient norm
# within --tolerance. Every exported model must compile; attention must be fused wherever the
# family's attention is causal softmax attention (under a padding mask too). A model
# with an attention_mask input also trains on a padded batch against PyTorch's padded run.
# The zoo's models are gzipped (MODEL.onnx.gz); each is unpacked into the work folder.
# Prints a line per model and, with --markdown, writes docs/MODELS.md's table.
# Exit 1 when any model does not behave as expected.
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys

# Families whose attention is not causal softmax attention (a sliding window and soft-capped
# logits included), so mt.attention must not be raised from them (they train unfused), and
# why: none today.
UNFUSED = {}


def run(command):
    return subprocess.run(command, capture_output=True, text=True)


def opset(path):
    """The model's default-domain opset, read with Debian's onnx (no torch needed)."""
    import onnx
    model = onnx.load(path, load_external_data=False)
    return ",".join(str(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx"))


def relative(got, want):
    return abs(got - want) / abs(want)


def worst_error(steps, reference):
    """Each step's relative error: the loss's first, then the larger of loss and norm."""
    return [max(relative(s["loss"], loss), relative(s["grad_norm"], norm)) if i else
            relative(s["loss"], loss)
            for i, (s, loss, norm) in enumerate(zip(steps, reference["losses"],
                                                    reference["grad_norms"]))]


def check_model(name, entry, args, reference):
    """(passed, row) for one model: row holds the MODELS.md columns."""
    family = entry["family"]
    row = {"model": name, "family": family, "exporter": entry["exporter"],
           "mask": "yes" if entry["masked"] else "no"}
    if not entry["exported"]:
        row["result"] = "torch's exporter fails: " + entry["reason"].split(": ", 1)[-1].strip()
        return True, row
    model = os.path.join(args.work, name + ".onnx")
    with gzip.open(os.path.join(args.zoo, name + ".onnx.gz")) as packed, open(model, "wb") as out:
        shutil.copyfileobj(packed, out)
    shape = f"{args.shape['batch']}x{args.shape['sequence']}"
    inputs = ["--input-shape", f"input_ids:{shape}"]
    if entry["masked"]:
        inputs += ["--input-shape", f"attention_mask:{shape}"]
    plan = os.path.join(args.work, name + ".mtp")
    compiled = run([args.mtc, model, *inputs, "-o", plan])
    if compiled.returncode != 0:
        error = (compiled.stderr.strip().splitlines() or ["(no message)"])[0]
        row["result"] = "refused: " + error.split("error: ", 1)[-1]
        return False, row
    summary = json.loads(run([args.mtc, model, *inputs, "--summary=json"]).stdout)
    ops = summary["ops"]
    fused = ops.get("mt.attention", 0) > 0 and "mt.softmax" not in ops
    unfused = UNFUSED.get(family)
    row["opset"] = opset(model)
    row["fused attention"] = "yes" if fused else "no (" + (unfused or "not raised") + ")"
    row["raised"] = ", ".join(sorted(op[3:] for op in ops if op[3:] in RAISED))
    metrics = os.path.join(args.work, name + ".jsonl")
    trained = run([args.mt_run, plan, "--data", os.path.join(args.zoo, "zoo.tokens"), "--steps",
                   str(len(reference["losses"])), "--metrics", metrics, *args.mt_run_args])
    if trained.returncode != 0:
        row["result"] = "mt-run failed: " + (trained.stderr.strip().splitlines() or [""])[-1]
        return False, row
    steps = [json.loads(line) for line in open(metrics)]
    losses = worst_error(steps, reference)
    worst = max(losses)
    row["first loss error"] = f"{losses[0]:.1e}"
    row["worst error"] = f"{worst:.1e}"
    passed = (len(steps) == len(reference["losses"]) and losses[0] <= args.first_tolerance and
              worst <= args.tolerance and fused == (unfused is None))
    padded_references = {}
    for batch in PADDED_BATCHES if entry["masked"] else []:
        # Padded batches: the mask 0 at padding, padding targets (and those predicted at
        # padding) left out of the loss.
        padded = os.path.join(args.work, f"{name}.{batch}.jsonl")
        want = json.load(open(os.path.join(args.zoo, f"{family}.{batch}.losses.json")))
        padded_references[batch] = want
        trained = run([args.mt_run, plan, "--data", os.path.join(args.zoo, f"zoo-{batch}.tokens"),
                       "--pad-token-id", str(want["pad_token_id"]), "--steps",
                       str(len(want["losses"])), "--metrics", padded, *args.mt_run_args])
        if trained.returncode != 0:
            row["result"] = f"mt-run failed on {batch} batches: " + (
                trained.stderr.strip().splitlines() or [""])[-1]
            return False, row
        errors = worst_error([json.loads(line) for line in open(padded)], want)
        row[f"{batch} worst error"] = f"{max(errors):.1e}"
        passed = passed and errors[0] <= args.first_tolerance and max(errors) <= args.tolerance
    row["result"] = "trains like PyTorch" if passed else "differs"
    # The device suite's metrics: the packed batches against PyTorch's run, and the masked
    # exports' padded batches against PyTorch's padded runs.
    device_runs = [("GPU worst", f"zoo-{name}.jsonl", reference)]
    device_runs += [(f"GPU {batch} worst", f"zoo-{batch}-{name}.jsonl", want)
                    for batch, want in padded_references.items()]
    for column, metrics, want in device_runs:
        device = os.path.join(args.device_metrics or "", metrics)
        if not args.device_metrics or not os.path.exists(device):
            continue
        steps = [json.loads(line) for line in open(device)]
        row[column + " loss error"] = f"{max(relative(s['loss'], w) for s, w in zip(steps, want['losses'])):.1e}"
        if column == "GPU worst":
            row[column + " norm error"] = f"{max(relative(s['grad_norm'], w) for s, w in zip(steps, want['grad_norms'])):.1e}"
    return passed, row


# The padded batches a masked export also trains on (zoo-BATCH.tokens against
# FAMILY.BATCH.losses.json): its second sequence right-padded; then its first left-padded too.
PADDED_BATCHES = ["padded", "left-padded"]
RAISED = {"embedding", "linear", "layer_norm", "rms_norm", "gelu", "silu", "glu", "rope", "attention"}
COLUMNS = ["family", "exporter", "mask", "opset", "raised", "fused attention",
           "first loss error", "worst error", "padded worst error", "left-padded worst error",
           "GPU worst loss error", "GPU worst norm error", "GPU padded worst loss error",
           "GPU left-padded worst loss error", "result"]


def markdown(rows, versions):
    lines = ["# Models", "",
             f"Tiny decoders (vocabulary 256, hidden 64, 2 layers, random weights) of every "
             f"family of transformers {versions['transformers']} that mt targets, exported by "
             f"torch {versions['torch']}'s dynamo exporter (`dynamo=True`, its default opset) "
             f"and its legacy one (`dynamo=False`, opset 17), without and with an "
             f"`attention_mask` input (`scripts/make_zoo.sh`, gzipped in `test/Zoo/Models`). "
             f"Each model mt compiles is trained 20 AdamW steps on 2 x 16 tokens and compared "
             f"with PyTorch fp32, as relative errors: on the host backend (`test/Zoo/zoo.test`, "
             f"CI) of the first loss and the worst of every step's loss and gradient norm; on "
             f"the GPU (`scripts/device-suite.sh` on an H100, bf16 storage) the worst loss and "
             f"the worst gradient norm. A model with an `attention_mask` input also trains on a batch "
             f"whose second sequence ends in 5 padding tokens (`mt-run --pad-token-id 0`: the "
             f"mask 0 there, padding targets left out of the loss), against PyTorch given the "
             f"same mask and -100 labels (`padded worst error`; on the GPU `GPU padded worst loss "
             f"error`), and on the same batch with its first sequence starting with 4 padding "
             f"tokens too (`left-padded`: the first token's target, predicted at padding, is "
             f"-100 as well). `raised` lists the fused ops the graph was raised to.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(row.get(c, "") for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n" + NOTES


NOTES = """
## Why a model is refused, or differs

- **attention_mask inputs.** transformers builds the padding mask from the input at run time
  (a GatherND that reads it as [B, 1, 1, S], And with the causal mask; OPT counts positions
  with CumSum); mt compiles those ops (views, selects, a product with a triangle of ones),
  and mt-run feeds a mask of ones (packed sequences), or with `--pad-token-id` a mask that is
  0 at padding, whose targets then count for nothing in the loss (as transformers' collators
  set padding labels to -100). Attention under that mask is fused: mtc recognizes the mask
  as the causal triangle and the input's padding, and attention reads the input as each
  sequence's span of tokens (`mt.key_span`), which the plan holds to one span a row (left
  padding, tokens, right padding; mt-run refuses padding between tokens). Under left
  padding a padding row attends to nothing and is zero, as the dynamo export's NaN guard
  makes it; PyTorch's eager masks instead let such a row attend to every key (transformers
  unmasks fully masked rows, except while tracing). So the prediction made at padding (the
  first token's, under left padding) counts for nothing in mt's loss either, and padding
  rows then reach no loss term: mt trains as PyTorch does given those -100 labels.
- **A batch of one.** Exported from a batch of one with static shapes, the dynamo exporter
  folds the causal mask into an initializer of zeros and the float's lowest value (as
  external data when the model's weights are); mtc folds such a mask instead of training it,
  and attention is fused (`test/Frontend/batch1-export.test`: the first loss within 1e-5 of
  PyTorch's). The zoo exports a batch of two with a dynamic batch axis.
- **The legacy exporter without a mask.** transformers 5's causal-mask code calls
  `torch.diff`, which torch's legacy exporter cannot write at opset 17: the exporter fails
  before mt sees a model. (OPT, which builds its mask otherwise, exports and trains.)
- **Sliding windows and soft caps.** The zoo gives Mistral, Gemma 2 and Gemma 3 a sliding
  window of 6 keys, shorter than the sequence: Mistral's every layer is windowed, Gemma 2's
  and Gemma 3's alternate with global layers, so their models have two layer templates (one
  windowed, one not), each streamed with its own weights. mtc reads the window from the
  mask's band (`mt.attention ... causal window = 6`), and Gemma 2's soft-capped logits
  (`c * tanh(s / c)` between the scores and the mask) as `softcap = 50.0`: their attention
  is fused, forward and backward.
- **Tied weights of the legacy exporter.** It writes a tied lm_head as a transposed copy of
  the embedding; mtc finds such copies (matrices of transposed shapes equal element for
  element) and reads them as the one parameter, as PyTorch trains it (OPT).
- **Buffers and constants.** Initializers that the dynamo exporter's graph signature names as
  buffers (rotary frequencies), or that hold one value throughout without being a parameter
  (OLMo's weightless LayerNorm), fold instead of training.
- **Gemma's `1 + weight`.** The Gemma family's RMSNorm multiplies by `1 + weight`, which
  both exporters fold into a new constant (`add_6`, `onnx::Mul_736`). Under the dynamo
  exporter mtc reads the sum from the node's recorded source line
  (`output * (1.0 + self.weight.float())`) and its module (`model.layers.0.input_layernorm`):
  the parameter holds `model.layers.0.input_layernorm.weight` plus 1, so pretrained weights
  load plus 1, save minus 1 under PyTorch's name, and weight decay pulls it toward 1 as
  PyTorch's pulls `weight` toward 0 (`test/Zoo/weights.test`; PyTorch loads the saved
  weights and gets mt's next loss: `pytorch-roundtrip.test`). The legacy exporter records
  nothing: a `--weights-map` entry says `"offset": 1` (the zoo's
  `gemma.legacy.map.json`), and without one its norms decay toward 0 (1e-4 off PyTorch
  after 20 steps).
- **On the GPU** the suite trains every model, the masked exports on both padded batches too,
  and the Llama from its pretrained weights (shards and bf16): every loss within 2e-2 of
  PyTorch's.
- **Gradient norms on the GPU.** With bf16 storage the losses stay within 5e-3 of PyTorch's,
  but a tiny model's gradient-norm spike can land at another step (Gemma 2: 2.8 against 5.7
  at step 11), so the device suite bounds the losses only.
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("zoo")
    parser.add_argument("work")
    parser.add_argument("--mtc", required=True)
    parser.add_argument("--mt-run", required=True)
    parser.add_argument("--tolerance", type=float, default=1e-2)
    parser.add_argument("--first-tolerance", type=float, default=1e-5)
    parser.add_argument("--backend", default="host")
    parser.add_argument("--markdown", help="write docs/MODELS.md's table of results here")
    parser.add_argument("--device-metrics",
                        help="a folder of the GPU suite's zoo-NAME.jsonl, for a GPU column")
    args = parser.parse_args()
    args.mt_run_args = ["--backend=" + args.backend]
    index = json.load(open(os.path.join(args.zoo, "zoo.json")))
    args.shape = index["shape"]
    os.makedirs(args.work, exist_ok=True)
    rows, failures = [], 0
    for name, entry in sorted(index["models"].items()):
        reference = json.load(open(os.path.join(args.zoo, entry["family"] + ".losses.json")))
        passed, row = check_model(name, entry, args, reference)
        rows.append(row)
        failures += not passed
        print(f"{'PASS' if passed else 'FAIL'} {name}: {row['result']}"
              + (f" (first loss {row['first loss error']}, worst {row['worst error']}, "
                 f"fused attention {row['fused attention']})" if "worst error" in row else ""))
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(markdown(rows, index["versions"]))
    print(f"{len(rows) - failures} of {len(rows)} models as expected")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
