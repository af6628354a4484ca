// mt-assign-buffers: one device arena for the step, offsets by liveness, first fit.
//
//   %y = call @layer_0(%x, %w...)
// becomes
//   %y = call @layer_0(%x, %w...) {mt.offsets = array<i64: 1024>, mt.workspace = array<i64: 4096, 65536>}
#include "passes/BufferLiveness.h"
#include "passes/Passes.h"

#include "llvm/Support/Debug.h"

#include <map>

#define DEBUG_TYPE "mt-assign-buffers"

namespace mt {
#define GEN_PASS_DEF_ASSIGNBUFFERSPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

constexpr int64_t kAlignment = 256;

/// Free ranges of the arena, kept merged; the arena grows at its end when nothing fits.
class Arena {
public:
  int64_t allocate(int64_t bytes) {
    bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    for (auto it = free.begin(); it != free.end(); ++it) {
      auto [offset, size] = *it;
      if (size < bytes)
        continue;
      free.erase(it);
      if (size > bytes)
        free[offset + bytes] = size - bytes;
      return offset;
    }
    // Extend a free range that ends at the top instead of leaving it unused.
    int64_t offset = top;
    if (!free.empty() && free.rbegin()->first + free.rbegin()->second == top) {
      offset = free.rbegin()->first;
      free.erase(std::prev(free.end()));
    }
    top = offset + bytes;
    return offset;
  }
  void release(int64_t offset, int64_t bytes) {
    bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    auto [it, inserted] = free.emplace(offset, bytes);
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }
  int64_t size() const { return top; }

private:
  std::map<int64_t, int64_t> free;
  int64_t top = 0;
};

struct AssignBuffersPass : mt::impl::AssignBuffersPassBase<AssignBuffersPass> {
  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      getOperation().emitError("mt-assign-buffers needs @train_step; run mt-train first");
      return signalPassFailure();
    }
    BufferLiveness liveness = analyzeBuffers(step);
    Arena arena;
    // Buffers are born in program order (their `first`); each dies after its `last` op.
    std::multimap<size_t, DeviceBuffer *> dying;
    size_t next = 0;
    for (size_t i = 0; i < liveness.ops.size(); ++i) {
      for (; next < liveness.buffers.size() && liveness.buffers[next].first == i; ++next) {
        DeviceBuffer &buffer = liveness.buffers[next];
        buffer.offset = arena.allocate(buffer.bytes);
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
        buffer.op->setAttr("mt.workspace", b.getDenseI64ArrayAttr({buffer.offset, buffer.bytes}));
        continue;
      }
      auto &[offsets, sizes] = placed[buffer.op];
      offsets.resize(buffer.op->getNumResults(), -1);
      sizes.resize(buffer.op->getNumResults(), 0);
      offsets[buffer.resultIndex] = buffer.offset;
      sizes[buffer.resultIndex] = buffer.bytes;
    }
    for (auto &[op, offsetsAndSizes] : placed) {
      op->setAttr("mt.offsets", b.getDenseI64ArrayAttr(offsetsAndSizes.first));
      op->setAttr("mt.sizes", b.getDenseI64ArrayAttr(offsetsAndSizes.second));
    }
    step->setAttr("mt.arena_bytes", b.getI64IntegerAttr(arena.size()));
    LLVM_DEBUG(llvm::dbgs() << liveness.buffers.size() << " buffers in " << arena.size()
                            << " bytes\n");
  }
};

} // namespace
