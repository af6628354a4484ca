// mt-raise-layer-norm: the LayerNorm chain of opsets before 17 becomes mt.layer_norm.
//
//   %m = mt.reduce_mean %x axes = [2] keepdims ; %d = mt.sub %x, %m
//   %q = mt.pow %d, %two ; %v = mt.reduce_mean %q axes = [2] keepdims
//   %s = mt.sqrt (mt.add %v, %eps) ; %n = mt.div %d, %s
//   %y = mt.add (mt.mul %n, %w), %b
// becomes
//   %y = mt.layer_norm %x, %w, %b epsilon = 1.0e-05 : (...) -> tensor<2x16x32xf32>
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#define DEBUG_TYPE "mt-raise-layer-norm"

namespace mt {
#define GEN_PASS_DEF_RAISELAYERNORMPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// The normalization times its weight; the bias joins in the next pattern.
struct LayerNormChain : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    std::optional<WeightedNormalization> norm = matchWeightedNormalization(mul);
    auto sub = norm ? norm->input.getDefiningOp<SubOp>() : SubOp();
    if (sub && meanOverLastAxis(sub.getRhs()) == sub.getLhs() &&
        sub.getLhs().getType() == mul.getType()) {
      rewriter.replaceOpWithNewOp<LayerNormOp>(mul, mul.getType(), sub.getLhs(), norm->weight,
                                               Value(), rewriter.getF64FloatAttr(norm->epsilon));
      return success();
    }
    return rewriter.notifyMatchFailure(mul, "not (x - mean) / sqrt(var + eps) * weight");
  }
};

struct BiasAfterLayerNorm : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (bool swapped : {false, true}) {
      auto [normalized, bias] = operandOrder(add, swapped);
      auto norm = normalized.getDefiningOp<LayerNormOp>();
      if (!norm || norm.getBias() || !norm->hasOneUse() ||
          !isChannelVector(bias, lastDim(norm)) || add.getType() != norm.getType())
        continue;
      rewriter.replaceOpWithNewOp<LayerNormOp>(add, add.getType(), norm.getInput(),
                                               norm.getWeight(), bias, norm.getEpsilonAttr());
      return success();
    }
    return rewriter.notifyMatchFailure(add, "not a bias added to a layer_norm");
  }
};

struct RaiseLayerNormPass : mt::impl::RaiseLayerNormPassBase<RaiseLayerNormPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<LayerNormChain, BiasAfterLayerNorm>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
