# Builds tiny Hugging Face decoders of every family transformers offers among the ones mt
# targets, exports each with torch's dynamo and legacy exporters (with and without an
# attention_mask input; each written gzipped, MODEL.onnx.gz), and trains each in PyTorch fp32
# for the reference losses.
# Run by developers through scripts/make_zoo.sh (a venv with a current torch), not by CI.
# Usage: make_zoo.py OUTDIR [--references-only] [FAMILY ...]
import gzip
import json
import os
import shutil
import sys
import traceback

import numpy as np
import onnx
import onnx.numpy_helper
import safetensors.torch
import torch
import transformers

import export_hf
import make_reference

VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 256, 64, 2, 4, 2, 128
BATCH, SEQ, STEPS, SEED = 2, 16, 20, 0
# A sliding window shorter than the sequence, for the families that have one (Mistral's every
# layer; Gemma 2's and 3's alternate with global layers, so a model has two layer templates).
WINDOW = 6
# The padding token of the padded batch, and how many tokens of its last window are padding;
# the left-padded batch's first window starts with LEFT_PADDED padding tokens.
PAD, PADDED, LEFT_PADDED = 0, 5, 4
# The families whose trained weights are saved as pretrained weights (Llama's in shards and in
# bf16; Gemma's, whose exports fold its RMSNorm's `1 + weight`, as one file), and the steps
# after them.
PRETRAINED, PRETRAINED_STEPS = {"llama": True, "gemma": False}, 6
# The family whose legacy export gets a --weights-map (found by value) to its PyTorch names.
LEGACY_MAPPED = "gemma"
# A family with tied embeddings whose initial weights are saved as save_pretrained writes them.
TIED = "smollm3"
# mt-run's AdamW defaults, which make_reference.train uses.
LR, WEIGHT_DECAY = 1e-3, 0.01

COMMON = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
              num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, intermediate_size=FFN,
              max_position_embeddings=64, attention_dropout=0.0)

