"""Writes a small binary ONNX model for one of mt's frontend error tests.

Usage: make_model.py CASE OUT.onnx. The ONNX text parser of onnx 1.12 cannot name nodes,
so cases whose errors must name the node are built here with onnx.helper.
"""
import sys

from onnx import TensorProto, helper


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def i64(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def ints(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def scalar(name, value):
    return helper.make_tensor(name, TensorProto.INT64, [], [value])


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def conv():
    return model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")],
                 [f32("x", [1, 1, 4, 4]), f32("w", [1, 1, 3, 3])], [f32("y", [1, 1, 2, 2])])


def custom_domain():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="custom_relu", domain="com.example")],
              [f32("x", [2])], [f32("y", [2])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    return m


def missing_input():
    return model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add_missing")],
                 [f32("x", [2])], [f32("y", [2])])


def cycle():
    # a reads b and b reads a; c, after them, is not on the cycle.
    return model([helper.make_node("Add", ["x", "b"], ["a"], name="node_a"),
                  helper.make_node("Relu", ["a"], ["b"], name="node_b"),
                  helper.make_node("Neg", ["b"], ["y"], name="node_c")],
                 [f32("x", [2])], [f32("y", [2])])


def cycle_downstream_first():
    # The node listed first only reads the cycle; it is not on it.
    return model([helper.make_node("Neg", ["b"], ["y"], name="after_cycle"),
                  helper.make_node("Add", ["x", "b"], ["a"], name="node_a"),
                  helper.make_node("Relu", ["a"], ["b"], name="node_b")],
                 [f32("x", [2])], [f32("y", [2])])


def range_runtime():
    return model([helper.make_node("Range", ["n0", "n", "n1"], ["y"], name="positions")],
                 [i64("n", [])], [i64("y", [None])],
                 [scalar("n0", 0), scalar("n1", 1)])


def trilu_runtime():
    return model([helper.make_node("Trilu", ["x"], ["y"], name="causal", upper=0)],
                 [f32("x", [4, 4])], [f32("y", [4, 4])])


def reshape_runtime():
    return model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="view")],
                 [f32("x", [2, 4]), i64("shape", [2])], [f32("y", [4, 2])])


def reduce_runtime_axes():
    return model([helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean")],
                 [f32("x", [2, 4]), i64("axes", [1])], [f32("y", [2, 1])], opset=18)


def reduce_axes_attribute():
    return model([helper.make_node("ReduceMean", ["x"], ["y"], name="mean", axes=[-1])],
                 [f32("x", [2, 4])], [f32("y", [2, 1])], opset=18)


def layernorm_axis():
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [3, 4], [1.0] * 12)
    return model([helper.make_node("LayerNormalization", ["x", "scale"], ["y"], name="ln",
                                   axis=1)],
                 [f32("x", [2, 3, 4])], [f32("y", [2, 3, 4])], [scale])


def max_runtime():
    return model([helper.make_node("Max", ["x", "x"], ["y"], name="clamp")],
                 [f32("x", [2])], [f32("y", [2])])


def fp16_scalar():
    # A one-element float16 initializer (an epsilon) is not a parameter, so mt folds it.
    eps = helper.make_tensor("eps", TensorProto.FLOAT16, [], [0.5])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])
    return model([helper.make_node("Add", ["x", "eps"], ["y"], name="add_eps")], [x], [y], [eps])


def with_dims(tensor, dims):
    """`tensor` claiming `dims`, whatever data it holds."""
    del tensor.dims[:]
    tensor.dims.extend(dims)
    return tensor


def negative_dims():
    w = with_dims(helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4]), [-1, 4])
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add_w")],
                 [f32("x", [2, 2])], [f32("y", [2, 2])], [w])


def countless_dims():
    w = with_dims(helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4]),
                  [1 << 40, 1 << 40])
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add_w")],
                 [f32("x", [2, 2])], [f32("y", [2, 2])], [w])


def short_constant():
    # A Constant claiming 2^31 x 4 int64s, holding 4: its data is refused before any memory
    # is taken for the dimensions it claims.
    value = with_dims(ints("v", [1, 2, 3, 4]), [1 << 31, 4])
    return model([helper.make_node("Constant", [], ["c"], name="big_constant", value=value),
                  helper.make_node("Reshape", ["x", "c"], ["y"], name="reshape")],
                 [f32("x", [2, 2])], [f32("y", [4])])


def reduce_no_input():
    return model([helper.make_node("ReduceSum", [], ["y"], name="sum")],
                 [f32("x", [2, 4])], [f32("y", [])])


def where_two_inputs():
    return model([helper.make_node("Where", ["c", "x"], ["y"], name="pick")],
                 [helper.make_tensor_value_info("c", TensorProto.BOOL, [2]), f32("x", [2])],
                 [f32("y", [2])])


def tied_empty_data():
    # Two transposed-shape initializers, one holding its data nowhere (no raw_data, no
    # float_data): the search for tied copies must not read it.
    a = helper.make_tensor("a", TensorProto.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6])
    b = TensorProto(name="b", data_type=TensorProto.FLOAT, dims=[3, 2])
    return model([helper.make_node("MatMul", ["x", "a"], ["h"], name="mm"),
                  helper.make_node("MatMul", ["h", "b"], ["y"], name="mm2")],
                 [f32("x", [1, 2])], [f32("y", [1, 2])], [a, b])


CASES = {name: fn for name, fn in globals().items()
         if callable(fn) and fn.__module__ == __name__ and name not in
         ("f32", "i64", "ints", "scalar", "model", "with_dims")}

if __name__ == "__main__":
    case, out = sys.argv[1], sys.argv[2]
    with open(out, "wb") as f:
        f.write(CASES[case]().SerializeToString())
