// Translation of each supported ONNX op: folded on the host when all inputs are known
// (shape subgraphs, masks, position tables), otherwise built from mt ops.
#include "frontend/ConstantFolder.h"
#include "frontend/GraphImporter.h"
#include "ir/MtOps.h"
#include "plan/DeviceLayout.h"

#include "llvm/ADT/StringSet.h"

#include <cmath>

using namespace mlir;

namespace mt {

namespace {

class NodeImporter {
public:
  NodeImporter(GraphImporter &graph, const onnx::NodeProto &node, StringRef name)
      : graph(graph), node(node), name(name), loc(graph.locationOf(name)), b(graph.builder) {}

  LogicalResult run();

private:
  using Handler = LogicalResult (NodeImporter::*)();
  static const llvm::StringMap<Handler> &handlers();

  // Errors, always naming the node.
  InFlightDiagnostic error() { return graph.nodeError(node, name); }

  // Inputs.
  bool has(int i) { return i < node.input_size() && !node.input(i).empty(); }
  ImportedValue &input(int i) { return graph.values[node.input(i)]; }
  bool allKnown() {
    for (int i = 0; i < node.input_size(); ++i)
      if (has(i) && !input(i).known)
        return false;
    return true;
  }
  Shape shape(int i) { return graph.shapeOf(input(i)); }
  int64_t rank(int i) { return shape(i).size(); }
  Value operand(int i) { return graph.materialize(input(i), loc); }
  /// An mt.constant holding `known`.
  Value constant(HostTensor known) {
    ImportedValue value;
    value.known = std::move(known);
    return graph.materialize(value, loc);
  }
  /// A scalar constant of `dataType`.
  Value scalar(int32_t dataType, double value) {
    HostTensor t = HostTensor::zeros(dataType, {});
    t.set(0, value);
    return constant(std::move(t));
  }
  FailureOr<HostTensor> known(int i, StringRef what) {
    if (!has(i)) {
      error() << "input " << i << " (" << what << ") is missing";
      return failure();
    }
    if (!input(i).known) {
      error() << "input " << i << " (" << what << ") must be known at compile time";
      return failure();
    }
    return *input(i).known;
  }
  FailureOr<Shape> knownInts(int i, StringRef what) {
    FailureOr<HostTensor> t = known(i, what);
    if (failed(t))
      return failure();
    Shape ints;
    for (int64_t k = 0; k < t->size(); ++k)
      ints.push_back(t->integer(k));
    return ints;
  }

  // Attributes.
  const onnx::AttributeProto *attr(StringRef name) {
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t attrInt(StringRef name, int64_t fallback) {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->i() : fallback;
  }
  double attrFloat(StringRef name, double fallback) {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->f() : fallback;
  }
  std::string attrString(StringRef name, StringRef fallback) {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->s() : fallback.str();
  }
  std::optional<Shape> attrInts(StringRef name) {
    const onnx::AttributeProto *a = attr(name);
    if (!a)
      return std::nullopt;
    return Shape(a->ints().begin(), a->ints().end());
  }
  /// Axes from opset-dependent places: an attribute before `inputSince`, input 1 from it on.
  FailureOr<std::optional<Shape>> axesOperand(int64_t inputSince) {
    if (graph.opset < inputSince)
      return attrInts("axes");
    // Read as absent, the attribute would reduce every axis: a silently different model.
    if (attr("axes")) {
      error() << "has an 'axes' attribute, which opset " << inputSince
              << " replaced by input 1 (this model imports opset " << graph.opset << ")";
      return failure();
    }
    if (!has(1))
      return std::optional<Shape>();
    FailureOr<Shape> axes = knownInts(1, "axes");
    if (failed(axes))
      return failure();
    return std::optional<Shape>(*axes);
  }
  FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
    if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
      error() << "axis " << axis << " is out of range for rank " << rank;
      return failure();
    }
    return axis < 0 ? axis + rank : axis;
  }

  // Outputs.
  LogicalResult produce(int i, HostTensor known) {
    ImportedValue out;
    out.known = std::move(known);
    graph.values[node.output(i)] = std::move(out);
    return success();
  }
  LogicalResult produce(int i, Value value) {
    ImportedValue out;
    out.value = value;
    graph.values[node.output(i)] = out;
    return success();
  }
  LogicalResult alias(int i, int from) {
    graph.values[node.output(i)] = input(from);
    return success();
  }
  RankedTensorType tensorType(llvm::ArrayRef<int64_t> shape, Value like) {
    return RankedTensorType::get(shape, getElementTypeOrSelf(like.getType()));
  }
  /// Fails unless every input is known: for ops that mt only evaluates at compile time.
  LogicalResult requireKnown() {
    for (int i = 0; i < node.input_size(); ++i)
      if (has(i) && !input(i).known)
        return error() << "is only supported when its inputs are known at compile time; input "
                       << i << " ('" << node.input(i) << "') is computed at run time";
    return success();
  }
  /// Fails unless a normalization's `axis` attribute (default -1) names the last axis.
  LogicalResult requireLastAxisNorm() {
    FailureOr<int64_t> axis = normalizeAxis(attrInt("axis", -1), rank(0));
    if (failed(axis))
      return failure();
    if (*axis != rank(0) - 1)
      return error() << "normalizes from axis " << *axis
                     << "; mt supports normalizing the last axis only";
    return success();
  }
  LogicalResult requireFloat(int i) {
    if (!HostTensor::isFloatType(graph.dataTypeOf(input(i))))
      return error() << "input " << i << " must be a floating-point tensor";
    return success();
  }
  /// An mt op for a view (reshape, expand) of input 0, or its folded value.
  template <typename OpTy>
  LogicalResult view(llvm::ArrayRef<int64_t> shape) {
    if (input(0).known) {
      HostTensor t = *input(0).known;
      if (std::is_same_v<OpTy, ExpandOp>)
        t = expandTensor(t, shape);
      t.shape = Shape(shape);
      return produce(0, t);
    }
    if (llvm::ArrayRef<int64_t>(shape) == llvm::ArrayRef<int64_t>(this->shape(0)))
      return alias(0, 0);
    Value in = operand(0);
    return produce(0, b.create<OpTy>(loc, tensorType(shape, in), in).getResult());
  }
  FailureOr<Value> slice(Value in, llvm::ArrayRef<int64_t> starts,
                         llvm::ArrayRef<int64_t> limits, llvm::ArrayRef<int64_t> steps) {
    auto emitErr = [&] { return error(); };
    FailureOr<Shape> shape =
        sliceShape(llvm::cast<RankedTensorType>(in.getType()).getShape(), starts, limits, steps,
                   emitErr);
    if (failed(shape))
      return failure();
    return b.create<SliceOp>(loc, tensorType(*shape, in), in, b.getDenseI64ArrayAttr(starts),
                             b.getDenseI64ArrayAttr(limits), b.getDenseI64ArrayAttr(steps))
        .getResult();
  }

