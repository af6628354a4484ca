# Writes the tiny GPT-2 / Llama ONNX fixtures that mt's importer and compiler tests load.
# Run with Debian's python3 (torch 1.13, onnx 1.12): make_fixtures.py OUTDIR
import io
import math
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

VOCAB, HIDDEN, LAYERS, SEQ, BATCH = 96, 32, 2, 16, 2
SEED = 0


def configure(vocab, hidden, layers, seq):
    """Sets the model size: the fixtures use the tiny defaults, the bundled example more."""
    global VOCAB, HIDDEN, LAYERS, SEQ
    VOCAB, HIDDEN, LAYERS, SEQ = vocab, hidden, layers, seq

# IR version that first shipped with each opset, so newer checkers accept the rewritten files.
IR_FOR_OPSET = {18: 8, 20: 9, 21: 10}


def perturb_norms(model):
    # Default norm params are ones/zeros; random ones make an importer that drops them fail numerically.
    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, RMSNorm)):
            nn.init.normal_(module.weight, 1.0, 0.1)
            if getattr(module, "bias", None) is not None:
                nn.init.normal_(module.bias, 0.0, 0.1)


class GptAttention(nn.Module):
    def __init__(self, n_head=4):
        super().__init__()
        self.n_head = n_head
        self.head_dim = HIDDEN // n_head
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.register_buffer("mask", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(HIDDEN, dim=2)
        q = q.view(b, t, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.n_head, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.n_head, self.head_dim).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        min_value = torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype)
        scores = torch.where(self.mask[:t, :t], scores, min_value)
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class GptBlock(nn.Module):
    def __init__(self, gelu_approximate):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.attn = GptAttention()
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.mlp = nn.Sequential(
            nn.Linear(HIDDEN, 4 * HIDDEN),
            nn.GELU(approximate=gelu_approximate),
            nn.Linear(4 * HIDDEN, HIDDEN),
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GptModel(nn.Module):
    def __init__(self, gelu_approximate="none"):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(SEQ, HIDDEN)
        self.blocks = nn.ModuleList(GptBlock(gelu_approximate) for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x


def rotate_half(x):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, n_head=4, n_kv_head=2):
        super().__init__()
        self.n_head = n_head
        self.n_kv_head = n_kv_head
        self.head_dim = HIDDEN // n_head
        self.q_proj = nn.Linear(HIDDEN, n_head * self.head_dim, bias=False)
        self.k_proj = nn.Linear(HIDDEN, n_kv_head * self.head_dim, bias=False)
        self.v_proj = nn.Linear(HIDDEN, n_kv_head * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_head * self.head_dim, HIDDEN, bias=False)

    def repeat_kv(self, x):
        b, hkv, t, d = x.shape
        n_rep = self.n_head // hkv
        return x[:, :, None].expand(b, hkv, n_rep, t, d).reshape(b, hkv * n_rep, t, d)

    def forward(self, x):
        b, t, _ = x.shape
        d = self.head_dim
        q = self.q_proj(x).view(b, t, self.n_head, d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv_head, d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_head, d).transpose(1, 2)

        inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        freqs = torch.outer(torch.arange(t, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin

        k, v = self.repeat_kv(k), self.repeat_kv(v)
        scores = q @ k.transpose(2, 3) * (1.0 / math.sqrt(d))
        scores = scores + torch.full((t, t), float("-inf")).triu(1)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        y = (probs @ v).transpose(1, 2).reshape(b, t, self.n_head * d)
        return self.o_proj(y)


class LlamaMlp(nn.Module):
    def __init__(self, ffn=64):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, ffn, bias=False)
        self.up_proj = nn.Linear(HIDDEN, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN)
        self.self_attn = LlamaAttention()
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.mlp = LlamaMlp()

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(LlamaBlock() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def build(model_cls, **kwargs):
    torch.manual_seed(SEED)
    model = model_cls(**kwargs)
    perturb_norms(model)
    return model.eval()


def export(model, opset, dynamic=True):
    torch.manual_seed(SEED)
    input_ids = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
    dynamic_axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # do_constant_folding=False keeps the tied wte a single initializer and leaves the
        # shape subgraphs in place for mt to fold itself.
        torch.onnx.export(
            model,
            (input_ids,),
            buf,
            input_names=["input_ids"],
            output_names=["logits"],
            opset_version=opset,
            do_constant_folding=False,
            dynamic_axes=dynamic_axes if dynamic else None,
        )
    return onnx.load_from_string(buf.getvalue())


# Reductions whose `axes` attribute became an input at opset 18 (ReduceSum already moved at 13).
AXES_BECAME_INPUT_AT_18 = {
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare",
}


def default_opset(model):
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def upgrade_opset(model, target):
    """Rewrite an opset-17 model to `target` in {18, 20, 21}.

    Only opset 18 changed the signature of ops torch emits (Reduce* axes, Split num_outputs);
    19-21 only widen types or add attributes with compatible defaults for these graphs.
    """
    assert default_opset(model) == 17 and target in (18, 20, 21)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    taken = {name for node in graph.node for name in node.output}
    taken |= {init.name for init in graph.initializer} | {i.name for i in graph.input}
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in AXES_BECAME_INPUT_AT_18:
            axes = next((a for a in node.attribute if a.name == "axes"), None)
            if axes is None:
                continue
            name = node.output[0] + "_axes"
            assert name not in taken
            taken.add(name)
            graph.initializer.append(numpy_helper.from_array(np.array(axes.ints, dtype=np.int64), name))
            node.attribute.remove(axes)
            node.input.append(name)
        elif node.op_type == "Split" and (len(node.input) < 2 or not node.input[1]):
            node.attribute.append(helper.make_attribute("num_outputs", len(node.output)))
    for opset in out.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = target
    out.ir_version = IR_FOR_OPSET[target]
    return out


def gelu_model():
    node = helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")
    graph = helper.make_graph(
        [node], "gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=IR_FOR_OPSET[20])


def gemm_model():
    rng = np.random.default_rng(SEED)
    weight = numpy_helper.from_array(rng.standard_normal((16, 8), dtype=np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(16, dtype=np.float32), "b")
    node = helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1)
    graph = helper.make_graph(
        [node], "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        initializer=[weight, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=IR_FOR_OPSET[18])


def save(model, outdir, filename, external=False):
    path = os.path.join(outdir, filename)
    if external:
        # A stale data file would otherwise be appended to rather than replaced.
        if os.path.exists(path + ".data"):
            os.remove(path + ".data")
        # save_model strips the tensors it externalizes from the proto it is given.
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        onnx.save_model(copy, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=filename + ".data", size_threshold=0)
    else:
        onnx.save_model(model, path)
    loaded = onnx.load(path)
    if default_opset(loaded) <= onnx.defs.onnx_opset_version():
        # The path form also resolves external data.
        onnx.checker.check_model(path)
        note = "checked"
    else:
        # An older onnx checks newer nodes against superseded schemas: 1.12 (opsets <= 17)
        # rejects ReduceMean-18's axes input and any IR version above 8.
        note = f"not checked: onnx {onnx.__version__} knows opsets <= {onnx.defs.onnx_opset_version()}"
    print(f"{path} ({note})")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixtures.py OUTDIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)

    gpt = build(GptModel)
    gpt_tanh = build(GptModel, gelu_approximate="tanh")
    llama = build(LlamaModel)
    gpt17 = export(gpt, 17)
    llama17 = export(llama, 17)

    save(export(gpt, 14), outdir, "gpt2_opset14.onnx")
    save(gpt17, outdir, "gpt2_opset17.onnx")
    save(export(gpt_tanh, 14), outdir, "gpt2_tanh_opset14.onnx")
    save(export(llama, 14), outdir, "llama_opset14.onnx")
    save(llama17, outdir, "llama_opset17.onnx")
    save(export(gpt, 14, dynamic=False), outdir, "gpt2_static_opset14.onnx")
    save(gpt17, outdir, "gpt2_external_opset17.onnx", external=True)
    save(upgrade_opset(gpt17, 18), outdir, "gpt2_opset18.onnx")
    save(upgrade_opset(llama17, 18), outdir, "llama_opset18.onnx")
    save(upgrade_opset(llama17, 20), outdir, "llama_opset20.onnx")
    save(upgrade_opset(gpt17, 21), outdir, "gpt2_opset21.onnx")
    save(gelu_model(), outdir, "gelu_opset20.onnx")
    save(gemm_model(), outdir, "gemm_opset18.onnx")


if __name__ == "__main__":
    main()
