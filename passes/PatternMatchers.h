// Matchers shared by the raising passes: scalar constants, channel vectors, commutative
// operand orders, and the driver that applies a pass's patterns.
#ifndef MT_PASSES_PATTERNMATCHERS_H
#define MT_PASSES_PATTERNMATCHERS_H

#include "ir/MtOps.h"
#include "ir/ShapeRules.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <optional>
#include <utility>

namespace mt {

/// The value of a constant holding a single value (a scalar or a splat).
std::optional<double> scalarConstant(mlir::Value value);
/// True when `value` is a single-valued constant within 1e-3 relative of `expected`.
bool isScalarConstant(mlir::Value value, double expected);
/// True when `value` is a rank-1 tensor of `size` elements (a norm weight or a bias).
bool isChannelVector(mlir::Value value, int64_t size);
/// The last-axis size of a ranked tensor value.
int64_t lastDim(mlir::Value value);

/// For a two-operand op, both (operand, other operand) orders, so that a commutative match
/// is written once.
inline std::pair<mlir::Value, mlir::Value> operandOrder(mlir::Operation *op, bool swapped) {
  return swapped ? std::make_pair(op->getOperand(1), op->getOperand(0))
                 : std::make_pair(op->getOperand(0), op->getOperand(1));
}

/// The input of a mean over only the last axis, with keepdims; null otherwise (or for null).
mlir::Value meanOverLastAxis(mlir::Value value);
/// x for a value computed as x ** 2 or x * x; null otherwise (or for null).
mlir::Value squareOf(mlir::Value value);
/// v for a value computed as rsqrt(v), reciprocal(sqrt(v)) or 1 / sqrt(v); null otherwise.
mlir::Value reciprocalSqrtOf(mlir::Value value);
/// For `x / sqrt(v)` or `x * rsqrt(v)` in any spelling, the pair (x, v).
std::optional<std::pair<mlir::Value, mlir::Value>> divisionBySqrt(mlir::Value value);
/// For `m + eps` with a non-negative scalar constant eps (either order), the pair (m, eps).
std::optional<std::pair<mlir::Value, double>> plusEpsilon(mlir::Value value);

/// A weighted normalization over the last axis as exporters write it:
/// weight * (input / sqrt(mean(square(input)) + epsilon)), in any of the spellings above.
/// `input` is x for RMSNorm and x - mean(x) for LayerNorm.
struct WeightedNormalization {
  mlir::Value weight, input;
  double epsilon;
};
/// The chain rooted at `mul`, when its mean of squares is over the same input it divides.
std::optional<WeightedNormalization> matchWeightedNormalization(MulOp mul);

/// Applies the patterns to a fixed point; what a raising pass's runOnOperation does.
template <typename... Patterns>
mlir::LogicalResult applyRaisePatterns(mlir::Operation *root) {
  mlir::RewritePatternSet patterns(root->getContext());
  patterns.add<Patterns...>(root->getContext());
  return mlir::applyPatternsAndFoldGreedily(root, std::move(patterns));
}

} // namespace mt

#endif // MT_PASSES_PATTERNMATCHERS_H
