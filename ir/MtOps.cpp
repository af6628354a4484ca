// Verifiers and folders of the mt ops: every shape is checked against ir/ShapeRules.
#include "ir/MtOps.h"

#include "ir/ShapeRules.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "tensor/Shapes.h"

#include <cmath>

using namespace mlir;
using namespace mt;

namespace {

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

/// Compares the op's result with the shape its rule computes.
LogicalResult verifyResultShape(Operation *op, FailureOr<Shape> expected) {
  if (failed(expected))
    return failure();
  llvm::ArrayRef<int64_t> actual = shapeOf(op->getResult(0));
  if (actual != llvm::ArrayRef<int64_t>(*expected))
    return op->emitOpError("result shape ")
           << formatShape(actual) << " should be " << formatShape(*expected);
  return success();
}

LogicalResult verifySameElementType(Operation *op, llvm::ArrayRef<Value> values) {
  Type expected = getElementTypeOrSelf(op->getResult(0).getType());
  for (Value value : values)
    if (getElementTypeOrSelf(value.getType()) != expected)
      return op->emitOpError("operand element type ")
             << getElementTypeOrSelf(value.getType()) << " differs from result's " << expected;
  return success();
}

/// A per-channel vector (norm weight or bias) must be [size of the last axis].
LogicalResult verifyChannelVector(Operation *op, Value vector, StringRef what) {
  int64_t channels = shapeOf(op->getOperand(0)).back();
  if (shapeOf(vector) != llvm::ArrayRef<int64_t>{channels})
    return op->emitOpError() << what << " " << formatShape(shapeOf(vector)) << " must be ["
                             << channels << "]";
  return success();
}

LogicalResult verifyNorm(Operation *op, llvm::ArrayRef<Value> channelVectors, double epsilon) {
  if (shapeOf(op->getOperand(0)).empty())
    return op->emitOpError("normalizes the last axis, so its input needs rank 1 or more");
  if (epsilon < 0)
    return op->emitOpError("epsilon must not be negative");
  for (Value vector : channelVectors)
    if (failed(verifyChannelVector(op, vector, "weight/bias")))
      return failure();
  if (failed(verifySameElementType(op, channelVectors)))
    return failure();
  return verifyResultShape(op, Shape(shapeOf(op->getOperand(0))));
}

LogicalResult verifyReduce(Operation *op, llvm::ArrayRef<int64_t> axes, bool keepDims) {
  return verifyResultShape(op, reduceShape(shapeOf(op->getOperand(0)), axes, keepDims,
                                           [&] { return op->emitOpError(); }));
}

} // namespace

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  bool external = getExternalFile().has_value();
  if (external != getOffset().has_value() || external != getLength().has_value())
    return emitOpError("external_file, offset and length come together");
  if (FloatAttr sourceOffset = getSourceOffsetAttr()) {
    if (!getSourceName())
      return emitOpError("source_offset needs the source_name it offsets");
    if (!std::isfinite(sourceOffset.getValueAsDouble()))
      return emitOpError("source_offset must be finite");
  }
  if (!external)
    return success();
  RankedTensorType type = getTensorType();
  int64_t bytes = numElements(type.getShape()) *
                  static_cast<int64_t>(type.getElementTypeBitWidth() / 8);
  // The accessors return the attributes' values as unsigned; a negative one is read signed.
  int64_t offset = getOffsetAttr().getInt(), length = getLengthAttr().getInt();
  if (offset < 0 || length != bytes)
    return emitOpError("external data of ")
           << length << " bytes at offset " << offset << " does not hold " << type
           << " (" << bytes << " bytes)";
  return success();
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto parameter = symbolTable.lookupNearestSymbolFrom<ParameterOp>(*this, getNameAttr());
  if (!parameter)
    return emitOpError("reads ") << getNameAttr() << ", which is not an mt.parameter";
  if (parameter.getType() != getType())
    return emitOpError("type ") << getType() << " differs from parameter's "
                                << parameter.getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

Operation *MTDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                          Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return success();
}