  // Op families.
  LogicalResult binary();
  LogicalResult logic();
  LogicalResult unary();
  LogicalResult matMul();
  LogicalResult gemm();
  LogicalResult softmax();
  LogicalResult reduce();
  LogicalResult layerNormalization();
  LogicalResult gelu();
  LogicalResult reshape();
  LogicalResult flatten();
  LogicalResult squeeze();
  LogicalResult unsqueeze();
  LogicalResult transpose();
  LogicalResult sliceNode();
  LogicalResult concat();
  LogicalResult split();
  LogicalResult expand();
  LogicalResult tile();
  LogicalResult where();
  LogicalResult cast();
  LogicalResult identity();
  LogicalResult gather();
  LogicalResult shapeNode();
  LogicalResult constant();
  LogicalResult constantOfShape();
  LogicalResult range();
  LogicalResult trilu();
  LogicalResult gatherNd();
  /// GatherND of run-time data as a reshape and expand, where its known indices read the
  /// data that way; nullopt when they do not.
  std::optional<LogicalResult> gatherNdView(const HostTensor &indices);
  LogicalResult cumSum();
  // Opset 23's transformer ops.
  LogicalResult rmsNormalization();
  LogicalResult rotaryEmbedding();
  LogicalResult attention();
  LogicalResult einsum();

  GraphImporter &graph;
  const onnx::NodeProto &node;
  StringRef name;
  Location loc;
  OpBuilder &b;
};

const llvm::StringMap<NodeImporter::Handler> &NodeImporter::handlers() {
  static const llvm::StringMap<Handler> table = [] {
    llvm::StringMap<Handler> t;
    for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less",
                           "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or"})
      t[op] = &NodeImporter::binary;
    for (const char *op : {"Neg", "Sqrt", "Reciprocal", "Exp", "Log", "Tanh", "Erf", "Sigmoid",
                           "Relu", "Cos", "Sin", "Abs", "Floor", "Ceil", "Not", "IsNaN", "IsInf"})
      t[op] = &NodeImporter::unary;
    for (const char *op : {"ReduceMean", "ReduceSum", "ReduceMax"})
      t[op] = &NodeImporter::reduce;
    t["MatMul"] = &NodeImporter::matMul;
    t["Gemm"] = &NodeImporter::gemm;
    t["Softmax"] = &NodeImporter::softmax;
    t["LayerNormalization"] = &NodeImporter::layerNormalization;
    t["Gelu"] = &NodeImporter::gelu;
    t["Reshape"] = &NodeImporter::reshape;
    t["Flatten"] = &NodeImporter::flatten;
    t["Squeeze"] = &NodeImporter::squeeze;
    t["Unsqueeze"] = &NodeImporter::unsqueeze;
    t["Transpose"] = &NodeImporter::transpose;
    t["Slice"] = &NodeImporter::sliceNode;
    t["Concat"] = &NodeImporter::concat;
    t["Split"] = &NodeImporter::split;
    t["Expand"] = &NodeImporter::expand;
    t["Tile"] = &NodeImporter::tile;
    t["Where"] = &NodeImporter::where;
    t["Cast"] = &NodeImporter::cast;
    t["Identity"] = &NodeImporter::identity;
    t["Dropout"] = &NodeImporter::identity;
    t["Gather"] = &NodeImporter::gather;
    t["Shape"] = &NodeImporter::shapeNode;
    t["Constant"] = &NodeImporter::constant;
    t["ConstantOfShape"] = &NodeImporter::constantOfShape;
    t["Range"] = &NodeImporter::range;
    t["Trilu"] = &NodeImporter::trilu;
    t["GatherND"] = &NodeImporter::gatherNd;
    t["CumSum"] = &NodeImporter::cumSum;
    t["RMSNormalization"] = &NodeImporter::rmsNormalization;
    t["RotaryEmbedding"] = &NodeImporter::rotaryEmbedding;
    t["Attention"] = &NodeImporter::attention;
    t["Einsum"] = &NodeImporter::einsum;
    return t;
  }();
  return table;
}

LogicalResult NodeImporter::run() {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return error() << "op domain '" << node.domain() << "' is not supported";
  auto it = handlers().find(node.op_type());
  if (it == handlers().end())
    return error() << "unsupported op";
  // The inputs the ONNX spec requires of each op, at every opset mt reads (the handlers check
  // the optional ones): a model without one is refused here, before any handler reads it.
  static const llvm::StringMap<int> required = [] {
    llvm::StringMap<int> r;
    for (const auto &[op, handler] : handlers())
      r[op] = handler == &NodeImporter::binary ? 2 : 1;
    for (const char *op : {"MatMul", "Gemm", "LayerNormalization", "Reshape", "Expand", "Tile",
                           "Gather", "GatherND", "CumSum", "RMSNormalization"})
      r[op] = 2;
    for (const char *op : {"Where", "Range", "RotaryEmbedding", "Attention"})
      r[op] = 3;
    r["Constant"] = 0;
    return r;
  }();
  int needs = required.lookup(node.op_type());
  for (int i = 0; i < needs; ++i)
    if (!has(i))
      return error() << "needs " << needs << " input" << (needs == 1 ? "" : "s") << ", input " << i
                     << " is missing";
  // Every op mt imports writes its first output (Split each of its outputs).
  if (node.output_size() == 0 || node.output(0).empty())
    return error() << "has no output";
  for (int i = 0; i < node.input_size(); ++i)
    if (has(i) && !graph.values.count(node.input(i)))
      return error() << "input '" << node.input(i) << "' is not defined";
  return (this->*(it->second))();
}

LogicalResult NodeImporter::binary() {
  StringRef op = node.op_type();
  if (node.input_size() != 2 || !has(0) || !has(1))
    return error() << "needs two inputs";
  if (allKnown()) {
    std::optional<HostTensor> folded = foldBinary(op, *input(0).known, *input(1).known);
    if (!folded)
      return error() << "shapes " << formatShape(shape(0)) << " and " << formatShape(shape(1))
                     << " do not broadcast";
    return produce(0, *folded);
  }
  if (llvm::is_contained({"And", "Or"}, op))
    return logic();
  if (!llvm::is_contained({"Add", "Sub", "Mul", "Div", "Pow"}, op))
    return requireKnown();
  // A known exponent or scalar of another type (Pow(x, 2) with an int 2) takes x's type.
  for (int i : {0, 1}) {
    int other = 1 - i;
    if (input(i).known && graph.dataTypeOf(input(i)) != graph.dataTypeOf(input(other))) {
      if (op != "Pow")
        return error() << "inputs have different element types";
      input(i).known = input(i).known->castTo(graph.dataTypeOf(input(other)));
      input(i).value = nullptr;
    }
  }
  Value lhs = operand(0), rhs = operand(1);
  if (getElementTypeOrSelf(lhs.getType()) != getElementTypeOrSelf(rhs.getType()))
    return error() << "inputs have different element types: " << lhs.getType() << " and "
                   << rhs.getType();
  FailureOr<Shape> out = broadcastShape(shape(0), shape(1), [&] { return error(); });
  if (failed(out))
    return failure();
  Type type = tensorType(*out, lhs);
  Value result = llvm::StringSwitch<std::function<Value()>>(op)
                     .Case("Add", [&] { return b.create<AddOp>(loc, type, lhs, rhs); })
                     .Case("Sub", [&] { return b.create<SubOp>(loc, type, lhs, rhs); })
                     .Case("Mul", [&] { return b.create<MulOp>(loc, type, lhs, rhs); })
                     .Case("Div", [&] { return b.create<DivOp>(loc, type, lhs, rhs); })
                     .Default([&] { return b.create<PowOp>(loc, type, lhs, rhs); })();
  return produce(0, result);
}

