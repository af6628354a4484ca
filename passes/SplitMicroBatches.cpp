// mt-split-micro-batches: the forward repeated for M micro-batches, op by op, so that each
// layer's calls are adjacent and its weights serve every micro-batch while resident.
//
//   func.func @forward(%ids) -> logits { %x = mt.embedding %t, %ids ... }
// becomes, with M = 2,
//   func.func @forward(%ids0, %ids1) -> (logits0, logits1) {
//     %x0 = mt.embedding %t, %ids0 ; %x1 = mt.embedding %t, %ids1 ... }
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#define DEBUG_TYPE "mt-split-micro-batches"

namespace mt {
#define GEN_PASS_DEF_SPLITMICROBATCHESPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

struct SplitMicroBatchesPass : mt::impl::SplitMicroBatchesPassBase<SplitMicroBatchesPass> {
  using SplitMicroBatchesPassBase::SplitMicroBatchesPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (count < 1 || !forward) {
      module.emitError("mt-split-micro-batches needs @forward and a count of at least 1");
      return signalPassFailure();
    }
    if (count == 1)
      return;
    OpBuilder b(forward);
    unsigned arguments = forward.getNumArguments();
    llvm::SmallVector<Type> inputs, results;
    for (int64_t m = 0; m < count; ++m) {
      inputs.append(forward.getArgumentTypes().begin(), forward.getArgumentTypes().end());
      results.append(forward.getResultTypes().begin(), forward.getResultTypes().end());
    }
    auto split = b.create<func::FuncOp>(forward.getLoc(), "forward",
                                        b.getFunctionType(inputs, results));
    Block *body = split.addEntryBlock();
    llvm::SmallVector<IRMapping> copies(count);
    for (int64_t m = 0; m < count; ++m)
      for (unsigned a = 0; a < arguments; ++a) {
        copies[m].map(forward.getArgument(a), body->getArgument(m * arguments + a));
        auto name = forward.getArgAttrOfType<StringAttr>(a, "mt.name");
        std::string base = name ? name.str() : "input" + std::to_string(a);
        if (DictionaryAttr attributes = forward.getArgAttrDict(a))
          split.setArgAttrs(m * arguments + a, attributes);
        split.setArgAttr(m * arguments + a, "mt.name",
                         b.getStringAttr(base + "." + std::to_string(m)));
      }
    b.setInsertionPointToStart(body);
    llvm::SmallVector<Value> outputs;
    for (Operation &op : forward.getBody().front()) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        for (IRMapping &copy : copies)
          for (Value value : ret.getOperands())
            outputs.push_back(copy.lookup(value));
        continue;
      }
      // Parameters and constants are the same for every micro-batch.
      if (llvm::isa<ParamOp, ConstantOp>(op)) {
        Operation *shared = b.clone(op);
        for (IRMapping &copy : copies)
          copy.map(op.getResults(), shared->getResults());
        continue;
      }
      for (IRMapping &copy : copies)
        b.clone(op, copy);
    }
    b.create<func::ReturnOp>(forward.getLoc(), outputs);
    forward.erase();
  }
};

} // namespace
