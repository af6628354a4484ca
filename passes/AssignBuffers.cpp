// mt-assign-buffers: one device arena for the step, offsets by liveness, first fit.
//
//   %y = call @layer_0(%x, %w...)
// becomes
//   %y = call @layer_0(%x, %w...) {mt.offsets = array<i64: 1024>, mt.workspace = array<i64: 4096, 65536>}
#include "ir/MtOps.h"
#include "passes/BufferLiveness.h"
#include "passes/Passes.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "mt-assign-buffers"

namespace mt {
#define GEN_PASS_DEF_ASSIGNBUFFERSPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// A buffer whose last reader is an offload lives on until the next offload is issued, so
/// the copy (on the d2h stream) overlaps the compute between them; reused at once, its bytes
/// would make their next tensor's op wait for the copy.
void keepThroughOffloads(BufferLiveness &liveness) {
  std::vector<size_t> nextOffload(liveness.ops.size(), 0);
  size_t next = 0; // 0: none (an offload is never the step's first op)
  for (size_t i = liveness.ops.size(); i-- > 0;) {
    nextOffload[i] = next;
    if (llvm::isa<OffloadOp>(liveness.ops[i]))
      next = i;
  }
  for (DeviceBuffer &buffer : liveness.buffers)
    if (buffer.resultIndex >= 0 && llvm::isa<OffloadOp>(liveness.ops[buffer.last]) &&
        nextOffload[buffer.last] > 0)
      buffer.last = nextOffload[buffer.last];
}

struct AssignBuffersPass : mt::impl::AssignBuffersPassBase<AssignBuffersPass> {
  using AssignBuffersPassBase::AssignBuffersPassBase;

  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      getOperation().emitError("mt-assign-buffers needs @train_step; run mt-train first");
      return signalPassFailure();
    }
    BufferLiveness liveness = analyzeBuffers(step);
    if (overlapOffloads)
      keepThroughOffloads(liveness);
    DeviceArena arena;
    // Buffers are born in program order (their `first`); each dies after its `last` op.
    std::multimap<size_t, DeviceBuffer *> dying;
    llvm::DenseMap<Value, DeviceBuffer *> bufferOf;
    // A result summed into a tensor that nothing else reads (a gradient accumulated over
    // micro-batches) takes that tensor's buffer over: no other reader, on this op or on
    // another stream, can see it overwritten.
    auto takeOver = [&](DeviceBuffer &buffer) {
      if (buffer.resultIndex < 0)
        return false;
      Value into = accumulatorOf(buffer.op->getResult(buffer.resultIndex));
      DeviceBuffer *from = into && into.hasOneUse() ? bufferOf.lookup(into) : nullptr;
      if (!from || from->bytes != buffer.bytes)
        return false;
      auto [begin, end] = dying.equal_range(buffer.first);
      for (auto it = begin; it != end; ++it)
        if (it->second == from) {
          dying.erase(it);
          buffer.offset = from->offset;
          return true;
        }
      return false;
    };
    size_t next = 0;
    for (size_t i = 0; i < liveness.ops.size(); ++i) {
      for (; next < liveness.buffers.size() && liveness.buffers[next].first == i; ++next) {
        DeviceBuffer &buffer = liveness.buffers[next];
        if (!takeOver(buffer))
          buffer.offset = arena.allocate(buffer.bytes);
        if (buffer.resultIndex >= 0)
          bufferOf[buffer.op->getResult(buffer.resultIndex)] = &buffer;
        dying.emplace(buffer.last, &buffer);
      }
      auto [begin, end] = dying.equal_range(i);
      for (auto it = begin; it != end; ++it)
        arena.release(it->second->offset, it->second->bytes);
      dying.erase(begin, end);
    }

    Builder b(&getContext());
    llvm::DenseMap<Operation *, std::pair<llvm::SmallVector<int64_t>, llvm::SmallVector<int64_t>>>
        placed;
    for (const DeviceBuffer &buffer : liveness.buffers) {
      if (buffer.resultIndex < 0) {
        scheduleAttrs(buffer.op).getWorkspaceAttrHelper().setAttr(
            buffer.op, b.getDenseI64ArrayAttr({buffer.offset, buffer.bytes}));
        continue;
      }
      auto &[offsets, sizes] = placed[buffer.op];
      offsets.resize(buffer.op->getNumResults(), -1);
      sizes.resize(buffer.op->getNumResults(), 0);
      offsets[buffer.resultIndex] = buffer.offset;
      sizes[buffer.resultIndex] = buffer.bytes;
    }
    for (auto &[op, offsetsAndSizes] : placed) {
      scheduleAttrs(op).getOffsetsAttrHelper().setAttr(
          op, b.getDenseI64ArrayAttr(offsetsAndSizes.first));
      scheduleAttrs(op).getSizesAttrHelper().setAttr(
          op, b.getDenseI64ArrayAttr(offsetsAndSizes.second));
    }
    // Each template's intermediates get offsets inside the workspace of its calls.
    llvm::SmallPtrSet<Operation *, 8> laidOut;
    step.walk([&](func::CallOp call) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (callee && laidOut.insert(callee).second)
        layoutTemplate(callee, /*annotate=*/true);
    });
    step->setAttr("mt.arena_bytes", b.getI64IntegerAttr(arena.size()));
    LLVM_DEBUG(llvm::dbgs() << liveness.buffers.size() << " buffers in " << arena.size()
                            << " bytes\n");
  }
};

} // namespace
