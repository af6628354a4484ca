// mt-assign-streams: h2d, compute and d2h streams for the step's commands, and the fewest
// events that order them.
//
//   %w:2, %t = mt.prefetch ...      ->  ... {mt.stream = "h2d", mt.record = 0}
//   %y = call @layer_0(%x, %w#0...)  ->  ... {mt.stream = "compute", mt.wait = array<i64: 0>}
#include "passes/BufferLiveness.h"
#include "passes/Passes.h"

#include "ir/MtOps.h"

#include <array>

#define DEBUG_TYPE "mt-assign-streams"

namespace mt {
#define GEN_PASS_DEF_ASSIGNSTREAMSPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

enum Stream { H2D, Compute, D2H, NoStream };
constexpr std::array<const char *, 3> kStreamNames = {"h2d", "compute", "d2h"};

Stream streamOf(Operation *op) {
  if (llvm::isa<PrefetchOp>(op))
    return H2D;
  if (llvm::isa<OffloadOp>(op))
    return D2H;
  if (llvm::isa<ParamOp, ConstantOp, func::ReturnOp>(op))
    return NoStream; // host state and constants are there before the step starts
  if (llvm::isa<AwaitOp>(op))
    return NoStream; // it runs nothing: its readers wait for the copy of its token
  return Compute;
}

/// What each stream knows has finished on every stream: the last position (in that stream's
/// order) it has waited for, directly or through another wait.
using Clock = std::array<int64_t, 3>;

struct AssignStreamsPass : mt::impl::AssignStreamsPassBase<AssignStreamsPass> {
  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      getOperation().emitError("mt-assign-streams needs @train_step; run mt-train first");
      return signalPassFailure();
    }
    BufferLiveness liveness = analyzeBuffers(step);
    llvm::DenseMap<Operation *, size_t> position;
    for (auto [i, op] : llvm::enumerate(liveness.ops))
      position[op] = i;
    if (failed(readOffsets(liveness)))
      return signalPassFailure();

    // Dependencies: the producers of what an op reads (of an awaited value, the copy of the
    // token), and for every buffer it writes, the producer and readers of each earlier tensor
    // that occupied those bytes.
    std::vector<llvm::SmallVector<Operation *>> dependencies(liveness.ops.size());
    for (auto [i, op] : llvm::enumerate(liveness.ops))
      for (Value operand : op->getOperands())
        if (Operation *producer = operand.getDefiningOp()) {
          if (auto await = llvm::dyn_cast<AwaitOp>(producer))
            producer = await.getToken().getDefiningOp();
          dependencies[i].push_back(producer);
        }
    for (size_t b = 0; b < liveness.buffers.size(); ++b) {
      const DeviceBuffer &buffer = liveness.buffers[b];
      for (size_t a = 0; a < b; ++a) {
        const DeviceBuffer &earlier = liveness.buffers[a];
        bool overlaps = earlier.offset < buffer.offset + buffer.bytes &&
                        buffer.offset < earlier.offset + earlier.bytes;
        if (!overlaps || earlier.last >= buffer.first)
          continue;
        auto &deps = dependencies[buffer.first];
        deps.push_back(earlier.op);
        if (earlier.resultIndex >= 0)
          for (Operation *reader : readersOf(earlier.op->getResult(earlier.resultIndex)))
            deps.push_back(reader);
      }
    }

    Builder b(&getContext());
    std::array<int64_t, 3> count = {0, 0, 0};
    std::array<Clock, 3> known;
    for (Clock &clock : known)
      clock.fill(-1);
    llvm::DenseMap<Operation *, int64_t> sequence, event;
    llvm::DenseMap<Operation *, Clock> clockAfter;
    int64_t events = 0;
    for (auto [i, op] : llvm::enumerate(liveness.ops)) {
      Stream stream = streamOf(op);
      if (stream == NoStream)
        continue;
      // The latest dependency on each other stream covers the earlier ones there.
      std::array<Operation *, 3> latest = {nullptr, nullptr, nullptr};
      for (Operation *dep : dependencies[i]) {
        Stream other = streamOf(dep);
        if (other == NoStream || other == stream || !sequence.count(dep))
          continue;
        if (!latest[other] || sequence[dep] > sequence[latest[other]])
          latest[other] = dep;
      }
      llvm::SmallVector<int64_t> waits;
      for (Operation *dep : latest) {
        if (!dep || known[stream][streamOf(dep)] >= sequence[dep])
          continue;
        auto [it, inserted] = event.try_emplace(dep, events);
        if (inserted) {
          scheduleAttrs(dep).getRecordAttrHelper().setAttr(dep, b.getI64IntegerAttr(events));
          ++events;
        }
        waits.push_back(it->second);
        for (int s = 0; s < 3; ++s)
          known[stream][s] = std::max(known[stream][s], clockAfter[dep][s]);
      }
      sequence[op] = count[stream]++;
      known[stream][stream] = sequence[op];
      clockAfter[op] = known[stream];
      scheduleAttrs(op).getStreamAttrHelper().setAttr(op, b.getStringAttr(kStreamNames[stream]));
      if (!waits.empty())
        scheduleAttrs(op).getWaitAttrHelper().setAttr(op, b.getDenseI64ArrayAttr(waits));
    }
    scheduleAttrs(step).getEventsAttrHelper().setAttr(step, b.getI64IntegerAttr(events));
  }

  /// The offsets mt-assign-buffers wrote, back onto the buffers.
  LogicalResult readOffsets(BufferLiveness &liveness) {
    for (DeviceBuffer &buffer : liveness.buffers) {
      if (buffer.resultIndex < 0) {
        auto workspace = scheduleAttrs(buffer.op).getWorkspaceAttrHelper().getAttr(buffer.op);
        if (!workspace)
          return buffer.op->emitOpError("has no mt.workspace; run mt-assign-buffers first");
        buffer.offset = workspace[0];
        continue;
      }
      auto offsets = scheduleAttrs(buffer.op).getOffsetsAttrHelper().getAttr(buffer.op);
      if (!offsets)
        return buffer.op->emitOpError("has no mt.offsets; run mt-assign-buffers first");
      buffer.offset = offsets[buffer.resultIndex];
    }
    return success();
  }
};

} // namespace