# Each family: its config class and the fields that make it tiny (its own names where they
# differ). A family missing from the installed transformers is skipped and said so.
FAMILIES = {
    "llama": ("LlamaConfig", COMMON),
    "mistral": ("MistralConfig", dict(COMMON, sliding_window=WINDOW)),
    "qwen2": ("Qwen2Config", COMMON),
    "qwen3": ("Qwen3Config", dict(COMMON, head_dim=16)),
    "gemma": ("GemmaConfig", dict(COMMON, head_dim=16)),
    "gemma2": ("Gemma2Config", dict(COMMON, head_dim=16, sliding_window=WINDOW)),
    "gemma3": ("Gemma3TextConfig", dict(COMMON, head_dim=16, sliding_window=WINDOW,
                                        layer_types=["full_attention", "sliding_attention"])),
    "phi3": ("Phi3Config", dict(COMMON, pad_token_id=0)),
    "gpt2": ("GPT2Config", dict(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                                n_inner=FFN, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                attn_pdrop=0.0)),
    "gpt_neox": ("GPTNeoXConfig", dict(COMMON, num_key_value_heads=None, hidden_dropout=0.0)),
    "opt": ("OPTConfig", dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                              num_attention_heads=HEADS, ffn_dim=FFN, word_embed_proj_dim=HIDDEN,
                              max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                              pad_token_id=1)),
    "falcon": ("FalconConfig", dict(vocab_size=VOCAB, hidden_size=HIDDEN,
                                    num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                    num_kv_heads=KV_HEADS, new_decoder_architecture=True,
                                    hidden_dropout=0.0, attention_dropout=0.0)),
    "stablelm": ("StableLmConfig", COMMON),
    "olmo": ("OlmoConfig", COMMON),
    "olmo2": ("Olmo2Config", COMMON),
    "smollm3": ("SmolLM3Config", dict(COMMON, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
}


def build(family):
    config_name, fields = FAMILIES[family]
    config_class = getattr(transformers, config_name, None)
    if config_class is None:
        return None
    config = config_class(**{k: v for k, v in fields.items() if v is not None})
    # The attention users get: scaled_dot_product_attention where the family offers it.
    try:
        torch.manual_seed(SEED)
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    except ValueError:
        torch.manual_seed(SEED)
        model = transformers.AutoModelForCausalLM.from_config(config,
                                                              attn_implementation="eager")
    model = model.float()
    # Norm weights start at ones; random ones make an importer that drops them fail.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    return export_hf.logits_only(model)


def tokens():
    """B*(T+1) tokens: mt-run's windows wrap, so every step sees this one batch."""
    generator = np.random.default_rng(1)
    return generator.integers(0, VOCAB, size=BATCH * (SEQ + 1)).astype(np.uint16)


# Each export: its name, whether by the dynamo exporter, the opset asked for (None: the
# exporter's default), whether also with an attention_mask input, and the families it is made
# for (None: every one). Opset 23 writes Attention, RMSNormalization and RotaryEmbedding
# nodes: a few families cover their forms (grouped heads, q/k norms, partial rotary).
EXPORTS = [("dynamo", True, None, True, None), ("legacy", False, 17, True, None),
           ("dynamo23", True, 23, False, {"llama", "qwen3", "gpt_neox", "phi3"})]


def compress(path):
    """Replaces the model by PATH.gz (no name or time inside, so the bytes are the model's
    alone): the exporters' node metadata halves, and the zoo stays small to carry."""
    with open(path, "rb") as model, open(path + ".gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as out:
            shutil.copyfileobj(model, out)
    os.remove(path)


def reference(model, data, steps=STEPS):
    windows = torch.from_numpy(data.astype(np.int64)).view(BATCH, SEQ + 1)
    return make_reference.train(model, windows[:, :-1], windows[:, 1:], steps)


def padded_tokens():
    """The batch with its second sequence right-padded: its last PADDED tokens are PAD, which
    no other token is."""
    tokens = np.random.default_rng(1).integers(1, VOCAB, size=BATCH * (SEQ + 1))
    tokens[-PADDED:] = PAD
    return tokens.astype(np.uint16)


def left_padded_tokens():
    """The padded batch with its first sequence left-padded too: its first LEFT_PADDED tokens
    are PAD."""
    tokens = padded_tokens()
    tokens[:LEFT_PADDED] = PAD
    return tokens


# The padded batches: each one's name (zoo-NAME.tokens, FAMILY.NAME.losses.json) and tokens.
PADDED_BATCHES = {"padded": padded_tokens, "left-padded": left_padded_tokens}


def padded_reference(family, tokens):
    """PyTorch on a padded batch as mt-run --pad-token-id trains: the mask 0 at padding;
    padding targets, and those predicted at padding (a left-padded sequence's first token,
    from a row that attends to nothing), -100."""
    windows = torch.from_numpy(tokens.astype(np.int64)).view(BATCH, SEQ + 1)
    inputs, targets = windows[:, :-1], windows[:, 1:].clone()
    targets[(targets == PAD) | (inputs == PAD)] = -100
    return make_reference.train(build(family), inputs, targets, STEPS,
                                mask=(inputs != PAD).long())


def save_initial(family, outdir):
    """The exported weights as save_pretrained writes them: a tied family's keep the
    embedding's name alone, where the dynamo export names the one tensor after lm_head."""
    folder = os.path.join(outdir, family + ".initial")
    build(family).save_pretrained(folder)
    for extra in os.listdir(folder):
        if not extra.endswith(".safetensors"):
            os.remove(os.path.join(folder, extra))


def pretrained(family, data, outdir, shards_and_bf16):
    """The model after the reference run, as save_pretrained writes it (in shards and in bf16,
    or as one file), with PyTorch's losses of PRETRAINED_STEPS more steps (a fresh AdamW) from
    each: what mt-run --weights must reproduce."""
    model = build(family)
    reference(model, data)
    folder = os.path.join(outdir, family + ".pretrained")
    model.save_pretrained(folder, max_shard_size="200KB" if shards_and_bf16 else "50MB")
    for extra in os.listdir(folder):
        if not extra.endswith((".safetensors", ".index.json")):
            os.remove(os.path.join(folder, extra))
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
             if not k.endswith("inv_freq")}
    if shards_and_bf16:
        safetensors.torch.save_file(
            state, os.path.join(outdir, family + ".pretrained-bf16.safetensors"))
    for suffix, weights in [("", None)] + ([("-bf16", state)] if shards_and_bf16 else []):
        again = build(family)
        if weights:
            again.load_state_dict({k: v.float() for k, v in weights.items()}, strict=False)
        else:
            again.load_state_dict(model.state_dict())
        losses, norms = reference(again, data, PRETRAINED_STEPS)
        with open(os.path.join(outdir, f"{family}.pretrained{suffix}.losses.json"), "w") as out:
            json.dump({"lr": LR, "weight_decay": WEIGHT_DECAY, "losses": losses,
                       "grad_norms": norms}, out)


def legacy_map(family, outdir):
    """The --weights-map of the family's legacy masked export, found by value: each
    initializer the exporter renamed (`onnx::MatMul_737`) is the PyTorch parameter, its
    transpose, or (Gemma's RMSNorm) the parameter plus 1. A copy of another initializer
    (the transposed tied embedding) is the plan's, not the map's."""
    model = onnx.load_from_string(
        gzip.open(os.path.join(outdir, f"{family}.legacy.mask.onnx.gz")).read())
    state = {k: v.detach().numpy() for k, v in build(family).state_dict().items()}
    values = {init.name: onnx.numpy_helper.to_array(init) for init in model.graph.initializer}
    entries = {}
    for init, value in values.items():
        if init in state or value.dtype != np.float32 or value.size <= 1:
            continue
        if any(other.T.shape == value.shape and np.array_equal(other.T, value)
               for name, other in values.items() if name in state):
            continue
        for name, weight in state.items():
            for transposed, offset in (False, 0.0), (True, 0.0), (False, 1.0):
                source = weight.T if transposed else weight
                if source.shape == value.shape and np.array_equal(source + offset, value):
                    entries[init] = dict({"name": name},
                                              **({"transposed": True} if transposed else {}),
                                              **({"offset": offset} if offset else {}))
    with open(os.path.join(outdir, f"{family}.legacy.map.json"), "w") as out:
        json.dump(entries, out, indent=1, sort_keys=True)


def main():
    args = [a for a in sys.argv[1:] if a != "--references-only"]
    only_references = len(args) < len(sys.argv) - 1
    if not args:
        sys.exit("usage: make_zoo.py OUTDIR [--references-only] [FAMILY ...]")
    outdir = args[0]
    families = args[1:] or list(FAMILIES)
    os.makedirs(outdir, exist_ok=True)
    data = tokens()
    data.tofile(os.path.join(outdir, "zoo.tokens"))
    for name, batch in PADDED_BATCHES.items():
        batch().tofile(os.path.join(outdir, f"zoo-{name}.tokens"))
    index_path = os.path.join(outdir, "zoo.json")
    index = json.load(open(index_path)) if os.path.exists(index_path) else {}
    index["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    index["shape"] = {"batch": BATCH, "sequence": SEQ}
    models = index.setdefault("models", {})
    for family in families:
        if build(family) is None:
            print(f"{family}: not in transformers {transformers.__version__}")
            continue
        losses, norms = reference(build(family), data)
        with open(os.path.join(outdir, family + ".losses.json"), "w") as out:
            json.dump({"lr": LR, "weight_decay": WEIGHT_DECAY, "losses": losses,
                       "grad_norms": norms}, out)
        for name, batch in PADDED_BATCHES.items():
            padded_losses, padded_norms = padded_reference(family, batch())
            with open(os.path.join(outdir, f"{family}.{name}.losses.json"), "w") as out:
                json.dump({"lr": LR, "weight_decay": WEIGHT_DECAY, "pad_token_id": PAD,
                           "losses": padded_losses, "grad_norms": padded_norms}, out)
        if family == TIED:
            save_initial(family, outdir)
        if only_references:
            continue
        for exporter, dynamo, opset, with_mask, only in EXPORTS:
            if only is not None and family not in only:
                continue
            for masked in (False, True) if with_mask else (False,):
                name = f"{family}.{exporter}{'.mask' if masked else ''}"
                path = os.path.join(outdir, name + ".onnx")
                try:
                    export_hf.export(build(family), path, dynamo, opset, masked)
                    compress(path)
                    models[name] = {"family": family, "exporter": exporter, "masked": masked,
                                    "exported": True}
                    print(f"{name}: exported, {os.path.getsize(path + '.gz')} bytes compressed")
                except Exception as error:
                    if os.path.exists(path):
                        os.remove(path)
                    reason = traceback.format_exception_only(error)[-1].strip()
                    models[name] = {"family": family, "exporter": exporter, "masked": masked,
                                    "exported": False, "reason": reason[:300]}
                    print(f"{name}: the exporter failed: {reason[:300]}")
        if family in PRETRAINED:
            pretrained(family, data, outdir, PRETRAINED[family])
        if family == LEGACY_MAPPED:
            legacy_map(family, outdir)
        print(f"{family}: loss {losses[0]:.6f} -> {losses[-1]:.6f}")
        # Written after each family, so that a family that fails loses only its own entries.
        with open(index_path, "w") as out:
            json.dump(index, out, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
