// mt-raise-linear: matmuls by a parameter, and the bias added after them, become mt.linear.
//
//   %y = mt.matmul %x, %w transpose_rhs : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> ...
//   %z = mt.add %b, %y : (tensor<96xf32>, tensor<2x16x96xf32>) -> tensor<2x16x96xf32>
// becomes
//   %z = mt.linear %x, %w, %b transpose_weight : (...) -> tensor<2x16x96xf32>
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#define DEBUG_TYPE "mt-raise-linear"

namespace mt {
#define GEN_PASS_DEF_RAISELINEARPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

struct MatmulByParameter : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp matmul, PatternRewriter &rewriter) const override {
    auto weight = matmul.getRhs().getDefiningOp<ParamOp>();
    if (!weight || weight.getType().getRank() != 2 || matmul.getTransposeLhs() ||
        matmul.getAddend())
      return rewriter.notifyMatchFailure(matmul, "rhs is not a rank-2 parameter");
    rewriter.replaceOpWithNewOp<LinearOp>(matmul, matmul.getType(), matmul.getLhs(),
                                          matmul.getRhs(), Value(), matmul.getTransposeRhs());
    return success();
  }
};

/// A bias parameter added to a linear without one joins it.
struct BiasAfterLinear : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (bool swapped : {false, true}) {
      auto [product, bias] = operandOrder(add, swapped);
      auto linear = product.getDefiningOp<LinearOp>();
      if (!linear || linear.getBias() || !linear->hasOneUse() ||
          !bias.getDefiningOp<ParamOp>() || !isChannelVector(bias, lastDim(linear)) ||
          add.getType() != linear.getType())
        continue;
      rewriter.replaceOpWithNewOp<LinearOp>(add, add.getType(), linear.getInput(),
                                            linear.getWeight(), bias,
                                            linear.getTransposeWeight());
      return success();
    }
    return rewriter.notifyMatchFailure(add, "not a bias parameter added to a linear");
  }
};

struct RaiseLinearPass : mt::impl::RaiseLinearPassBase<RaiseLinearPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<MatmulByParameter, BiasAfterLinear>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