LogicalResult WhereOp::verify() {
  return verifySameElementType(*this, {getTrueValue(), getFalseValue()});
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this, getAxes(), getKeepdims()); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this, getAxes(), getKeepdims()); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this, getAxes(), getKeepdims()); }

LogicalResult SoftmaxOp::verify() {
  if (getAxis() < 0 || getAxis() >= getType().getRank())
    return emitOpError("axis ") << getAxis() << " is out of range for rank "
                                << getType().getRank();
  return success();
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, {getWeight()}, getEpsilon().convertToDouble());
}

LogicalResult LayerNormOp::verify() {
  llvm::SmallVector<Value, 2> vectors{getWeight()};
  if (getBias())
    vectors.push_back(getBias());
  return verifyNorm(*this, vectors, getEpsilon().convertToDouble());
}

//===----------------------------------------------------------------------===//
// Transformer blocks
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  if (failed(verifySameElementType(*this, {getLhs(), getRhs()})))
    return failure();
  if (getAddend() && getAddend().getType() != getType())
    return emitOpError("the addend's type ") << getAddend().getType()
                                             << " is not the result's " << getType();
  return verifyResultShape(*this, matmulShape(shapeOf(getLhs()), shapeOf(getRhs()),
                                              getTransposeLhs(), getTransposeRhs(),
                                              [&] { return emitOpError(); }));
}

namespace {

/// For a transpose that moves its input's last axis to the second-to-last place, the same
/// transpose without that swap (null when that is the identity, so the input itself serves):
/// transpose(x, perm) is swap_last_two(transpose(x, perm')).
std::optional<Value> unswappedTranspose(Value value, PatternRewriter &rewriter) {
  auto transpose = value.getDefiningOp<TransposeOp>();
  if (!transpose)
    return std::nullopt;
  llvm::SmallVector<int64_t> perm(transpose.getPermutation());
  int64_t n = perm.size();
  if (n < 2 || perm[n - 2] != n - 1)
    return std::nullopt;
  std::swap(perm[n - 2], perm[n - 1]);
  if (llvm::equal(perm, llvm::seq<int64_t>(0, n)))
    return transpose.getInput();
  llvm::SmallVector<int64_t> shape(transpose.getType().getShape());
  std::swap(shape[n - 2], shape[n - 1]);
  return rewriter
      .create<TransposeOp>(transpose.getLoc(),
                           RankedTensorType::get(shape, transpose.getType().getElementType()),
                           transpose.getInput(), rewriter.getDenseI64ArrayAttr(perm))
      .getResult();
}

/// Exporters write x @ W^T and q @ k^T as a Transpose feeding MatMul (k's often composed
/// with the head transpose); the flag is the form that kernels and raising patterns take.
struct AbsorbTransposes : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp matmul, PatternRewriter &rewriter) const override {
    std::optional<Value> lhs = unswappedTranspose(matmul.getLhs(), rewriter);
    std::optional<Value> rhs = unswappedTranspose(matmul.getRhs(), rewriter);
    if (!lhs && !rhs)
      return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(
        matmul, matmul.getType(), lhs.value_or(matmul.getLhs()), rhs.value_or(matmul.getRhs()),
        matmul.getAddend(), matmul.getTransposeLhs() != lhs.has_value(), matmul.getTransposeRhs() != rhs.has_value());
    return success();
  }
};

} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<AbsorbTransposes>(context);
}

LogicalResult LinearOp::verify() {
  llvm::SmallVector<Value, 3> operands{getInput(), getWeight()};
  std::optional<llvm::ArrayRef<int64_t>> bias;
  if (getBias()) {
    operands.push_back(getBias());
    bias = shapeOf(getBias());
  }
  if (failed(verifySameElementType(*this, operands)))
    return failure();
  return verifyResultShape(*this, linearShape(shapeOf(getInput()), shapeOf(getWeight()), bias,
                                              getTransposeWeight(),
                                              [&] { return emitOpError(); }));
}

LogicalResult EmbeddingOp::verify() {
  if (getTable().getType().getRank() != 2)
    return emitOpError("table must be [vocabulary, width], got ")
           << formatShape(shapeOf(getTable()));
  if (failed(verifySameElementType(*this, {getTable()})))
    return failure();
  Shape expected(shapeOf(getIndices()));
  expected.push_back(shapeOf(getTable())[1]);
  return verifyResultShape(*this, expected);
}

