// mt-raise-rms-norm: the RMSNorm chain that exporters write out becomes mt.rms_norm.
//
//   %p = mt.pow %x, %two ; %m = mt.reduce_mean %p axes = [2] keepdims
//   %v = mt.add %m, %eps ; %s = mt.sqrt %v ; %r = mt.div %one, %s
//   %n = mt.mul %x, %r   ; %y = mt.mul %w, %n
// becomes
//   %y = mt.rms_norm %x, %w epsilon = 1.0e-06 : (...) -> tensor<2x16x32xf32>
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#define DEBUG_TYPE "mt-raise-rms-norm"

namespace mt {
#define GEN_PASS_DEF_RAISERMSNORMPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

struct RmsNormChain : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    std::optional<WeightedNormalization> norm = matchWeightedNormalization(mul);
    if (norm && norm->input.getType() == mul.getType()) {
      rewriter.replaceOpWithNewOp<RmsNormOp>(mul, mul.getType(), norm->input, norm->weight,
                                             rewriter.getF64FloatAttr(norm->epsilon));
      return success();
    }
    return rewriter.notifyMatchFailure(mul, "not weight * x * rsqrt(mean(x^2) + eps)");
  }
};

struct RaiseRmsNormPass : mt::impl::RaiseRmsNormPassBase<RaiseRmsNormPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<RmsNormChain>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