/// And, Or and Not of run-time booleans (masks built from an attention_mask input) as
/// selects: x and y = where(x, y, false), x or y = where(x, true, y), not x = where(x, false,
/// true).
LogicalResult NodeImporter::logic() {
  StringRef op = node.op_type();
  for (int i = 0; i < node.input_size(); ++i)
    if (graph.dataTypeOf(input(i)) != onnx::TensorProto::BOOL)
      return error() << "input " << i << " must be a boolean tensor";
  auto boolean = [&](bool value) { return scalar(onnx::TensorProto::BOOL, value); };
  Value x = operand(0);
  Value onTrue = op == "Or" ? boolean(true) : op == "Not" ? boolean(false) : operand(1);
  Value onFalse = op == "And" ? boolean(false) : op == "Not" ? boolean(true) : operand(1);
  Shape out = shape(0);
  if (op != "Not") {
    FailureOr<Shape> both = broadcastShape(shape(0), shape(1), [&] { return error(); });
    if (failed(both))
      return failure();
    out = *both;
  }
  return produce(0, b.create<WhereOp>(loc, tensorType(out, x), x, onTrue, onFalse).getResult());
}

LogicalResult NodeImporter::unary() {
  StringRef op = node.op_type();
  if (!has(0))
    return error() << "needs an input";
  if (op == "Not" && !input(0).known)
    return logic();
  bool detectNegative = attrInt("detect_negative", 1), detectPositive = attrInt("detect_positive", 1);
  if (input(0).known) {
    HostTensor folded = *foldUnary(op, *input(0).known);
    if (op == "IsInf")
      for (int64_t i = 0; i < folded.size(); ++i)
        if (folded.integer(i) && !(input(0).known->real(i) < 0 ? detectNegative : detectPositive))
          folded.setInteger(i, 0);
    return produce(0, folded);
  }
  if (!llvm::is_contained({"Neg", "Sqrt", "Reciprocal", "Exp", "Log", "Tanh", "Erf", "Sigmoid",
                           "Relu", "Cos", "Sin", "IsNaN", "IsInf"},
                          op))
    return requireKnown();
  if (failed(requireFloat(0)))
    return failure();
  Value in = operand(0);
  if (op == "IsNaN" || op == "IsInf") {
    auto type = RankedTensorType::get(shape(0), b.getI1Type());
    if (op == "IsNaN")
      return produce(0, b.create<IsNanOp>(loc, type, in).getResult());
    return produce(0, b.create<IsInfOp>(loc, type, in, !detectNegative, !detectPositive)
                          .getResult());
  }
  Value result = llvm::StringSwitch<std::function<Value()>>(op)
                     .Case("Neg", [&] { return b.create<NegOp>(loc, in); })
                     .Case("Sqrt", [&] { return b.create<SqrtOp>(loc, in); })
                     .Case("Reciprocal", [&] { return b.create<ReciprocalOp>(loc, in); })
                     .Case("Exp", [&] { return b.create<ExpOp>(loc, in); })
                     .Case("Log", [&] { return b.create<LogOp>(loc, in); })
                     .Case("Tanh", [&] { return b.create<TanhOp>(loc, in); })
                     .Case("Erf", [&] { return b.create<ErfOp>(loc, in); })
                     .Case("Sigmoid", [&] { return b.create<SigmoidOp>(loc, in); })
                     .Case("Relu", [&] { return b.create<ReluOp>(loc, in); })
                     .Case("Cos", [&] { return b.create<CosOp>(loc, in); })
                     .Default([&] { return b.create<SinOp>(loc, in); })();
  return produce(0, result);
}

LogicalResult NodeImporter::matMul() {
  if (!has(0) || !has(1))
    return error() << "needs two inputs";
  if (failed(requireFloat(0)) || failed(requireFloat(1)))
    return failure();
  Value lhs = operand(0), rhs = operand(1);
  Shape lhsShape = shape(0), rhsShape = shape(1);
  // ONNX (numpy) promotes vectors to matrices and drops the added axis afterwards.
  bool lhsVector = lhsShape.size() == 1, rhsVector = rhsShape.size() == 1;
  if (lhsVector) {
    lhsShape.insert(lhsShape.begin(), 1);
    lhs = b.create<ReshapeOp>(loc, tensorType(lhsShape, lhs), lhs);
  }
  if (rhsVector) {
    rhsShape.push_back(1);
    rhs = b.create<ReshapeOp>(loc, tensorType(rhsShape, rhs), rhs);
  }
  FailureOr<Shape> out = matmulShape(lhsShape, rhsShape, false, false, [&] { return error(); });
  if (failed(out))
    return failure();
  Value result = b.create<MatmulOp>(loc, tensorType(*out, lhs), lhs, rhs, Value(), false, false);
  Shape finalShape = *out;
  if (rhsVector)
    finalShape.pop_back();
  if (lhsVector)
    finalShape.erase(finalShape.end() - (rhsVector ? 1 : 2));
  if (lhsVector || rhsVector)
    result = b.create<ReshapeOp>(loc, tensorType(finalShape, result), result);
  return produce(0, result);
}

LogicalResult NodeImporter::gemm() {
  if (!has(0) || !has(1))
    return error() << "needs inputs A and B";
  if (rank(0) != 2 || rank(1) != 2)
    return error() << "A and B must be matrices, got " << formatShape(shape(0)) << " and "
                   << formatShape(shape(1));
  bool transA = attrInt("transA", 0), transB = attrInt("transB", 0);
  double alpha = attrFloat("alpha", 1.0), beta = attrFloat("beta", 1.0);
  Value a = operand(0), bMat = operand(1);
  FailureOr<Shape> out = matmulShape(shape(0), shape(1), transA, transB, [&] { return error(); });
  if (failed(out))
    return failure();
  Type type = tensorType(*out, a);
  Value result = b.create<MatmulOp>(loc, type, a, bMat, Value(), transA, transB);
  if (alpha != 1.0)
    result = b.create<MulOp>(loc, type, result, scalar(graph.dataTypeOf(input(0)), alpha));
  if (has(2)) {
    if (!broadcastsTo(shape(2), *out))
      return error() << "C " << formatShape(shape(2)) << " does not broadcast to "
                     << formatShape(*out);
    Value c = operand(2);
    if (beta != 1.0)
      c = b.create<MulOp>(loc, c.getType(), c, scalar(graph.dataTypeOf(input(0)), beta));
    result = b.create<AddOp>(loc, type, result, c);
  }
  return produce(0, result);
}