LogicalResult RopeOp::verify() {
  llvm::ArrayRef<int64_t> input = shapeOf(getInput());
  if (input.empty() || input.back() % 2 != 0)
    return emitOpError("rotates halves of the last axis, which must be even, got ")
           << formatShape(input);
  for (Value table : {getCos(), getSin()})
    if (!broadcastsTo(shapeOf(table), input))
      return emitOpError("cos/sin ") << formatShape(shapeOf(table))
                                     << " do not broadcast to the input " << formatShape(input);
  if (failed(verifySameElementType(*this, {getInput(), getCos(), getSin()})))
    return failure();
  return verifyResultShape(*this, Shape(input));
}

/// A key span, where given, is a [first, end) pair per sequence of the batch.
static LogicalResult verifyKeySpan(Operation *op, Value keySpan, Value query) {
  if (!keySpan || shapeOf(query).empty())
    return success();
  std::string error = shapes::keySpan(shapeOf(keySpan), shapeOf(query).front());
  return error.empty() ? success() : op->emitOpError(error);
}

/// A sliding window needs causal attention (its keys end at the query) and at least one key;
/// a soft cap is a positive bound.
static LogicalResult verifyWindowAndCap(Operation *op, bool causal, IntegerAttr window,
                                        FloatAttr softcap) {
  if (window && (window.getInt() < 1 || !causal))
    return op->emitOpError("window must be at least 1 and needs causal, got ") << window.getInt();
  if (softcap && !(softcap.getValueAsDouble() > 0.0))
    return op->emitOpError("softcap must be positive, got ") << softcap.getValueAsDouble();
  return success();
}

/// An attention's log-sum-exp, where given: one per query row, of the query's element type.
static LogicalResult verifyLse(Operation *op, Value lse, Value query, Value key, Value value,
                               bool causal, bool sequenceMajor) {
  shapes::AttentionExtents e{};
  if (!lse ||
      !shapes::attention(shapeOf(query), shapeOf(key), shapeOf(value), causal, sequenceMajor, e)
           .empty())
    return success(); // the operands' own check reports them
  if (std::string error = shapes::attentionLse(shapeOf(lse), e); !error.empty())
    return op->emitOpError(error);
  if (getElementTypeOrSelf(lse.getType()) != getElementTypeOrSelf(query.getType()))
    return op->emitOpError("lse element type ")
           << getElementTypeOrSelf(lse.getType()) << " differs from the query's "
           << getElementTypeOrSelf(query.getType());
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifySameElementType(*this, {getQuery(), getKey(), getValue()})))
    return failure();
  if (failed(verifyKeySpan(*this, getKeySpan(), getQuery())) ||
      failed(verifyWindowAndCap(*this, getCausal(), getWindowAttr(), getSoftcapAttr())) ||
      failed(verifyLse(*this, getLse(), getQuery(), getKey(), getValue(), getCausal(),
                       getSequenceMajor())))
    return failure();
  return verifyResultShape(
      *this, attentionShape(shapeOf(getQuery()), shapeOf(getKey()), shapeOf(getValue()),
                            getCausal(), getSequenceMajor(), [&] { return emitOpError(); }));
}

LogicalResult KeySpanOp::verify() {
  llvm::ArrayRef<int64_t> mask = shapeOf(getMask());
  if (mask.size() != 2)
    return emitOpError("mask must be [batch, keys], got ") << formatShape(mask);
  return verifyResultShape(*this, Shape{mask[0], 2});
}

LogicalResult CrossEntropyOp::verify() {
  llvm::ArrayRef<int64_t> logits = shapeOf(getLogits());
  if (logits.empty() || logits.drop_back() != shapeOf(getTargets()))
    return emitOpError("targets ") << formatShape(shapeOf(getTargets()))
                                   << " must be the logits' shape " << formatShape(logits)
                                   << " without its last (vocabulary) axis";
  return verifyResultShape(*this, Shape{});
}

