// mt-test-print-buffers: the arena placement and stream orders of a step, for FileCheck.
#include "passes/BufferLiveness.h"
#include "passes/Passes.h"

#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "mt-test-print-buffers"

namespace mt {
#define GEN_PASS_DEF_TESTPRINTBUFFERSPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

struct TestPrintBuffersPass : mt::impl::TestPrintBuffersPassBase<TestPrintBuffersPass> {
  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!step)
      return;
    BufferLiveness liveness = analyzeBuffers(step);
    llvm::DenseMap<Operation *, size_t> position;
    for (auto [i, op] : llvm::enumerate(liveness.ops))
      position[op] = i;
    llvm::raw_ostream &os = llvm::outs();
    for (const DeviceBuffer &buffer : liveness.buffers) {
      int64_t offset = -1;
      if (buffer.resultIndex < 0) {
        if (auto workspace = scheduleAttrs(buffer.op).getWorkspaceAttrHelper().getAttr(buffer.op))
          offset = workspace[0];
      } else if (auto offsets =
                     scheduleAttrs(buffer.op).getOffsetsAttrHelper().getAttr(buffer.op)) {
        offset = offsets[buffer.resultIndex];
      }
      os << buffer.op->getName() << "#" << buffer.first << " "
         << (buffer.resultIndex < 0 ? std::string("workspace")
                                    : "result " + std::to_string(buffer.resultIndex))
         << ": offset " << offset << " bytes " << buffer.bytes << " live [" << buffer.first
         << ", " << buffer.last << "]";
      if (auto stream = scheduleAttrs(buffer.op).getStreamAttrHelper().getAttr(buffer.op))
        os << " stream " << stream.getValue();
      os << "\n";
    }
    for (auto [i, op] : llvm::enumerate(liveness.ops)) {
      auto waits = scheduleAttrs(op).getWaitAttrHelper().getAttr(op);
      auto record = scheduleAttrs(op).getRecordAttrHelper().getAttr(op);
      if (!waits && !record)
        continue;
      os << "op#" << i << " " << op->getName();
      if (auto stream = scheduleAttrs(op).getStreamAttrHelper().getAttr(op))
        os << " on " << stream.getValue();
      if (waits) {
        os << " waits";
        for (int64_t id : waits.asArrayRef())
          os << " " << id;
      }
      if (record)
        os << " records " << record.getInt();
      os << "\n";
    }
    if (auto arena = step->getAttrOfType<IntegerAttr>("mt.arena_bytes"))
      os << "arena " << arena.getInt() << " bytes\n";
    if (auto events = scheduleAttrs(step).getEventsAttrHelper().getAttr(step))
      os << "events " << events.getInt() << "\n";
  }
};

} // namespace