LogicalResult NodeImporter::softmax() {
  if (failed(requireFloat(0)))
    return failure();
  FailureOr<int64_t> axis = normalizeAxis(attrInt("axis", -1), rank(0));
  if (failed(axis))
    return failure();
  Value in = operand(0);
  return produce(0, b.create<SoftmaxOp>(loc, in, *axis).getResult());
}

LogicalResult NodeImporter::reduce() {
  StringRef op = node.op_type();
  // ReduceSum took axes as an input from opset 13, the others from 18.
  FailureOr<std::optional<Shape>> axes = axesOperand(op == "ReduceSum" ? 13 : 18);
  if (failed(axes) || failed(requireFloat(0)))
    return failure();
  bool keepDims = attrInt("keepdims", 1);
  Shape normalized;
  if (!*axes || (*axes)->empty()) {
    if (attrInt("noop_with_empty_axes", 0))
      return alias(0, 0);
    for (int64_t d = 0; d < rank(0); ++d)
      normalized.push_back(d);
  } else {
    for (int64_t a : **axes) {
      FailureOr<int64_t> axis = normalizeAxis(a, rank(0));
      if (failed(axis))
        return failure();
      normalized.push_back(*axis);
    }
    llvm::sort(normalized);
  }
  FailureOr<Shape> out = reduceShape(shape(0), normalized, keepDims, [&] { return error(); });
  if (failed(out))
    return failure();
  Value in = operand(0);
  Type type = tensorType(*out, in);
  auto axesAttr = b.getDenseI64ArrayAttr(normalized);
  if (op == "ReduceMean")
    return produce(0, b.create<ReduceMeanOp>(loc, type, in, axesAttr, keepDims).getResult());
  if (op == "ReduceSum")
    return produce(0, b.create<ReduceSumOp>(loc, type, in, axesAttr, keepDims).getResult());
  return produce(0, b.create<ReduceMaxOp>(loc, type, in, axesAttr, keepDims).getResult());
}

LogicalResult NodeImporter::layerNormalization() {
  if (!has(0) || !has(1))
    return error() << "needs X and Scale";
  if (failed(requireLastAxisNorm()))
    return failure();
  for (int i = 1; i < node.output_size(); ++i)
    if (!node.output(i).empty())
      return error() << "output " << i << " (Mean/InvStdDev) is not supported";
  Value x = operand(0), scale = operand(1);
  Value bias = has(2) ? operand(2) : Value();
  if (shape(1) != Shape{shape(0).back()} || (bias && shape(2) != Shape{shape(0).back()}))
    return error() << "Scale and B must be [" << shape(0).back() << "]";
  return produce(0, b.create<LayerNormOp>(loc, x.getType(), x, scale, bias,
                                          b.getF64FloatAttr(attrFloat("epsilon", 1e-5)))
                        .getResult());
}

LogicalResult NodeImporter::rmsNormalization() {
  if (!has(0) || !has(1))
    return error() << "needs X and scale";
  if (failed(requireFloat(0)) || failed(requireLastAxisNorm()))
    return failure();
  if (shape(1) != Shape{shape(0).back()})
    return error() << "scale must be [" << shape(0).back() << "], got " << formatShape(shape(1));
  Value x = operand(0), scale = operand(1);
  return produce(0, b.create<RmsNormOp>(loc, x.getType(), x, scale,
                                        b.getF64FloatAttr(attrFloat("epsilon", 1e-5)))
                        .getResult());
}

LogicalResult NodeImporter::rotaryEmbedding() {
  if (!has(0) || !has(1) || !has(2))
    return error() << "needs X, cos_cache and sin_cache";
  if (attrInt("interleaved", 0))
    return error() << "interleaved rotation is not supported; mt rotates halves";
  if (failed(requireFloat(0)))
    return failure();
  if (rank(0) != 4)
    return error() << "X must be [batch, heads, sequence, head size], got "
                   << formatShape(shape(0));
  FailureOr<HostTensor> cos = known(1, "cos_cache"), sin = known(2, "sin_cache");
  if (failed(cos) || failed(sin))
    return failure();
  Shape x = shape(0);
  int64_t batch = x[0], sequence = x[2], headSize = x[3];
  int64_t rotated = attrInt("rotary_embedding_dim", 0);
  rotated = rotated ? rotated : headSize;
  if (rotated % 2 || rotated > headSize)
    return error() << "rotary_embedding_dim " << rotated << " does not fit head size "
                   << headSize;
  // The caches are [batch, sequence, rotated / 2], or [positions, rotated / 2] indexed by
  // position_ids [batch, sequence].
  auto table = [&](HostTensor cache) -> FailureOr<HostTensor> {
    if (has(3)) {
      FailureOr<HostTensor> positions = known(3, "position_ids");
      if (failed(positions))
        return failure();
      if (cache.shape.size() != 2 || positions->shape != Shape{batch, sequence})
        return error() << "with position_ids " << formatShape(positions->shape)
                       << " the caches must be [positions, " << rotated / 2 << "]";
      for (int64_t i = 0; i < positions->size(); ++i)
        if (positions->integer(i) < 0 || positions->integer(i) >= cache.shape[0])
          return error() << "position " << positions->integer(i) << " is outside the caches";
      cache = gatherTensor(cache, *positions, 0);
    }
    if (cache.shape != Shape{batch, sequence, rotated / 2} &&
        cache.shape != Shape{1, sequence, rotated / 2})
      return error() << "the caches must be [" << batch << ", " << sequence << ", "
                     << rotated / 2 << "], got " << formatShape(cache.shape);
    // mt.rope multiplies both halves by the same table: [B, 1, S, rotated].
    HostTensor full = concatTensors({cache, cache}, 2);
    full.shape = Shape{cache.shape[0], 1, sequence, rotated};
    return full;
  };
  FailureOr<HostTensor> cosTable = table(*cos), sinTable = table(*sin);
  if (failed(cosTable) || failed(sinTable))
    return failure();
  Value cosValue = constant(cosTable->castTo(graph.dataTypeOf(input(0))));
  Value sinValue = constant(sinTable->castTo(graph.dataTypeOf(input(0))));
  Value in = operand(0);
  if (rotated == headSize)
    return produce(0, b.create<RopeOp>(loc, in.getType(), in, cosValue, sinValue).getResult());
  // Only the first `rotated` channels turn; the rest pass through.
  Shape starts{0, 0, 0, 0}, steps{1, 1, 1, 1}, middle = x, end = x;
  middle[3] = rotated;
  FailureOr<Value> turned = slice(in, starts, middle, steps);
  starts[3] = rotated;
  FailureOr<Value> kept = slice(in, starts, end, steps);
  if (failed(turned) || failed(kept))
    return failure();
  Value roped = b.create<RopeOp>(loc, turned->getType(), *turned, cosValue, sinValue);
  return produce(0, b.create<ConcatOp>(loc, in.getType(), ValueRange{roped, *kept}, 3)
                        .getResult());
}

