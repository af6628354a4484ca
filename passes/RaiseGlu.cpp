// mt-raise-glu: an activated gate times its up projection becomes mt.glu.
//
//   %a = mt.silu %gate : tensor<2x16x128xf32>
//   %y = mt.mul %a, %up : (...) -> tensor<2x16x128xf32>
// becomes
//   %y = mt.glu "silu" %gate, %up : tensor<2x16x128xf32>
#include "passes/Passes.h"
#include "passes/PatternMatchers.h"

#define DEBUG_TYPE "mt-raise-glu"

namespace mt {
#define GEN_PASS_DEF_RAISEGLUPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// The gate activation mt.glu takes for `value`'s defining op, or "" for another op.
StringRef gateActivation(Value value) {
  if (value.getDefiningOp<SiluOp>())
    return "silu";
  if (auto gelu = value.getDefiningOp<GeluOp>())
    return gelu.getApproximate() == "tanh" ? "gelu_tanh" : "gelu";
  return "";
}

struct GatedProduct : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    for (bool swapped : {false, true}) {
      auto [activated, up] = operandOrder(mul, swapped);
      StringRef activation = gateActivation(activated);
      // Only where the activation feeds this product alone (else it is computed anyway) and
      // nothing broadcasts.
      if (activation.empty() || !activated.hasOneUse() || activated == up ||
          activated.getType() != mul.getType() || up.getType() != mul.getType())
        continue;
      Value gate = activated.getDefiningOp()->getOperand(0);
      rewriter.replaceOpWithNewOp<GluOp>(mul, mul.getType(), activation, gate, up);
      return success();
    }
    return rewriter.notifyMatchFailure(mul, "not activation(gate) * up");
  }
};

struct RaiseGluPass : mt::impl::RaiseGluPassBase<RaiseGluPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<GatedProduct>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
