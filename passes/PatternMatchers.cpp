// Matchers shared by the raising passes.
#include "passes/PatternMatchers.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace mt {

std::optional<double> scalarConstant(Value value) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  if (llvm::isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (llvm::isa<IntegerType>(attr.getElementType()))
    return static_cast<double>(attr.getSplatValue<APInt>().getSExtValue());
  return std::nullopt;
}

bool isScalarConstant(Value value, double expected) {
  std::optional<double> actual = scalarConstant(value);
  return actual && std::abs(*actual - expected) <= 1e-3 * std::abs(expected);
}

bool isChannelVector(Value value, int64_t size) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  return type.getRank() == 1 && type.getDimSize(0) == size;
}

int64_t lastDim(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape().back();
}

Value meanOverLastAxis(Value value) {
  auto mean = value ? value.getDefiningOp<ReduceMeanOp>() : ReduceMeanOp();
  if (!mean || !mean.getKeepdims())
    return nullptr;
  int64_t last = mean.getInput().getType().getRank() - 1;
  if (mean.getAxes() != llvm::ArrayRef<int64_t>{last})
    return nullptr;
  return mean.getInput();
}

Value squareOf(Value value) {
  if (!value)
    return nullptr;
  if (auto pow = value.getDefiningOp<PowOp>())
    return isScalarConstant(pow.getRhs(), 2.0) ? pow.getLhs() : nullptr;
  if (auto mul = value.getDefiningOp<MulOp>())
    return mul.getLhs() == mul.getRhs() ? mul.getLhs() : nullptr;
  return nullptr;
}

Value reciprocalSqrtOf(Value value) {
  if (auto rsqrt = value.getDefiningOp<RsqrtOp>())
    return rsqrt.getInput();
  Value root;
  if (auto reciprocal = value.getDefiningOp<ReciprocalOp>())
    root = reciprocal.getInput();
  else if (auto div = value.getDefiningOp<DivOp>(); div && isScalarConstant(div.getLhs(), 1.0))
    root = div.getRhs();
  auto sqrt = root ? root.getDefiningOp<SqrtOp>() : SqrtOp();
  return sqrt ? sqrt.getInput() : nullptr;
}

std::optional<std::pair<Value, Value>> divisionBySqrt(Value value) {
  if (auto div = value.getDefiningOp<DivOp>()) {
    if (auto sqrt = div.getRhs().getDefiningOp<SqrtOp>())
      return std::make_pair(div.getLhs(), sqrt.getInput());
    return std::nullopt;
  }
  auto mul = value.getDefiningOp<MulOp>();
  if (!mul)
    return std::nullopt;
  for (bool swapped : {false, true}) {
    auto [x, factor] = operandOrder(mul, swapped);
    if (Value v = reciprocalSqrtOf(factor))
      return std::make_pair(x, v);
  }
  return std::nullopt;
}

std::optional<std::pair<Value, double>> plusEpsilon(Value value) {
  auto add = value.getDefiningOp<AddOp>();
  if (!add)
    return std::nullopt;
  for (bool swapped : {false, true}) {
    auto [m, eps] = operandOrder(add, swapped);
    // A negative epsilon is no norm's: it could make the root's argument negative.
    if (std::optional<double> epsilon = scalarConstant(eps); epsilon && *epsilon >= 0)
      return std::make_pair(m, *epsilon);
  }
  return std::nullopt;
}

std::optional<WeightedNormalization> matchWeightedNormalization(MulOp mul) {
  // A product of scalars has no last axis to normalize over.
  if (mul.getType().getRank() == 0)
    return std::nullopt;
  for (bool swapped : {false, true}) {
    auto [weight, normalized] = operandOrder(mul, swapped);
    if (!isChannelVector(weight, lastDim(mul)))
      continue;
    std::optional<std::pair<Value, Value>> division = divisionBySqrt(normalized);
    if (!division)
      continue;
    auto [input, variance] = *division;
    std::optional<std::pair<Value, double>> sum = plusEpsilon(variance);
    if (sum && squareOf(meanOverLastAxis(sum->first)) == input)
      return WeightedNormalization{weight, input, sum->second};
  }
  return std::nullopt;
}

} // namespace mt
