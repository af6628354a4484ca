// mt-recompute: checkpoints every K layers, the block's inner inputs recomputed for the
// backward.
//
//   %x1 = call @layer_0(%x0, ...) {mt.layer = 0}     %x2 = call @layer_0(%x1, ...) {mt.layer = 1}
//   ... call @layer_0_bwd(%x1, ..., %g) {mt.layer = 1}
// becomes, with K = 2,
//   %r1 = call @layer_0(%x0, ...) {mt.layer = 0, mt.recompute}
//   ... call @layer_0_bwd(%r1, ..., %g) {mt.layer = 1}
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "mt-recompute"

namespace mt {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

struct RecomputePass : mt::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    if (interval < 1) {
      getOperation().emitError("mt-recompute: the interval must be at least 1");
      return signalPassFailure();
    }
    auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!step || interval == 1)
      return;
    llvm::DenseMap<int64_t, func::CallOp> forward, backward;
    step.walk([&](func::CallOp call) {
      auto layer = call->getAttrOfType<IntegerAttr>("mt.layer");
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (!layer || !callee)
        return;
      (callee->hasAttr("mt.backward_of") ? backward : forward)[layer.getInt()] = call;
    });
    int64_t layers = forward.size();
    OpBuilder b(&getContext());
    for (int64_t first = 0; first < layers; first += interval) {
      int64_t last = std::min(layers, first + interval) - 1;
      if (first == last || !backward.count(last))
        continue;
      // The block's forward again, from its first input, just before its backward starts.
      b.setInsertionPoint(backward[last]);
      Value input = forward[first].getOperand(0);
      for (int64_t j = first; j < last; ++j) {
        auto again = llvm::cast<func::CallOp>(b.clone(*forward[j]));
        again.setOperand(0, input);
        again->setAttr("mt.recompute", b.getUnitAttr());
        input = again.getResult(0);
        if (backward.count(j + 1))
          backward[j + 1].setOperand(0, input);
      }
    }
  }
};

} // namespace
