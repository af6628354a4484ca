# Exports a Hugging Face causal LM as mt compiles it: token ids (and optionally an
# attention_mask) in, logits out, by torch's dynamo exporter (or the legacy one), with its
# parameters under save_pretrained's names. Needs torch, transformers and onnxscript
# (scripts/make_zoo.sh makes such a venv).
# Usage: export_hf.py MODEL OUT.onnx [--mask] [--legacy] [--opset N] [--external-data]
#   MODEL: a save_pretrained folder or hub id (its weights), or a config.json (random weights)
import argparse
import warnings

import torch
import transformers


def logits_only(model):
    """The model as mt compiles it: token ids (and a padding mask) in, logits out. The class
    is swapped rather than wrapped, so that parameters keep save_pretrained's names."""
    base = type(model)

    class LogitsOnly(base):
        def forward(self, input_ids, attention_mask=None):
            return base.forward(self, input_ids=input_ids, attention_mask=attention_mask,
                                use_cache=False).logits

    model.__class__ = LogitsOnly
    return model


def export(model, path, dynamo=True, opset=None, masked=False, external_data=False):
    """Writes `model` (logits_only's) to `path` with free batch and sequence dimensions. The
    example batch is 2 x 16: torch.export would fix a size of 1 into the graph."""
    ids = torch.zeros(2, 16, dtype=torch.long)
    args = (ids, torch.ones(2, 16, dtype=torch.long)) if masked else (ids,)
    names = ["input_ids", "attention_mask"] if masked else ["input_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            program = torch.onnx.export(model, args, None, dynamo=True, opset_version=opset,
                                        input_names=names, output_names=["logits"],
                                        dynamic_shapes=tuple(axes[n] for n in names))
            program.save(path, external_data=external_data)
        else:
            torch.onnx.export(model, args, path, dynamo=False, opset_version=opset or 17,
                              input_names=names, output_names=["logits"],
                              dynamic_axes=dict(axes, logits={0: "batch", 1: "sequence"}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--mask", action="store_true", help="an attention_mask input too")
    parser.add_argument("--legacy", action="store_true", help="the legacy exporter (opset 17)")
    parser.add_argument("--opset", type=int, help="the opset to ask the exporter for")
    parser.add_argument("--external-data", action="store_true",
                        help="weights in OUT.data (models over 2 GB need it)")
    args = parser.parse_args()
    if args.model.endswith(".json"):
        config = transformers.AutoConfig.from_pretrained(args.model)
        model = transformers.AutoModelForCausalLM.from_config(config)
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model)
    export(logits_only(model.float()), args.out, dynamo=not args.legacy, opset=args.opset,
           masked=args.mask, external_data=args.external_data)


if __name__ == "__main__":
    main()