/// The shapes of a linear cross-entropy: input [..., K], weight [K, V] (or [V, K] with
/// `transposed`), targets [...], a chunk of at least one row.
static LogicalResult verifyLinearLoss(Operation *op, Value input, Value weight, Value targets,
                                      bool transposed, int64_t chunk) {
  llvm::ArrayRef<int64_t> x = shapeOf(input), w = shapeOf(weight);
  if (x.empty() || w.size() != 2)
    return op->emitOpError("needs an input of rank 1 or more and a weight of rank 2, got ")
           << formatShape(x) << " and " << formatShape(w);
  if (x.back() != (transposed ? w[1] : w[0]))
    return op->emitOpError("the input's last axis ")
           << x.back() << " is not the weight's " << (transposed ? "second" : "first") << " "
           << formatShape(w);
  if (x.drop_back() != shapeOf(targets))
    return op->emitOpError("targets ")
           << formatShape(shapeOf(targets)) << " must be the input's shape without its last axis";
  if (chunk < 1)
    return op->emitOpError("chunk must be at least one row, got ") << chunk;
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() {
  if (failed(verifyLinearLoss(*this, getInput(), getWeight(), getTargets(), getTransposeWeight(),
                              getChunk())))
    return failure();
  return verifyResultShape(*this, Shape{});
}

//===----------------------------------------------------------------------===//
// Views and data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (numElements(shapeOf(getInput())) != numElements(getType().getShape()))
    return emitOpError("cannot reshape ") << formatShape(shapeOf(getInput())) << " into "
                                          << formatShape(getType().getShape());
  return verifySameElementType(*this, {getInput()});
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

LogicalResult TransposeOp::verify() {
  if (failed(verifySameElementType(*this, {getInput()})))
    return failure();
  return verifyResultShape(*this, transposeShape(shapeOf(getInput()), getPermutation(),
                                                 [&] { return emitOpError(); }));
}

LogicalResult SliceOp::verify() {
  if (failed(verifySameElementType(*this, {getInput()})))
    return failure();
  return verifyResultShape(*this, sliceShape(shapeOf(getInput()), getStarts(), getLimits(),
                                             getStrides(), [&] { return emitOpError(); }));
}

LogicalResult ConcatOp::verify() {
  llvm::SmallVector<Shape> shapes;
  for (Value input : getInputs())
    shapes.emplace_back(shapeOf(input));
  llvm::SmallVector<Value> inputs(getInputs());
  if (failed(verifySameElementType(*this, inputs)))
    return failure();
  return verifyResultShape(*this, concatShape(shapes, getAxis(), [&] { return emitOpError(); }));
}

LogicalResult ExpandOp::verify() {
  if (std::string error = shapes::broadcastTo(shapeOf(getInput()), getType().getShape());
      !error.empty())
    return emitOpError(error);
  return verifySameElementType(*this, {getInput()});
}

LogicalResult GatherOp::verify() {
  if (failed(verifySameElementType(*this, {getInput()})))
    return failure();
  return verifyResultShape(*this, gatherShape(shapeOf(getInput()), shapeOf(getIndices()),
                                              getAxis(), [&] { return emitOpError(); }));
}

namespace {

/// A gather along axis 0 whose constant indices are 0, 1, ..., n-1 in row-major order (the legacy
/// exporter reads a padding mask [B*S, 1] back as [B, 1, 1, S, 1] so) is a reshape.
struct IdentityGather : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp gather, PatternRewriter &rewriter) const override {
    DenseIntElementsAttr indices;
    if (gather.getAxis() != 0 || !matchPattern(gather.getIndices(), m_Constant(&indices)) ||
        indices.getNumElements() != shapeOf(gather.getInput()).front())
      return failure();
    int64_t expected = 0;
    for (const APInt &index : indices.getValues<APInt>())
      if (index.getSExtValue() != expected++)
        return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(gather, gather.getType(), gather.getInput());
    return success();
  }
};

} // namespace

void GatherOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<IdentityGather>(context);
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

namespace {

LogicalResult verifySameTypes(Operation *op, Value a, Value b, StringRef what) {
  if (a.getType() != b.getType())
    return op->emitOpError() << what << " " << a.getType() << " should be " << b.getType();
  return success();
}

} // namespace

