// The shape rules (tensor/Shapes) as MLIR diagnostics, for the ONNX frontend and the op
// verifiers.
#include "ir/ShapeRules.h"

#include "tensor/Shapes.h"

using namespace mlir;

namespace mt {

namespace {

/// The rule's result, or its error reported at the caller's location.
FailureOr<Shape> reported(const std::string &error, const shapes::Dims &result,
                          EmitError emitError) {
  if (!error.empty()) {
    emitError() << error;
    return failure();
  }
  return Shape(result.begin(), result.end());
}

} // namespace

std::string formatShape(llvm::ArrayRef<int64_t> shape) { return shapes::format(shape); }

int64_t numElements(llvm::ArrayRef<int64_t> shape) { return shapes::elements(shape); }

FailureOr<Shape> broadcastShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                                EmitError emitError) {
  shapes::Dims result;
  return reported(shapes::broadcast(lhs, rhs, result), result, emitError);
}

bool broadcastsTo(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> target) {
  return shapes::broadcastsTo(input, target);
}

FailureOr<Shape> matmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                             bool transposeLhs, bool transposeRhs, EmitError emitError) {
  shapes::Dims result;
  return reported(shapes::matmul(lhs, rhs, transposeLhs, transposeRhs, result), result, emitError);
}

FailureOr<Shape> linearShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> weight,
                             std::optional<llvm::ArrayRef<int64_t>> bias, bool transposeWeight,
                             EmitError emitError) {
  shapes::Dims result;
  shapes::DimsRef biasDims = bias ? shapes::DimsRef(*bias) : shapes::DimsRef();
  return reported(
      shapes::linear(input, weight, bias ? &biasDims : nullptr, transposeWeight, result), result,
      emitError);
}

FailureOr<Shape> reduceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> axes,
                             bool keepDims, EmitError emitError) {
  shapes::Dims result;
  return reported(shapes::reduce(input, axes, keepDims, result), result, emitError);
}

FailureOr<Shape> transposeShape(llvm::ArrayRef<int64_t> input,
                                llvm::ArrayRef<int64_t> permutation, EmitError emitError) {
  shapes::Dims result;
  return reported(shapes::transpose(input, permutation, result), result, emitError);
}

FailureOr<Shape> sliceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> starts,
                            llvm::ArrayRef<int64_t> limits, llvm::ArrayRef<int64_t> strides,
                            EmitError emitError) {
  shapes::Dims result;
  return reported(shapes::slice(input, starts, limits, strides, result), result, emitError);
}

FailureOr<Shape> concatShape(llvm::ArrayRef<Shape> inputs, int64_t axis, EmitError emitError) {
  std::vector<shapes::DimsRef> dims(inputs.begin(), inputs.end());
  shapes::Dims result;
  return reported(shapes::concat(dims, axis, result), result, emitError);
}

FailureOr<Shape> gatherShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> indices,
                             int64_t axis, EmitError emitError) {
  shapes::Dims result;
  return reported(shapes::gather(input, indices, axis, result), result, emitError);
}

FailureOr<Shape> attentionShape(llvm::ArrayRef<int64_t> query, llvm::ArrayRef<int64_t> key,
                                llvm::ArrayRef<int64_t> value, bool causal, bool sequenceMajor,
                                EmitError emitError) {
  shapes::AttentionExtents e{};
  std::string error = shapes::attention(query, key, value, causal, sequenceMajor, e);
  return reported(error, error.empty() ? e.resultShape() : shapes::Dims{}, emitError);
}

} // namespace mt
