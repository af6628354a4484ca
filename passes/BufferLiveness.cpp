// Device buffers of a step and their live ranges in program order.
#include "passes/BufferLiveness.h"

#include "ir/MtOps.h"
#include "ir/ShapeRules.h"

using namespace mlir;

namespace mt {

namespace {

/// Device tensors are bf16, except gradients on their way to the host, which are fp32.
int64_t deviceBytes(Value value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  int64_t width = 2;
  if (!llvm::isa<FloatType>(type.getElementType()))
    width = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  else if (llvm::any_of(value.getUsers(), [](Operation *user) {
             auto offload = llvm::dyn_cast<OffloadOp>(user);
             return offload && offload.getKind() == "gradients";
           }))
    width = 4;
  return numElements(type.getShape()) * width;
}

} // namespace

bool producesDeviceValues(Operation *op) {
  return !llvm::isa<ParamOp, ConstantOp, OffloadOp, func::ReturnOp>(op);
}

int64_t templateWorkspaceBytes(func::FuncOp function) {
  llvm::SmallVector<Operation *> ops;
  for (Operation &op : function.getBody().front().without_terminator())
    if (!llvm::isa<ConstantOp>(op))
      ops.push_back(&op);
  return peakLiveBytes(ops);
}

int64_t peakLiveBytes(llvm::ArrayRef<Operation *> ops) {
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;
  std::vector<int64_t> freedAfter(ops.size() + 1, 0);
  int64_t live = 0, peak = 0;
  for (auto [i, op] : llvm::enumerate(ops)) {
    for (Value result : op->getResults()) {
      if (result.use_empty())
        continue;
      size_t last = i;
      bool returned = false;
      for (Operation *user : result.getUsers()) {
        auto it = position.find(user);
        if (it == position.end())
          returned = true;
        else
          last = std::max(last, it->second);
      }
      int64_t bytes = deviceBytes(result);
      live += bytes;
      if (!returned)
        freedAfter[last] += bytes;
    }
    peak = std::max(peak, live);
    live -= freedAfter[i];
  }
  return peak;
}

BufferLiveness analyzeBuffers(func::FuncOp step) {
  BufferLiveness liveness;
  llvm::DenseMap<Operation *, size_t> position;
  for (Operation &op : step.getBody().front()) {
    position[&op] = liveness.ops.size();
    liveness.ops.push_back(&op);
  }
  for (auto [i, op] : llvm::enumerate(liveness.ops)) {
    if (!producesDeviceValues(op))
      continue;
    for (OpResult result : op->getResults()) {
      if (!llvm::isa<RankedTensorType>(result.getType()))
        continue; // tokens
      DeviceBuffer buffer{op, static_cast<int>(result.getResultNumber()), deviceBytes(result), i, i};
      for (Operation *user : result.getUsers())
        buffer.last = std::max(buffer.last, position.lookup(user));
      liveness.buffers.push_back(buffer);
    }
    if (auto call = llvm::dyn_cast<func::CallOp>(op)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (int64_t bytes = callee ? templateWorkspaceBytes(callee) : 0)
        liveness.buffers.push_back({op, -1, bytes, i, i});
    }
  }
  return liveness;
}

} // namespace mt
