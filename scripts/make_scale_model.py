# Writes a Llama-style ONNX graph of any size whose weights are external data in a file that
# does not exist: the compiler must plan a 100B+ model without reading a byte of it.
# Usage: make_scale_model.py OUT.onnx LAYERS HIDDEN HEADS KV_HEADS FFN VOCAB SEQ
#                            [causal|window=W] [first-ffn=F]
# With `causal`, attention is opset 23's Attention node (is_causal): no SEQ x SEQ mask is
# written, so long sequences fit in a model file. With `window=W`, the even layers attend
# through a sliding window of W keys (a boolean band kept by Where, as Gemma 2's local layers;
# the odd ones are global): two layer structures in one model. With `first-ffn=F`, the first
# layer's SwiGLU is F wide (a first dense layer unlike the rest, as DeepSeek's).
# Nodes are the primitive chains torch's exporter writes (RMSNorm, attention with an additive
# causal mask, SwiGLU), so the raising passes see what they see in real models.
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save_model


def main():
    out, layers, hidden, heads, kv, ffn, vocab, seq = sys.argv[1], *map(int, sys.argv[2:9])
    options = dict(a.split("=", 1) if "=" in a else (a, "") for a in sys.argv[9:])
    causal = "causal" in options
    window = int(options.get("window", 0))
    first_ffn = int(options.get("first-ffn", ffn))
    head = hidden // heads
    nodes, inits = [], []
    offset = [0]

    def weight(name, shape):
        # External data in a file that is never written: only its name, offset and length.
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)
        tensor.data_location = TensorProto.EXTERNAL
        length = int(np.prod(shape)) * 4
        for key, value in (("location", "absent.weights"), ("offset", str(offset[0])),
                           ("length", str(length))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        offset[0] += length
        inits.append(tensor)
        return name

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    two, eps = const("two", np.float32(2.0)), const("eps", np.float32(1e-5))
    one = const("one", np.float32(1.0))
    scale = const("scale", np.float32(1.0 / np.sqrt(head)))
    mask = None if causal else const("mask", np.triu(np.full((seq, seq), -np.inf, np.float32), 1))
    if window:
        i, j = np.indices((seq, seq))
        band = const("band", (j <= i) & (i - j < window))
        fill = const("fill", np.float32(-np.inf))
    q_shape = const("q_shape", np.array([0, 0, heads, head], np.int64))
    kv_shape = const("kv_shape", np.array([0, 0, kv, head], np.int64))
    merged = const("merged", np.array([0, 0, hidden], np.int64))
    expand = const("expand", np.array([1, 1, heads // kv, 1, 1], np.int64))
    grouped = const("grouped", np.array([0, heads, seq, head], np.int64))
    axis2 = const("axis2", np.array([2], np.int64))
    last = const("last", np.array([-1], np.int64))

    def rms_norm(x, w, tag):
        p = node("Pow", [x, two], tag + "/pow")
        # Opset 18 moved ReduceMean's axes from an attribute to an input.
        m = (node("ReduceMean", [p, last], tag + "/mean", keepdims=1) if causal else
             node("ReduceMean", [p], tag + "/mean", axes=[-1], keepdims=1))
        s = node("Sqrt", [node("Add", [m, eps], tag + "/add")], tag + "/sqrt")
        r = node("Div", [one, s], tag + "/inv")
        return node("Mul", [weight(w, [hidden]), node("Mul", [x, r], tag + "/scale")], tag + "/out")

    def linear(x, w, rows, cols, tag):
        t = node("Transpose", [weight(w, [rows, cols])], tag + "/t", perm=[1, 0])
        return node("MatMul", [x, t], tag)

    def heads_of(x, shape, tag):
        return node("Transpose", [node("Reshape", [x, shape], tag + "/r")], tag, perm=[0, 2, 1, 3])

    def repeat(x, tag):
        u = node("Unsqueeze", [x, axis2], tag + "/u")
        return node("Reshape", [node("Expand", [u, expand], tag + "/e"), grouped], tag)

    x = node("Gather", [weight("embed", [vocab, hidden]), "input_ids"], "embed/out")
    for i in range(layers):
        t = f"layers.{i}"
        n = rms_norm(x, t + ".norm1", t + "/norm1")
        q = heads_of(linear(n, t + ".q", hidden, hidden, t + "/q"), q_shape, t + "/qh")
        k = heads_of(linear(n, t + ".k", kv * head, hidden, t + "/k"), kv_shape, t + "/kh")
        v = heads_of(linear(n, t + ".v", kv * head, hidden, t + "/v"), kv_shape, t + "/vh")
        if causal:
            a = node("Attention", [q, k, v], t + "/attention", is_causal=1,
                     scale=float(1.0 / np.sqrt(head)))
        else:
            kt = node("Transpose", [repeat(k, t + "/kr")], t + "/kt", perm=[0, 1, 3, 2])
            s = node("Mul", [node("MatMul", [q, kt], t + "/qk"), scale], t + "/scaled")
            masked = (node("Where", [band, s, fill], t + "/masked") if window and i % 2 == 0
                      else node("Add", [s, mask], t + "/masked"))
            p = node("Softmax", [masked], t + "/p", axis=-1)
            a = node("MatMul", [p, repeat(v, t + "/vr")], t + "/av")
        a = node("Reshape", [node("Transpose", [a], t + "/at", perm=[0, 2, 1, 3]), merged], t + "/a")
        x = node("Add", [x, linear(a, t + ".o", hidden, hidden, t + "/o")], t + "/res1")
        n = rms_norm(x, t + ".norm2", t + "/norm2")
        width = first_ffn if i == 0 else ffn
        g = linear(n, t + ".gate", width, hidden, t + "/gate")
        g = node("Mul", [g, node("Sigmoid", [g], t + "/sig")], t + "/silu")
        u = linear(n, t + ".up", width, hidden, t + "/up")
        d = linear(node("Mul", [g, u], t + "/glu"), t + ".down", hidden, width, t + "/down")
        x = node("Add", [x, d], t + "/res2")
    logits = linear(rms_norm(x, "norm", "final"), "lm_head", vocab, hidden, "logits")
    graph = helper.make_graph(
        nodes, "scale",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, ["batch", seq, vocab])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23 if causal else 17)])
    model.ir_version = 11 if causal else 8
    save_model(model, out)
    print(f"{out}: {layers} layers, {offset[0] // 4} parameters in absent.weights")


if __name__ == "__main__":
    main()
