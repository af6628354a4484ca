// mt-raise-attention: scaled dot-product attention with a causal mask becomes mt.attention.
//
//   %s = mt.matmul %q, %k transpose_rhs ; %t = mt.mul %s, %scale
//   %u = mt.add %t, %causal_mask ; %p = mt.softmax %u axis = 3
//   %o = mt.matmul %p, %v
// becomes
//   %o = mt.attention %q, %k, %v scale = 0.35355339059327373 causal : (...) -> tensor<2x4x16x8xf32>
// Keys and values repeated for grouped-query heads (reshape [B,Hkv,1,S,D], expand
// [B,Hkv,n,S,D], reshape [B,Hkv*n,S,D]) are traced back to their Hkv heads.
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#include "mlir/IR/Matchers.h"

#define DEBUG_TYPE "mt-raise-attention"

namespace mt {
#define GEN_PASS_DEF_RAISEATTENTIONPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// Masked-out scores: a fill at or below this is -inf for softmax in fp32 and bf16 alike.
constexpr double kMaskedScore = -1e4;

/// The [B, Hkv, S, D] heads that a grouped-query repeat expanded into `value`, else `value`.
Value unrepeatedHeads(Value value) {
  auto merge = value.getDefiningOp<ReshapeOp>();
  auto expand = merge ? merge.getInput().getDefiningOp<ExpandOp>() : ExpandOp();
  auto split = expand ? expand.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!split)
    return value;
  llvm::ArrayRef<int64_t> heads = split.getInput().getType().getShape();
  llvm::ArrayRef<int64_t> expanded = expand.getType().getShape();
  llvm::ArrayRef<int64_t> merged = merge.getType().getShape();
  if (heads.size() != 4 || expanded.size() != 5 || merged.size() != 4 ||
      split.getType().getShape() !=
          llvm::ArrayRef<int64_t>{heads[0], heads[1], 1, heads[2], heads[3]} ||
      expanded[0] != heads[0] || expanded[1] != heads[1] || expanded[3] != heads[2] ||
      expanded[4] != heads[3] || merged[1] != heads[1] * expanded[2])
    return value;
  return split.getInput();
}

/// True when the constant `mask`, broadcast over [..., T, T], holds at (i, j) what
/// `expected(i, j)` accepts everywhere.
bool isTriangular(Value mask, int64_t t,
                  llvm::function_ref<bool(int64_t, int64_t, const APFloat &)> expected) {
  DenseElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)))
    return false;
  llvm::ArrayRef<int64_t> shape = attr.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 1] != t || shape[shape.size() - 2] != t)
    return false;
  int64_t index = 0;
  auto accepts = [&](const APFloat &value) {
    int64_t i = (index / t) % t, j = index % t;
    ++index;
    return expected(i, j, value);
  };
  if (llvm::isa<FloatType>(attr.getElementType()))
    return llvm::all_of(attr.getValues<APFloat>(), accepts);
  return llvm::all_of(attr.getValues<APInt>(),
                      [&](const APInt &v) { return accepts(APFloat(double(!v.isZero()))); });
}

bool isMaskedScore(const APFloat &value) { return value.convertToDouble() <= kMaskedScore; }

/// For scores after a causal mask, the scores before it; null when no causal mask applies.
Value unmaskedScores(Value masked, int64_t t) {
  if (auto add = masked.getDefiningOp<AddOp>()) {
    for (bool swapped : {false, true}) {
      auto [scores, mask] = operandOrder(add, swapped);
      if (isTriangular(mask, t, [](int64_t i, int64_t j, const APFloat &v) {
            return j <= i ? v.isZero() : isMaskedScore(v);
          }))
        return scores;
    }
  }
  auto where = masked.getDefiningOp<WhereOp>();
  if (!where)
    return nullptr;
  // where(keep, scores, fill) with keep on and below the diagonal, or its mirror image.
  for (bool keepFirst : {true, false}) {
    Value scores = keepFirst ? where.getTrueValue() : where.getFalseValue();
    Value fill = keepFirst ? where.getFalseValue() : where.getTrueValue();
    std::optional<double> fillValue = scalarConstant(fill);
    if (fillValue && *fillValue <= kMaskedScore &&
        isTriangular(where.getCondition(), t, [&](int64_t i, int64_t j, const APFloat &v) {
          return (j <= i) == (keepFirst != v.isZero());
        }))
      return scores;
  }
  return nullptr;
}

/// For scores times a scalar (or divided by one), the scores and the factor.
std::pair<Value, double> unscaledScores(Value scaled) {
  if (auto div = scaled.getDefiningOp<DivOp>())
    if (std::optional<double> divisor = scalarConstant(div.getRhs()))
      return {div.getLhs(), 1.0 / *divisor};
  if (auto mul = scaled.getDefiningOp<MulOp>()) {
    for (bool swapped : {false, true}) {
      auto [scores, factor] = operandOrder(mul, swapped);
      if (std::optional<double> scale = scalarConstant(factor))
        return {scores, *scale};
    }
  }
  return {scaled, 1.0};
}

struct SoftmaxAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp output, PatternRewriter &rewriter) const override {
    auto softmax = output.getLhs().getDefiningOp<SoftmaxOp>();
    if (!softmax || output.getTransposeLhs() || output.getTransposeRhs() || output.getAddend() ||
        softmax.getAxis() != softmax.getType().getRank() - 1 || softmax.getType().getRank() != 4)
      return rewriter.notifyMatchFailure(output, "not softmax(scores) @ v over 4-D heads");
    int64_t t = softmax.getType().getShape().back();
    Value scores = softmax.getInput();
    bool causal = false;
    if (Value unmasked = unmaskedScores(scores, t)) {
      scores = unmasked;
      causal = true;
    }
    auto [raw, scale] = unscaledScores(scores);
    auto product = raw.getDefiningOp<MatmulOp>();
    // A mask that is not causal (or any other op on the scores) stops the match here.
    if (!product || product.getTransposeLhs() || !product.getTransposeRhs() || product.getAddend())
      return rewriter.notifyMatchFailure(output, "scores are not q @ k^T (after scale and mask)");
    Value query = product.getLhs();
    Value key = unrepeatedHeads(product.getRhs());
    Value value = unrepeatedHeads(output.getRhs());
    auto shapeOf = [](Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); };
    FailureOr<Shape> shape = attentionShape(shapeOf(query), shapeOf(key), shapeOf(value), causal,
                                            [] { return InFlightDiagnostic(); });
    if (failed(shape) || llvm::ArrayRef<int64_t>(*shape) != output.getType().getShape()) {
      // Repeated heads of different group sizes for k and v: use them as repeated.
      key = product.getRhs();
      value = output.getRhs();
      shape = attentionShape(shapeOf(query), shapeOf(key), shapeOf(value), causal,
                             [] { return InFlightDiagnostic(); });
      if (failed(shape) || llvm::ArrayRef<int64_t>(*shape) != output.getType().getShape())
        return rewriter.notifyMatchFailure(output, "q, k, v shapes do not form attention");
    }
    rewriter.replaceOpWithNewOp<AttentionOp>(output, output.getType(), query, key, value,
                                             rewriter.getF64FloatAttr(scale),
                                             causal ? rewriter.getUnitAttr() : UnitAttr());
    return success();
  }
};

struct RaiseAttentionPass : mt::impl::RaiseAttentionPassBase<RaiseAttentionPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<SoftmaxAttention>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
