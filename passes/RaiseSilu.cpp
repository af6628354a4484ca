// mt-raise-silu: x * sigmoid(x) becomes mt.silu.
//
//   %s = mt.sigmoid %x : tensor<2x16x64xf32>
//   %y = mt.mul %x, %s : (...) -> tensor<2x16x64xf32>
// becomes
//   %y = mt.silu %x : tensor<2x16x64xf32>
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#define DEBUG_TYPE "mt-raise-silu"

namespace mt {
#define GEN_PASS_DEF_RAISESILUPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

struct SigmoidGate : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    for (bool swapped : {false, true}) {
      auto [x, gate] = operandOrder(mul, swapped);
      auto sigmoid = gate.getDefiningOp<SigmoidOp>();
      if (sigmoid && sigmoid.getInput() == x && x.getType() == mul.getType()) {
        rewriter.replaceOpWithNewOp<SiluOp>(mul, x);
        return success();
      }
    }
    return rewriter.notifyMatchFailure(mul, "not x * sigmoid(x)");
  }
};

struct RaiseSiluPass : mt::impl::RaiseSiluPassBase<RaiseSiluPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<SigmoidGate>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
