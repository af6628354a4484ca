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
    if (auto step = getOperation().lookupSymbol<func::FuncOp>("train_step"); step && interval > 1)
      recomputeBlocks(step);
  }

  /// Recomputes each block of `interval` layers from its first input before its backward.
  void recomputeBlocks(func::FuncOp step) {
    // Calls by the layer input they read: a layer's forward and its backward read the same
    // value, and consecutive layers of one micro-batch chain through it.
    llvm::DenseMap<Value, func::CallOp> forwardByInput, backwardByInput;
    llvm::SmallVector<func::CallOp> blockStarts;
    step.walk([&](func::CallOp call) {
      auto layer = call->getAttrOfType<IntegerAttr>("mt.layer");
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (!layer || !callee)
        return;
      if (callee->hasAttr("mt.backward_of")) {
        backwardByInput[call.getOperand(0)] = call;
        return;
      }
      forwardByInput[call.getOperand(0)] = call;
      if (layer.getInt() % interval == 0)
        blockStarts.push_back(call);
    });
    OpBuilder b(&getContext());
    for (func::CallOp start : blockStarts) {
      llvm::SmallVector<func::CallOp> block{start};
      while (static_cast<int64_t>(block.size()) < interval)
        if (func::CallOp next = forwardByInput.lookup(block.back().getResult(0)))
          block.push_back(next);
        else
          break;
      func::CallOp lastBackward = backwardByInput.lookup(block.back().getOperand(0));
      if (block.size() < 2 || !lastBackward)
        continue;
      // The block's forward again, from its first input, just before its backward starts.
      b.setInsertionPoint(lastBackward);
      Value input = start.getOperand(0);
      for (size_t j = 0; j + 1 < block.size(); ++j) {
        auto callee =
            SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(block[j], block[j].getCalleeAttr());
        if (callee && callee->hasAttr("mt.saves_activations")) {
          // A layer that keeps its activations is not recomputed: its output, kept from the
          // forward, is the next layer's input (one more checkpoint).
          input = block[j].getResult(0);
        } else {
          auto again = llvm::cast<func::CallOp>(b.clone(*block[j]));
          again.setOperand(0, input);
          again->setAttr("mt.recompute", b.getUnitAttr());
          input = again.getResult(0);
        }
        if (func::CallOp backward = backwardByInput.lookup(block[j + 1].getOperand(0)))
          backward.setOperand(0, input);
      }
    }
  }
};

} // namespace