LogicalResult NodeImporter::attention() {
  if (!has(0) || !has(1) || !has(2))
    return error() << "needs Q, K and V";
  for (int i = 4; i < node.input_size(); ++i)
    if (has(i))
      return error() << "input " << i << " (a key/value cache or sequence lengths) is not "
                        "supported: mt trains whole sequences";
  for (int i = 1; i < node.output_size(); ++i)
    if (!node.output(i).empty())
      return error() << "output " << i << " (present key/value, scores) is not supported";
  double softcap = attrFloat("softcap", 0.0);
  if (softcap < 0.0 || std::isnan(softcap))
    return error() << "softcap must be 0 (none) or positive, got " << softcap;
  if (rank(0) != 4 || rank(1) != 4 || rank(2) != 4)
    return error() << "Q, K and V must be [batch, heads, sequence, head size]; got "
                   << formatShape(shape(0)) << ", " << formatShape(shape(1)) << ", "
                   << formatShape(shape(2));
  int64_t queries = shape(0)[2], keys = shape(1)[2];
  bool causal = attrInt("is_causal", 0);
  if (has(3)) {
    // A mask known at compile time that keeps every key (none) or exactly keys j <= i.
    FailureOr<HostTensor> mask = known(3, "attn_mask");
    if (failed(mask))
      return failure();
    Shape m = mask->shape;
    if (m.size() < 2 || m[m.size() - 2] != queries || m.back() != keys)
      return error() << "attn_mask " << formatShape(m) << " must end in [" << queries << ", "
                     << keys << "]";
    bool boolean = mask->dataType == onnx::TensorProto::BOOL;
    bool all = true, triangular = queries == keys;
    for (int64_t n = 0; n < mask->size(); ++n) {
      int64_t i = n / keys % queries, j = n % keys;
      bool keep = boolean ? mask->integer(n) != 0 : mask->real(n) == 0.0;
      if (!boolean && !keep && mask->real(n) > -1e4)
        all = triangular = false; // a bias, not a mask
      all = all && keep;
      triangular = triangular && keep == (j <= i);
    }
    if (!all && !triangular)
      return error() << "attn_mask is neither causal nor empty; mt supports those";
    causal = causal || (triangular && !all);
  }
  Value q = operand(0), k = operand(1), v = operand(2);
  double scale = attrFloat("scale", 1.0 / std::sqrt(static_cast<double>(shape(0)[3])));
  FailureOr<Shape> out = attentionShape(shape(0), shape(1), shape(2), causal,
                                        /*sequenceMajor=*/false, [&] { return error(); });
  if (failed(out))
    return failure();
  return produce(0, b.create<AttentionOp>(loc, tensorType(*out, q), Type(), q, k, v, Value(),
                                          b.getF64FloatAttr(scale),
                                          causal ? b.getUnitAttr() : UnitAttr(), IntegerAttr(),
                                          softcap > 0.0 ? b.getF64FloatAttr(softcap) : FloatAttr(),
                                          UnitAttr())
                        .getResult());
}

LogicalResult NodeImporter::gelu() {
  std::string approximate = attrString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return error() << "approximate must be \"none\" or \"tanh\", got \"" << approximate << "\"";
  if (failed(requireFloat(0)))
    return failure();
  Value in = operand(0);
  return produce(0, b.create<GeluOp>(loc, in, b.getStringAttr(approximate)).getResult());
}

LogicalResult NodeImporter::reshape() {
  FailureOr<Shape> target = knownInts(1, "shape");
  if (failed(target))
    return failure();
  Shape in = shape(0), out;
  bool allowZero = attrInt("allowzero", 0);
  int64_t inferred = -1, product = 1;
  for (auto [d, size] : llvm::enumerate(*target)) {
    if (size == 0 && !allowZero) {
      if (d >= in.size())
        return error() << "shape " << formatShape(*target) << " copies axis " << d
                       << " that the input " << formatShape(in) << " lacks";
      size = in[d];
    }
    if (size == -1) {
      if (inferred >= 0)
        return error() << "shape " << formatShape(*target) << " has more than one -1";
      inferred = d;
    } else if (size < 0) {
      return error() << "shape " << formatShape(*target) << " has a negative size";
    } else if (__builtin_mul_overflow(product, size, &product)) {
      return error() << "shape " << formatShape(*target) << " holds more elements than count";
    }
    out.push_back(size);
  }
  if (inferred >= 0 && product > 0)
    out[inferred] = numElements(in) / product;
  if (std::string invalid = dimensionsError(out); !invalid.empty())
    return error() << "shape " << formatShape(*target) << " " << invalid;
  if (numElements(out) != numElements(in))
    return error() << "cannot reshape " << formatShape(in) << " into " << formatShape(*target);
  return view<ReshapeOp>(out);
}

LogicalResult NodeImporter::flatten() {
  FailureOr<int64_t> axis = normalizeAxis(attrInt("axis", 1), rank(0) + 1);
  if (failed(axis))
    return failure();
  Shape in = shape(0);
  int64_t outer = numElements(llvm::ArrayRef<int64_t>(in).take_front(*axis));
  return view<ReshapeOp>({outer, numElements(in) / std::max<int64_t>(outer, 1)});
}

LogicalResult NodeImporter::squeeze() {
  FailureOr<std::optional<Shape>> axes = axesOperand(13);
  if (failed(axes))
    return failure();
  Shape in = shape(0), out;
  llvm::SmallVector<int64_t> drop;
  for (int64_t a : axes->value_or(Shape())) {
    FailureOr<int64_t> axis = normalizeAxis(a, in.size());
    if (failed(axis))
      return failure();
    if (in[*axis] != 1)
      return error() << "cannot squeeze axis " << *axis << " of size " << in[*axis];
    drop.push_back(*axis);
  }
  for (int64_t d = 0, e = in.size(); d < e; ++d)
    if (*axes ? !llvm::is_contained(drop, d) : in[d] != 1)
      out.push_back(in[d]);
  return view<ReshapeOp>(out);
}

LogicalResult NodeImporter::unsqueeze() {
  FailureOr<std::optional<Shape>> axes = axesOperand(13);
  if (failed(axes))
    return failure();
  if (!*axes)
    return error() << "needs axes";
  int64_t outRank = rank(0) + (*axes)->size();
  llvm::SmallVector<int64_t> inserted;
  for (int64_t a : **axes) {
    FailureOr<int64_t> axis = normalizeAxis(a, outRank);
    if (failed(axis))
      return failure();
    inserted.push_back(*axis);
  }
  Shape in = shape(0), out;
  for (int64_t d = 0, next = 0; d < outRank; ++d)
    out.push_back(llvm::is_contained(inserted, d) ? 1 : in[next++]);
  return view<ReshapeOp>(out);
}

LogicalResult NodeImporter::transpose() {
  Shape perm;
  if (std::optional<Shape> given = attrInts("perm"))
    perm = *given;
  else
    for (int64_t d = rank(0) - 1; d >= 0; --d)
      perm.push_back(d);
  FailureOr<Shape> out = transposeShape(shape(0), perm, [&] { return error(); });
  if (failed(out))
    return failure();
  if (input(0).known)
    return produce(0, transposeTensor(*input(0).known, perm));
  Value in = operand(0);
  return produce(0, b.create<TransposeOp>(loc, tensorType(*out, in), in,
                                          b.getDenseI64ArrayAttr(perm))
                        .getResult());
}