LogicalResult RmsNormGradOp::verify() {
  if (failed(verifySameTypes(*this, getGrad(), getInput(), "grad")) ||
      failed(verifySameTypes(*this, getInputGrad(), getInput(), "input_grad")) ||
      failed(verifySameTypes(*this, getWeightGrad(), getWeight(), "weight_grad")))
    return failure();
  return verifyChannelVector(*this, getWeight(), "weight");
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(verifySameTypes(*this, getGrad(), getInput(), "grad")) ||
      failed(verifySameTypes(*this, getInputGrad(), getInput(), "input_grad")) ||
      failed(verifySameTypes(*this, getWeightGrad(), getWeight(), "weight_grad")) ||
      failed(verifySameTypes(*this, getBiasGrad(), getWeight(), "bias_grad")))
    return failure();
  return verifyChannelVector(*this, getWeight(), "weight");
}

/// The gates mt.glu takes.
static LogicalResult verifyGate(Operation *op, StringRef activation) {
  if (!llvm::is_contained({"silu", "gelu", "gelu_tanh"}, activation))
    return op->emitOpError("unknown gate activation \"")
           << activation << "\" (silu, gelu or gelu_tanh)";
  return success();
}

LogicalResult GluOp::verify() { return verifyGate(*this, getActivation()); }

LogicalResult GluGradOp::verify() { return verifyGate(*this, getActivation()); }

LogicalResult ActivationGradOp::verify() {
  if (!llvm::is_contained({"gelu", "gelu_tanh", "silu", "relu", "erf", "sigmoid", "tanh"},
                          getActivation()))
    return emitOpError("unknown activation \"") << getActivation() << "\"";
  return success();
}

LogicalResult RopeGradOp::verify() {
  for (Value table : {getCos(), getSin()})
    if (!broadcastsTo(shapeOf(table), shapeOf(getGrad())))
      return emitOpError("cos/sin ") << formatShape(shapeOf(table))
                                     << " do not broadcast to the grad";
  return verifySameTypes(*this, getResult(), getGrad(), "result");
}

LogicalResult AttentionGradOp::verify() {
  FailureOr<Shape> out =
      attentionShape(shapeOf(getQuery()), shapeOf(getKey()), shapeOf(getValue()), getCausal(),
                     getSequenceMajor(), [&] { return emitOpError(); });
  if (failed(out) || failed(verifyKeySpan(*this, getKeySpan(), getQuery())) ||
      failed(verifyWindowAndCap(*this, getCausal(), getWindowAttr(), getSoftcapAttr())))
    return failure();
  if (shapeOf(getGrad()) != llvm::ArrayRef<int64_t>(*out))
    return emitOpError("grad shape ") << formatShape(shapeOf(getGrad())) << " should be "
                                      << formatShape(*out);
  if (getOutput().getType() != getGrad().getType())
    return emitOpError("output ") << getOutput().getType() << " should have the grad's type "
                                  << getGrad().getType();
  if (failed(verifyLse(*this, getLse(), getQuery(), getKey(), getValue(), getCausal(),
                       getSequenceMajor())) ||
      failed(verifySameTypes(*this, getQueryGrad(), getQuery(), "query_grad")) ||
      failed(verifySameTypes(*this, getKeyGrad(), getKey(), "key_grad")))
    return failure();
  return verifySameTypes(*this, getValueGrad(), getValue(), "value_grad");
}

LogicalResult ReduceMaxGradOp::verify() {
  FailureOr<Shape> reduced = reduceShape(shapeOf(getInput()), getAxes(), getKeepdims(),
                                         [&] { return emitOpError(); });
  if (failed(reduced))
    return failure();
  if (shapeOf(getGrad()) != llvm::ArrayRef<int64_t>(*reduced))
    return emitOpError("grad shape ") << formatShape(shapeOf(getGrad())) << " should be "
                                      << formatShape(*reduced);
  return verifySameTypes(*this, getResult(), getInput(), "result");
}

