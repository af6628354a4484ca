// mt-raise-embedding: gathers of parameter rows by token ids become mt.embedding.
//
//   %t = mt.param @wte : tensor<96x32xf32>
//   %e = mt.gather %t, %ids axis = 0 : (...) -> tensor<2x16x32xf32>
// becomes
//   %e = mt.embedding %t, %ids : (...) -> tensor<2x16x32xf32>
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#define DEBUG_TYPE "mt-raise-embedding"

namespace mt {
#define GEN_PASS_DEF_RAISEEMBEDDINGPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

struct GatherOfParameterRows : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp gather, PatternRewriter &rewriter) const override {
    auto table = gather.getInput().getDefiningOp<ParamOp>();
    if (!table || gather.getAxis() != 0 || table.getType().getRank() != 2)
      return rewriter.notifyMatchFailure(gather, "not a gather of rows of a parameter table");
    rewriter.replaceOpWithNewOp<EmbeddingOp>(gather, gather.getType(), gather.getInput(),
                                             gather.getIndices());
    return success();
  }
};

struct RaiseEmbeddingPass : mt::impl::RaiseEmbeddingPassBase<RaiseEmbeddingPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<GatherOfParameterRows>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