LogicalResult NodeImporter::sliceNode() {
  FailureOr<Shape> starts = knownInts(1, "starts"), ends = knownInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  Shape in = shape(0);
  Shape axes, steps(starts->size(), 1);
  if (has(3)) {
    FailureOr<Shape> given = knownInts(3, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else {
    for (int64_t d = 0, e = starts->size(); d < e; ++d)
      axes.push_back(d);
  }
  if (has(4)) {
    FailureOr<Shape> given = knownInts(4, "steps");
    if (failed(given))
      return failure();
    steps = *given;
  }
  if (axes.size() != starts->size() || ends->size() != starts->size() ||
      steps.size() != starts->size())
    return error() << "starts, ends, axes and steps differ in length";
  Shape first(in.size(), 0), limit(in), step(in.size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    FailureOr<int64_t> axis = normalizeAxis(axes[i], in.size());
    if (failed(axis))
      return failure();
    int64_t size = in[*axis], s = steps[i];
    if (s == 0)
      return error() << "step 0 on axis " << *axis;
    // ONNX clamps out-of-range bounds (INT64_MAX means "to the end").
    auto clampBound = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v += size;
      return std::clamp(v, lo, hi);
    };
    first[*axis] = s > 0 ? clampBound((*starts)[i], 0, size) : clampBound((*starts)[i], -1, size - 1);
    limit[*axis] = s > 0 ? clampBound((*ends)[i], 0, size) : clampBound((*ends)[i], -1, size - 1);
    step[*axis] = s;
    if (s > 0 && limit[*axis] < first[*axis])
      limit[*axis] = first[*axis];
  }
  if (input(0).known)
    return produce(0, sliceTensor(*input(0).known, first, limit, step));
  if (llvm::any_of(step, [](int64_t s) { return s < 0; }))
    return error() << "negative slice steps are supported only on known values";
  FailureOr<Value> result = slice(operand(0), first, limit, step);
  if (failed(result))
    return failure();
  return produce(0, *result);
}

LogicalResult NodeImporter::concat() {
  if (node.input_size() == 0)
    return error() << "needs inputs";
  FailureOr<int64_t> axis = normalizeAxis(attrInt("axis", 0), rank(0));
  if (failed(axis))
    return failure();
  llvm::SmallVector<Shape> shapes;
  for (int i = 0; i < node.input_size(); ++i)
    shapes.push_back(shape(i));
  FailureOr<Shape> out = concatShape(shapes, *axis, [&] { return error(); });
  if (failed(out))
    return failure();
  if (allKnown()) {
    llvm::SmallVector<HostTensor> parts;
    for (int i = 0; i < node.input_size(); ++i)
      parts.push_back(input(i).known->castTo(graph.dataTypeOf(input(0))));
    return produce(0, concatTensors(parts, *axis));
  }
  llvm::SmallVector<Value> parts;
  for (int i = 0; i < node.input_size(); ++i)
    parts.push_back(operand(i));
  return produce(0, b.create<ConcatOp>(loc, tensorType(*out, parts.front()), parts, *axis)
                        .getResult());
}

LogicalResult NodeImporter::split() {
  FailureOr<int64_t> axis = normalizeAxis(attrInt("axis", 0), rank(0));
  if (failed(axis))
    return failure();
  Shape in = shape(0), sizes;
  int64_t parts = node.output_size();
  if (has(1)) {
    FailureOr<Shape> given = knownInts(1, "split");
    if (failed(given))
      return failure();
    sizes = *given;
  } else if (std::optional<Shape> given = attrInts("split")) {
    sizes = *given;
  } else {
    parts = attrInt("num_outputs", parts);
    if (parts <= 0)
      return error() << "splits into " << parts << " parts";
    int64_t chunk = (in[*axis] + parts - 1) / parts;
    for (int64_t i = 0, left = in[*axis]; i < parts; ++i, left -= chunk)
      sizes.push_back(std::min(chunk, left));
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (static_cast<int64_t>(sizes.size()) != node.output_size() || total != in[*axis])
    return error() << "split sizes " << formatShape(sizes) << " do not cover axis " << *axis
                   << " of " << formatShape(in) << " with " << node.output_size() << " outputs";
  Shape first(in.size(), 0), limit(in), step(in.size(), 1);
  int64_t offset = 0;
  for (int i = 0; i < node.output_size(); ++i) {
    first[*axis] = offset;
    limit[*axis] = offset + sizes[i];
    offset += sizes[i];
    if (input(0).known) {
      (void)produce(i, sliceTensor(*input(0).known, first, limit, step));
      continue;
    }
    FailureOr<Value> part = slice(operand(0), first, limit, step);
    if (failed(part))
      return failure();
    (void)produce(i, *part);
  }
  return success();
}

LogicalResult NodeImporter::expand() {
  FailureOr<Shape> target = knownInts(1, "shape");
  if (failed(target))
    return failure();
  FailureOr<Shape> out = broadcastShape(shape(0), *target, [&] { return error(); });
  if (failed(out))
    return failure();
  return view<ExpandOp>(*out);
}

LogicalResult NodeImporter::tile() {
  FailureOr<Shape> repeats = knownInts(1, "repeats");
  if (failed(repeats))
    return failure();
  Shape in = shape(0);
  if (repeats->size() != in.size() ||
      llvm::any_of(*repeats, [](int64_t r) { return r < 1; }))
    return error() << "repeats " << formatShape(*repeats) << " must be one positive count per "
                   << "axis of " << formatShape(in);
  // Each axis of size d repeated r times is a new axis of r copies before it:
  // reshape [.., 1, d, ..], expand [.., r, d, ..], reshape [.., r * d, ..]; an axis of size 1
  // is expanded in place (the form a repeat_interleave of heads takes).
  Shape split, expanded, out;
  for (auto [d, r] : llvm::zip(in, *repeats)) {
    if (r > 1 && d > 1) {
      split.push_back(1);
      expanded.push_back(r);
    }
    split.push_back(d);
    expanded.push_back(d == 1 ? r : d);
    out.push_back(d * r);
  }
  if (input(0).known) {
    HostTensor t = *input(0).known;
    t.shape = split;
    t = expandTensor(t, expanded);
    t.shape = out;
    return produce(0, t);
  }
  Value v = operand(0);
  if (split != in)
    v = b.create<ReshapeOp>(loc, tensorType(split, v), v);
  if (expanded != split)
    v = b.create<ExpandOp>(loc, tensorType(expanded, v), v);
  if (out != expanded)
    v = b.create<ReshapeOp>(loc, tensorType(out, v), v);
  return produce(0, v);
}

LogicalResult NodeImporter::where() {
  if (!has(0) || !has(1) || !has(2))
    return error() << "needs condition, X and Y";
  auto emitErr = [&] { return error(); };
  FailureOr<Shape> partial = broadcastShape(shape(0), shape(1), emitErr);
  if (failed(partial))
    return failure();
  FailureOr<Shape> out = broadcastShape(*partial, shape(2), emitErr);
  if (failed(out))
    return failure();
  if (allKnown())
    return produce(0, whereTensor(*input(0).known, *input(1).known, *input(2).known));
  if (graph.dataTypeOf(input(0)) != onnx::TensorProto::BOOL)
    return error() << "condition must be bool";
  Value c = operand(0), x = operand(1), y = operand(2);
  if (getElementTypeOrSelf(x.getType()) != getElementTypeOrSelf(y.getType()))
    return error() << "X and Y have different element types: " << x.getType() << " and "
                   << y.getType();
  return produce(0, b.create<WhereOp>(loc, tensorType(*out, x), c, x, y).getResult());
}

LogicalResult NodeImporter::cast() {
  int32_t to = attrInt("to", 0);
  Type element = graph.elementType(to);
  if (!element)
    return error() << "cast to unsupported data type "
                   << onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(to));
  if (input(0).known)
    return produce(0, input(0).known->castTo(to));
  if (graph.dataTypeOf(input(0)) == to)
    return alias(0, 0);
  Value in = operand(0);
  return produce(0, b.create<CastOp>(loc, RankedTensorType::get(shape(0), element), in)
                        .getResult());
}

LogicalResult NodeImporter::identity() {
  // Dropout is the identity in the exported (inference) graph; its mask output is not.
  if (node.op_type() == "Dropout" && node.output_size() > 1 && !node.output(1).empty())
    return error() << "the mask output is not supported";
  if (node.op_type() == "Dropout" && has(2)) {
    FailureOr<HostTensor> training = known(2, "training_mode");
    if (failed(training))
      return failure();
    if (training->integer(0))
      return error() << "training-mode dropout is not supported";
  }
  return alias(0, 0);
}

LogicalResult NodeImporter::gather() {
  if (!has(0) || !has(1))
    return error() << "needs data and indices";
  FailureOr<int64_t> axis = normalizeAxis(attrInt("axis", 0), rank(0));
  if (failed(axis))
    return failure();
  if (HostTensor::isFloatType(graph.dataTypeOf(input(1))))
    return error() << "indices must be integers";
  int64_t size = shape(0)[*axis];
  // Known indices may be negative (counted from the end); normalize and check them now.
  if (input(1).known) {
    HostTensor indices = *input(1).known;
    for (int64_t i = 0; i < indices.size(); ++i) {
      int64_t index = indices.integers[i];
      if (index < -size || index >= size)
        return error() << "index " << index << " is out of range for axis " << *axis
                       << " of size " << size;
      indices.integers[i] = index < 0 ? index + size : index;
    }
    if (input(0).known)
      return produce(0, gatherTensor(*input(0).known, indices, *axis));
    input(1).known = indices;
    input(1).value = nullptr;
  }
  FailureOr<Shape> out = gatherShape(shape(0), shape(1), *axis, [&] { return error(); });
  if (failed(out))
    return failure();
  Value data = operand(0), indices = operand(1);
  return produce(0, b.create<GatherOp>(loc, tensorType(*out, data), data, indices, *axis)
                        .getResult());
}

LogicalResult NodeImporter::shapeNode() {
  Shape in = shape(0);
  int64_t r = in.size();
  int64_t start = attrInt("start", 0), end = attrInt("end", r);
  start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
  return produce(0, HostTensor::fromIntegers(
                        llvm::ArrayRef<int64_t>(in).slice(start, std::max<int64_t>(end - start, 0))));
}

LogicalResult NodeImporter::constant() {
  if (const onnx::AttributeProto *value = attr("value")) {
    std::optional<HostTensor> t = graph.decodeTensor(value->t());
    if (!t)
      return error() << "value tensor is external, truncated or of a type mt does not fold";
    return produce(0, *t);
  }
  if (const onnx::AttributeProto *a = attr("value_float")) {
    HostTensor t = HostTensor::zeros(onnx::TensorProto::FLOAT, {});
    t.set(0, a->f());
    return produce(0, t);
  }
  if (const onnx::AttributeProto *a = attr("value_floats")) {
    HostTensor t = HostTensor::zeros(onnx::TensorProto::FLOAT, {a->floats_size()});
    for (int i = 0; i < a->floats_size(); ++i)
      t.set(i, a->floats(i));
    return produce(0, t);
  }
  if (const onnx::AttributeProto *a = attr("value_int")) {
    HostTensor t = HostTensor::zeros(onnx::TensorProto::INT64, {});
    t.setInteger(0, a->i());
    return produce(0, t);
  }
  if (std::optional<Shape> ints = attrInts("value_ints"))
    return produce(0, HostTensor::fromIntegers(*ints));
  return error() << "has no supported value attribute";
}

LogicalResult NodeImporter::constantOfShape() {
  FailureOr<Shape> target = knownInts(0, "shape");
  if (failed(target))
    return failure();
  HostTensor fill = HostTensor::zeros(onnx::TensorProto::FLOAT, {1});
  if (const onnx::AttributeProto *value = attr("value")) {
    std::optional<HostTensor> given = graph.decodeTensor(value->t());
    if (!given || given->size() != 1)
      return error() << "value must be a one-element tensor";
    fill = *given;
  }
  fill.shape = Shape{};
  return produce(0, expandTensor(fill, *target));
}

LogicalResult NodeImporter::range() {
  if (failed(requireKnown()))
    return failure();
  FailureOr<HostTensor> start = known(0, "start"), limit = known(1, "limit"),
                        delta = known(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  if (delta->real(0) == 0)
    return error() << "delta is zero";
  // The count is a double until it is known to be one a folded tensor holds (fuzzing found
  // a count past int64).
  double count = std::ceil((limit->real(0) - start->real(0)) / delta->real(0));
  if (!(count < double(int64_t{1} << 26)))
    return error() << "would fold " << count << " elements; mt folds ranges of under 2^26";
  return produce(0, rangeTensor(*start, *limit, *delta));
}

LogicalResult NodeImporter::trilu() {
  if (failed(requireKnown()))
    return failure();
  if (rank(0) < 2)
    return error() << "input must have rank 2 or more";
  int64_t k = 0;
  if (has(1)) {
    FailureOr<Shape> given = knownInts(1, "k");
    if (failed(given))
      return failure();
    k = given->front();
  }
  return produce(0, triluTensor(*input(0).known, k, attrInt("upper", 1)));
}

LogicalResult NodeImporter::gatherNd() {
  if (!has(0) || !has(1))
    return error() << "needs data and indices";
  FailureOr<HostTensor> indices = known(1, "indices");
  if (failed(indices))
    return failure();
  if (indices->isFloat())
    return error() << "indices must be integers";
  Shape data = shape(0);
  int64_t batchDims = attrInt("batch_dims", 0);
  int64_t depth = indices->shape.empty() ? 0 : indices->shape.back();
  if (batchDims < 0 || depth < 1 || rank(1) <= batchDims ||
      batchDims + depth > static_cast<int64_t>(data.size()))
    return error() << "indices " << formatShape(indices->shape) << " with batch_dims "
                   << batchDims << " do not index data " << formatShape(data);
  for (int64_t d = 0; d < batchDims; ++d)
    if (indices->shape[d] != data[d])
      return error() << "batch axis " << d << " differs: indices " << formatShape(indices->shape)
                     << ", data " << formatShape(data);
  // Negative indices count from the end of their axis; normalize and check them now.
  for (int64_t i = 0; i < indices->size(); ++i) {
    int64_t axis = batchDims + i % depth, size = data[axis];
    int64_t index = indices->integers[i];
    if (index < -size || index >= size)
      return error() << "index " << index << " is out of range for axis " << axis
                     << " of size " << size;
    indices->integers[i] = index < 0 ? index + size : index;
  }
  if (input(0).known)
    return produce(0, gatherNdTensor(*input(0).known, *indices, batchDims));
  if (batchDims != 0)
    return error() << "batch_dims " << batchDims << " on run-time data is not supported";
  if (std::optional<LogicalResult> asView = gatherNdView(*indices))
    return *asView;
  // On run-time data, one index per row picking along the first axis (how the dynamo
  // exporter writes advanced indexing such as falcon's qkv[..., :-2, :]) is a gather.
  if (depth != 1)
    return error() << "on run-time data, indices must pick along the first axis (one "
                      "element a row) or read the data as a broadcast view; got indices "
                   << formatShape(indices->shape);
  indices->shape.pop_back();
  Value in = operand(0);
  Value index = constant(*indices);
  FailureOr<Shape> out = gatherShape(data, indices->shape, 0, [&] { return error(); });
  if (failed(out))
    return failure();
  return produce(0, b.create<GatherOp>(loc, tensorType(*out, in), in, index, 0).getResult());
}

std::optional<LogicalResult> NodeImporter::gatherNdView(const HostTensor &indices) {
  // Each row of `indices` picks a slice of `inner` elements at a flat offset of the data;
  // when the offsets are an affine function of the row's position whose strides are the
  // data's own (or 0 on a repeated axis), the gather reads the data reshaped and expanded:
  // the padding mask [B, 1, 1, S] the dynamo exporter gathers from attention_mask [B, S].
  Shape data = shape(0);
  int64_t depth = indices.shape.back();
  Shape rowsShape(indices.shape.begin(), indices.shape.end() - 1);
  Shape dataStrides = stridesOf(data);
  int64_t inner = numElements(llvm::ArrayRef<int64_t>(data).drop_front(depth));
  auto offset = [&](int64_t row) {
    int64_t at = 0;
    for (int64_t j = 0; j < depth; ++j)
      at += indices.integers[row * depth + j] * dataStrides[j];
    return at;
  };
  int64_t rows = numElements(rowsShape);
  if (rows == 0 || offset(0) != 0)
    return std::nullopt;
  Shape rowStrides = stridesOf(rowsShape), steps;
  for (size_t a = 0; a < rowsShape.size(); ++a)
    steps.push_back(rowsShape[a] > 1 ? offset(rowStrides[a]) : 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t expected = 0;
    for (size_t a = 0; a < rowsShape.size(); ++a)
      expected += (row / rowStrides[a] % rowsShape[a]) * steps[a];
    if (offset(row) != expected)
      return std::nullopt;
  }
  // The axes that move must walk the data in row-major order, covering all of it.
  Shape viewShape = rowsShape, expanded = rowsShape;
  int64_t next = inner * numElements(llvm::ArrayRef<int64_t>(data).take_front(depth));
  for (size_t a = 0; a < rowsShape.size(); ++a) {
    if (rowsShape[a] == 1)
      continue;
    if (steps[a] == 0) {
      viewShape[a] = 1;
      continue;
    }
    if (steps[a] * rowsShape[a] != next)
      return std::nullopt;
    next = steps[a];
  }
  if (next != inner)
    return std::nullopt;
  viewShape.append(data.begin() + depth, data.end());
  expanded.append(data.begin() + depth, data.end());
  Value in = operand(0);
  Value view = b.create<ReshapeOp>(loc, tensorType(viewShape, in), in);
  if (viewShape != expanded)
    view = b.create<ExpandOp>(loc, tensorType(expanded, in), view);
  return produce(0, view);
}

LogicalResult NodeImporter::cumSum() {
  if (!has(0))
    return error() << "needs an input";
  FailureOr<Shape> axis = knownInts(1, "axis");
  if (failed(axis))
    return failure();
  if (axis->size() != 1)
    return error() << "axis must hold one value";
  FailureOr<int64_t> normalized = normalizeAxis(axis->front(), rank(0));
  if (failed(normalized))
    return failure();
  bool exclusive = attrInt("exclusive", 0), reverse = attrInt("reverse", 0);
  if (input(0).known)
    return produce(0, cumSumTensor(*input(0).known, *normalized, exclusive, reverse));
  // At run time (positions counted from an attention_mask), sums along the last axis are a
  // product with a triangle of ones: x @ U, U[i][j] = 1 where element i counts towards j.
  // Integers go through fp32, exact while the sums stay below 2^24 (a mask's counts do).
  if (*normalized != rank(0) - 1)
    return error() << "at run time only sums along the last axis are supported, not axis "
                   << *normalized;
  int64_t n = shape(0).back();
  HostTensor triangle = HostTensor::zeros(onnx::TensorProto::FLOAT, {n, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      triangle.set(i * n + j, reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j));
  Value in = operand(0);
  Type element = getElementTypeOrSelf(in.getType());
  bool isFloat = llvm::isa<FloatType>(element);
  auto f32 = RankedTensorType::get(shape(0), b.getF32Type());
  Value x = isFloat ? in : b.create<CastOp>(loc, f32, in).getResult();
  Value ones =
      constant(triangle.castTo(isFloat ? graph.dataTypeOf(input(0)) : onnx::TensorProto::FLOAT));
  Value sums = b.create<MatmulOp>(loc, x.getType(), x, ones, Value(), false, false);
  return produce(0, isFloat ? sums : b.create<CastOp>(loc, in.getType(), sums).getResult());
}

LogicalResult NodeImporter::einsum() {
  // Exporters write torch.outer as Einsum("i,j->ij"); that is the only form mt folds.
  std::string equation = attrString("equation", "");
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  if (equation.size() != 7 || equation[1] != ',' || equation.substr(3, 2) != "->" ||
      equation[0] == equation[2] || equation.substr(5) != equation.substr(0, 1) + equation[2])
    return error() << "only the outer product of two vectors ('i,j->ij') is supported, got '"
                   << equation << "'";
  if (failed(requireKnown()))
    return failure();
  HostTensor lhs = *input(0).known, rhs = *input(1).known;
  if (lhs.shape.size() != 1 || rhs.shape.size() != 1)
    return error() << "operands must be vectors";
  lhs.shape = {lhs.shape[0], 1};
  rhs.shape = {1, rhs.shape[0]};
  return produce(0, *foldBinary("Mul", lhs, rhs));
}

} // namespace

LogicalResult importNode(GraphImporter &graph, const onnx::NodeProto &node, StringRef name) {
  return NodeImporter(graph, node, name).run();
}

} // namespace mt
