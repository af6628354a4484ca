// mt-insert-transfers: the copies of the MegaTrain schedule made explicit in the step.
//
//   %y = call @layer_0(%x, %w...) {mt.layer = 3}
// becomes
//   %d:n, %t = mt.prefetch %w... {kind = "weights", layer = 3}   (two calls earlier)
//   %c, %tc = mt.offload %x {kind = "checkpoint", layer = 3}
//   %y = call @layer_0(%x, %d...) {mt.layer = 3}
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#define DEBUG_TYPE "mt-insert-transfers"

namespace mt {
#define GEN_PASS_DEF_INSERTTRANSFERSPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

int64_t layerOf(Operation *op) {
  auto layer = op->getAttrOfType<IntegerAttr>("mt.layer");
  return layer ? layer.getInt() : -1;
}

/// A copy of `values` of `kind`, built at the builder's insertion point; returns the op.
template <typename CopyOp>
CopyOp createCopy(OpBuilder &b, Location loc, ValueRange values, StringRef kind, int64_t layer) {
  llvm::SmallVector<Type> types(values.getTypes());
  types.push_back(TokenType::get(b.getContext()));
  return b.create<CopyOp>(loc, types, values, b.getStringAttr(kind), b.getI64IntegerAttr(layer));
}

struct InsertTransfersPass : mt::impl::InsertTransfersPassBase<InsertTransfersPass> {
  using InsertTransfersPassBase::InsertTransfersPassBase;

  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      getOperation().emitError("mt-insert-transfers needs @train_step; run mt-train first");
      return signalPassFailure();
    }
    Block &body = step.getBody().front();
    OpBuilder b(&getContext());
    // Copies with nothing to wait for go before the step's first computation, in order.
    Operation *start = firstNonRead(body);
    llvm::SmallVector<func::CallOp> calls;
    for (Operation &op : body)
      if (auto call = llvm::dyn_cast<func::CallOp>(op))
        calls.push_back(call);

    // Checkpoints: a layer input that the backward reads (the backward of that layer, or a
    // recomputation of its block) leaves for host memory once computed; the first backward
    // reader brings it back with its weights and later readers share that copy.
    llvm::DenseSet<Value> streamValues;
    for (func::CallOp call : calls)
      if (!readsCheckpoint(call)) {
        streamValues.insert(call.getOperand(0));
        streamValues.insert(call.getResult(0));
      }
    llvm::MapVector<Value, Value> hostCheckpoint;
    if (!checkpointsOnDevice)
      for (func::CallOp call : calls) {
        Value input = call.getOperand(0);
        if (!readsCheckpoint(call) || !streamValues.contains(input) || hostCheckpoint.count(input))
          continue;
        if (Operation *producer = input.getDefiningOp())
          b.setInsertionPointAfter(producer);
        else
          b.setInsertionPointToStart(&body);
        int64_t layer = -1;
        for (OpOperand &use : input.getUses())
          if (auto reader = llvm::dyn_cast<func::CallOp>(use.getOwner());
              reader && !readsCheckpoint(reader) && use.getOperandNumber() == 0)
            layer = layerOf(reader);
        hostCheckpoint[input] =
            createCopy<OffloadOp>(b, call.getLoc(), input, "checkpoint", layer).getResult(0);
      }
    llvm::DenseMap<Value, Value> reloaded;

    // Weights (and the checkpoint) of call k arrive right after call k - lookahead.
    for (auto [k, call] : llvm::enumerate(calls)) {
      llvm::SmallVector<unsigned> moved;
      llvm::SmallVector<Value> hostValues;
      for (OpOperand &operand : call->getOpOperands())
        if (operand.get().getDefiningOp<ParamOp>()) {
          moved.push_back(operand.getOperandNumber());
          hostValues.push_back(operand.get());
        }
      Value input = call.getOperand(0);
      bool reloadsCheckpoint = readsCheckpoint(call) && hostCheckpoint.count(input) &&
                               !reloaded.count(input);
      if (Value copy = reloaded.lookup(input); copy && readsCheckpoint(call))
        call->setOperand(0, copy);
      if (reloadsCheckpoint) {
        moved.insert(moved.begin(), 0);
        hostValues.insert(hostValues.begin(), hostCheckpoint[input]);
      }
      if (hostValues.empty())
        continue;
      Operation *anchor = k >= static_cast<size_t>(lookahead) ? calls[k - lookahead].getOperation()
                                                                : nullptr;
      // Never before what it copies exists (a checkpoint offloaded late in the forward).
      for (Value value : hostValues)
        if (Operation *producer = value.getDefiningOp();
            producer && !llvm::isa<ParamOp>(producer) &&
            (!anchor || anchor->isBeforeInBlock(producer)))
          anchor = producer;
      if (anchor)
        b.setInsertionPointAfter(anchor);
      else
        b.setInsertionPoint(start);
      auto prefetch = createCopy<PrefetchOp>(b, call.getLoc(), hostValues,
                                             reloadsCheckpoint ? "checkpoint" : "weights",
                                             layerOf(call));
      for (auto [index, number] : llvm::enumerate(moved))
        call->setOperand(number, prefetch.getResult(index));
      if (reloadsCheckpoint)
        reloaded[input] = prefetch.getResult(0);
    }

    // Prologue and epilogue parameters arrive just before their first use.
    for (ParamOp read : llvm::to_vector(step.getOps<ParamOp>())) {
      llvm::SmallVector<OpOperand *> uses;
      for (OpOperand &use : read->getUses())
        if (!llvm::isa<PrefetchOp>(use.getOwner()))
          uses.push_back(&use);
      if (uses.empty())
        continue;
      Operation *first = uses.front()->getOwner();
      for (OpOperand *use : uses)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      b.setInsertionPoint(first);
      auto prefetch = createCopy<PrefetchOp>(b, read.getLoc(), read.getResult(), "weights", -1);
      for (OpOperand *use : uses)
        use->set(prefetch.getResult(0));
    }

    // Gradients leave right after the op that completes them.
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    llvm::MapVector<Operation *, llvm::SmallVector<unsigned>> byProducer;
    for (OpOperand &operand : llvm::drop_begin(ret->getOpOperands()))
      if (Operation *producer = operand.get().getDefiningOp();
          producer && !llvm::isa<ConstantOp>(producer))
        byProducer[producer].push_back(operand.getOperandNumber());
    for (auto &[producer, numbers] : byProducer) {
      llvm::SmallVector<Value> grads;
      for (unsigned number : numbers)
        grads.push_back(ret.getOperand(number));
      b.setInsertionPointAfter(producer);
      auto offload = createCopy<OffloadOp>(b, producer->getLoc(), grads, "gradients",
                                           layerOf(producer));
      for (auto [index, number] : llvm::enumerate(numbers))
        ret->setOperand(number, offload.getResult(index));
    }
  }

  /// Backward calls and recomputed forward calls read layer inputs kept from the forward.
  static bool readsCheckpoint(func::CallOp call) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
    return call->hasAttr("mt.recompute") || (callee && callee->hasAttr("mt.backward_of"));
  }

  /// The first op that is not a parameter read or a constant: where early copies go.
  static Operation *firstNonRead(Block &body) {
    for (Operation &op : body)
      if (!llvm::isa<ParamOp, ConstantOp>(op))
        return &op;
    return body.getTerminator();
  }
};

} // namespace