LogicalResult SoftmaxGradOp::verify() {
  if (getAxis() < 0 || getAxis() >= getType().getRank())
    return emitOpError("axis ") << getAxis() << " is out of range";
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  llvm::ArrayRef<int64_t> logits = shapeOf(getLogits());
  if (logits.empty() || logits.drop_back() != shapeOf(getTargets()))
    return emitOpError("targets must be the logits' shape without the vocabulary axis");
  if (!shapeOf(getGrad()).empty())
    return emitOpError("grad must be a scalar");
  return verifySameTypes(*this, getResult(), getLogits(), "result");
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(verifyLinearLoss(*this, getInput(), getWeight(), getTargets(), getTransposeWeight(),
                              getChunk())))
    return failure();
  if (!shapeOf(getGrad()).empty())
    return emitOpError("grad must be a scalar");
  if (failed(verifySameTypes(*this, getInputGrad(), getInput(), "input_grad")))
    return failure();
  return verifySameTypes(*this, getWeightGrad(), getWeight(), "weight_grad");
}

LogicalResult ScatterAddOp::verify() {
  FailureOr<Shape> gathered = gatherShape(getType().getShape(), shapeOf(getIndices()),
                                          getAxis(), [&] { return emitOpError(); });
  if (failed(gathered))
    return failure();
  if (shapeOf(getGrad()) != llvm::ArrayRef<int64_t>(*gathered))
    return emitOpError("grad shape ") << formatShape(shapeOf(getGrad())) << " should be "
                                      << formatShape(*gathered);
  return verifySameElementType(*this, {getGrad()});
}

LogicalResult PadOp::verify() {
  FailureOr<Shape> window = sliceShape(getType().getShape(), getStarts(), getLimits(),
                                       getStrides(), [&] { return emitOpError(); });
  if (failed(window))
    return failure();
  if (shapeOf(getInput()) != llvm::ArrayRef<int64_t>(*window))
    return emitOpError("input shape ") << formatShape(shapeOf(getInput()))
                                       << " should be the window's " << formatShape(*window);
  return verifySameElementType(*this, {getInput()});
}

//===----------------------------------------------------------------------===//
// Schedule
//===----------------------------------------------------------------------===//

namespace {

/// A copy's results are its operands' types, then a token.
LogicalResult verifyCopy(Operation *op, StringRef kind) {
  if (op->getNumResults() != op->getNumOperands() + 1)
    return op->emitOpError("has ") << op->getNumResults() << " results for "
                                   << op->getNumOperands() << " operands (one each and a token)";
  for (auto [operand, result] : llvm::zip(op->getOperandTypes(), op->getResultTypes()))
    if (operand != result)
      return op->emitOpError("copies ") << operand << " into " << result;
  if (!llvm::is_contained({"weights", "checkpoint", "gradients"}, kind))
    return op->emitOpError("kind must be weights, checkpoint or gradients, got ") << kind;
  return success();
}

} // namespace

LogicalResult PrefetchOp::verify() {
  if (getPersistent() && getKind() != "weights")
    return emitOpError("keeps only weights persistent, not ") << getKind();
  return verifyCopy(*this, getKind());
}
LogicalResult OffloadOp::verify() { return verifyCopy(*this, getKind()); }

LogicalResult AwaitOp::inferReturnTypes(MLIRContext *, std::optional<Location>, ValueRange operands,
                                        DictionaryAttr, OpaqueProperties, RegionRange,
                                        llvm::SmallVectorImpl<Type> &results) {
  for (Value value : operands.drop_front())
    results.push_back(value.getType());
  return success();
}

LogicalResult AwaitOp::verify() {
  Operation *copy = getToken().getDefiningOp();
  if (!llvm::isa_and_nonnull<PrefetchOp, OffloadOp>(copy))
    return emitOpError("awaits a token that no mt.prefetch or mt.offload made");
  if (getValues().empty())
    return emitOpError("awaits no values");
  for (auto [i, value] : llvm::enumerate(getValues()))
    if (value.getDefiningOp() != copy)
      return emitOpError("value ") << i << " is not a result of the copy that made its token";
  return success();
}

#define GET_OP_CLASSES
#include "ir/MtOps.cpp.inc"
