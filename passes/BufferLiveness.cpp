// Device buffers of a step and their live ranges in program order.
#include "passes/BufferLiveness.h"

#include "plan/DeviceLayout.h"

#include "ir/MtOps.h"
#include "ir/ShapeRules.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>

using namespace mlir;

namespace mt {

namespace {


/// Whether `value` leaves the device, or the step, at four bytes an element: a gradient
/// bound for the host, the step's loss, a template result whose call result does, or a
/// part summed into one of those (an addend, an accumulator passed to a template). A search
/// over those edges; `seen` stops it at values already searched (a layer's output reaches
/// every call of its template, and through them itself).
bool leavesInFp32(Value value, llvm::DenseSet<Value> &seen) {
  if (!seen.insert(value).second)
    return false;
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (auto offload = llvm::dyn_cast<OffloadOp>(user); offload && offload.getKind() == "gradients")
      return true;
    if ((llvm::isa<AddOp>(user) || (llvm::isa<MatmulOp>(user) && use.getOperandNumber() == 2)) &&
        leavesInFp32(user->getResult(0), seen))
      return true;
    if (llvm::isa<AwaitOp>(user) && use.getOperandNumber() > 0 && // 0: the token
        leavesInFp32(user->getResult(use.getOperandNumber() - 1), seen))
      return true;
    if (auto call = llvm::dyn_cast<func::CallOp>(user)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (callee && !callee.isExternal() &&
          leavesInFp32(callee.getArgument(use.getOperandNumber()), seen))
        return true;
    }
    auto ret = llvm::dyn_cast<func::ReturnOp>(user);
    if (!ret)
      continue;
    auto function = ret->getParentOfType<func::FuncOp>();
    if (function.getSymName() == "train_step")
      return true;
    auto module = function->getParentOfType<ModuleOp>();
    auto uses = SymbolTable::getSymbolUses(function, module);
    if (!uses)
      continue;
    for (const SymbolTable::SymbolUse &symbolUse : *uses)
      if (auto call = llvm::dyn_cast<func::CallOp>(symbolUse.getUser());
          call && call->getParentOfType<func::FuncOp>().getSymName() == "train_step" &&
          leavesInFp32(call.getResult(use.getOperandNumber()), seen))
        return true;
  }
  return false;
}

/// Whether `value` is an attention's log-sum-exp: the attention's result, or one a layer's
/// template passes on (a saving layer's forward returns it, its backward takes it).
bool isLogSumExp(Value value) {
  if (auto argument = llvm::dyn_cast<BlockArgument>(value)) {
    auto function = llvm::dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp());
    return function && function.getArgAttr(argument.getArgNumber(), kLogSumExpArgument);
  }
  Operation *maker = value.getDefiningOp();
  if (auto attention = llvm::dyn_cast<AttentionOp>(maker))
    return value == attention.getLse();
  if (auto await = llvm::dyn_cast<AwaitOp>(maker)) // operand 0: the token
    return isLogSumExp(await.getOperand(llvm::cast<OpResult>(value).getResultNumber() + 1));
  auto call = llvm::dyn_cast<func::CallOp>(maker);
  auto callee = call
                    ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr())
                    : nullptr;
  if (!callee || callee.isExternal())
    return false;
  Operation *ret = callee.getBody().front().getTerminator();
  return isLogSumExp(ret->getOperand(llvm::cast<OpResult>(value).getResultNumber()));
}

/// The position of the last op among `position` that reads `result` (made at `made`), and
/// whether it is also read past them (returned).
std::pair<size_t, bool> lastUse(Value result, size_t made,
                                const llvm::DenseMap<Operation *, size_t> &position) {
  size_t last = made;
  bool returned = false;
  for (Operation *user : readersOf(result)) {
    auto it = position.find(user);
    if (it == position.end())
      returned = true;
    else
      last = std::max(last, it->second);
  }
  return {last, returned};
}

} // namespace

/// Device tensors are bf16 (or what the module's kDeviceFloatBytes says), except scalars
/// (losses: rounding them costs 3 digits and saves nothing), those leaving in fp32
/// (leavesInFp32) and an attention's log-sum-exp (bf16 would put about 6% of error into
/// each probability its gradient rebuilds from it); integers keep their width.
int64_t deviceBytes(Value value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  int64_t width = 2;
  Operation *scope = value.getParentBlock()->getParentOp();
  auto module = llvm::isa<ModuleOp>(scope) ? llvm::cast<ModuleOp>(scope)
                                           : scope->getParentOfType<ModuleOp>();
  if (auto floatBytes = module ? module->getAttrOfType<IntegerAttr>(kDeviceFloatBytes) : nullptr)
    width = floatBytes.getInt();
  if (!llvm::isa<FloatType>(type.getElementType()))
    width = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  else if (isLogSumExp(value))
    width = 4;
  else if (llvm::DenseSet<Value> seen; type.getRank() == 0 || leavesInFp32(value, seen))
    width = 4;
  return numElements(type.getShape()) * width;
}

Value accumulatorOf(OpResult result) {
  Operation *op = result.getOwner();
  if (auto product = llvm::dyn_cast<MatmulOp>(op))
    return product.getAddend();
  auto call = llvm::dyn_cast<func::CallOp>(op);
  auto callee = call ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr())
                     : nullptr;
  auto summed = callee ? callee->getAttrOfType<DenseI64ArrayAttr>("mt.accumulators") : nullptr;
  if (!summed)
    return {};
  unsigned first = call.getNumOperands() - summed.size();
  for (auto [j, r] : llvm::enumerate(summed.asArrayRef()))
    if (r == result.getResultNumber())
      return call.getOperand(first + j);
  return {};
}

bool producesDeviceValues(Operation *op) {
  return !llvm::isa<ParamOp, ConstantOp, OffloadOp, AwaitOp, func::ReturnOp>(op);
}

llvm::SmallVector<Operation *> readersOf(Value value) {
  llvm::SmallVector<Operation *> readers;
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (llvm::isa<AwaitOp>(user) && use.getOperandNumber() > 0) // 0: the token
      readers.append(readersOf(user->getResult(use.getOperandNumber() - 1)));
    else
      readers.push_back(user);
  }
  return readers;
}

int64_t DeviceArena::allocate(int64_t bytes) {
  bytes = alignToDevice(bytes);
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

void DeviceArena::release(int64_t offset, int64_t bytes) {
  bytes = alignToDevice(bytes);
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

bool isReshapeView(Operation *reshape) {
  if (!llvm::isa<ReshapeOp>(reshape))
    return false;
  auto function = reshape->getParentOfType<func::FuncOp>();
  Operation *producer = reshape->getOperand(0).getDefiningOp();
  return function && function.getSymName() != "train_step" && producer &&
         !llvm::isa<ConstantOp>(producer) &&
         deviceBytes(reshape->getOperand(0)) == deviceBytes(reshape->getResult(0));
}

int64_t layoutTemplate(func::FuncOp function, bool annotate) {
  llvm::SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, size_t> position;
  for (Operation &op : function.getBody().front().without_terminator())
    if (!llvm::isa<ConstantOp>(op)) {
      position[&op] = ops.size();
      ops.push_back(&op);
    }
  DeviceArena arena;
  std::multimap<size_t, std::pair<int64_t, int64_t>> dying; // last op -> (offset, bytes)
  llvm::DenseMap<Value, int64_t> placed;
  // Reshape views: each value's owner (the value whose buffer it shares), and when each
  // owner's buffer dies (absent: at the end, returned).
  llvm::DenseMap<Value, Value> ownerOf;
  llvm::DenseMap<Value, size_t> deathOf;
  auto share = [&](Value view, Value of, size_t last, bool returned) {
    Value owner = ownerOf.lookup(of);
    ownerOf[view] = owner;
    auto death = deathOf.find(owner);
    if (death == deathOf.end() || (!returned && death->second >= last))
      return;
    auto [begin, end] = dying.equal_range(death->second);
    for (auto it = begin; it != end; ++it)
      if (it->second.first == placed[owner]) {
        auto buffer = it->second;
        dying.erase(it);
        if (returned) {
          deathOf.erase(death);
        } else {
          dying.emplace(last, buffer);
          death->second = last;
        }
        return;
      }
  };
  Builder b(function.getContext());
  // A result summed into an intermediate that nothing else reads takes its buffer over.
  auto takeOver = [&](OpResult result, size_t i, int64_t bytes) -> int64_t {
    Value into = accumulatorOf(result);
    if (!into || !into.hasOneUse() || !placed.count(into))
      return -1;
    auto [begin, end] = dying.equal_range(i);
    for (auto it = begin; it != end; ++it)
      if (it->second == std::make_pair(placed[into], bytes)) {
        dying.erase(it);
        return placed[into];
      }
    return -1;
  };
  for (auto [i, op] : llvm::enumerate(ops)) {
    llvm::SmallVector<int64_t> offsets, sizes;
    for (OpResult result : op->getResults()) {
      int64_t bytes = deviceBytes(result);
      auto [last, returned] = lastUse(result, i, position);
      if (isReshapeView(op) && placed.count(op->getOperand(0))) {
        int64_t offset = placed[result] = placed[op->getOperand(0)];
        offsets.push_back(offset);
        sizes.push_back(bytes);
        share(result, op->getOperand(0), last, returned);
        continue;
      }
      int64_t offset = takeOver(result, i, bytes);
      if (offset < 0)
        offset = arena.allocate(bytes);
      placed[result] = offset;
      ownerOf[result] = result;
      offsets.push_back(offset);
      sizes.push_back(bytes);
      if (!returned) {
        dying.emplace(last, std::make_pair(offset, bytes));
        deathOf[result] = last;
      }
    }
    if (annotate) {
      scheduleAttrs(op).getOffsetsAttrHelper().setAttr(op, b.getDenseI64ArrayAttr(offsets));
      scheduleAttrs(op).getSizesAttrHelper().setAttr(op, b.getDenseI64ArrayAttr(sizes));
    }
    auto [begin, end] = dying.equal_range(i);
    for (auto it = begin; it != end; ++it)
      arena.release(it->second.first, it->second.second);
    dying.erase(begin, end);
  }
  return arena.size();
}

int64_t templateWorkspaceBytes(func::FuncOp function) { return layoutTemplate(function, false); }

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
      auto [last, returned] = lastUse(result, i, position);
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
  llvm::DenseMap<Operation *, int64_t> workspaces; // per template
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
      for (Operation *reader : readersOf(result))
        buffer.last = std::max(buffer.last, position.lookup(reader));
      // Persistent weights keep their bytes from one step into the next: nothing else may
      // take them at any point of the step, before their prefetch or after their last reader.
      if (auto prefetch = llvm::dyn_cast<PrefetchOp>(op); prefetch && prefetch.getPersistent()) {
        buffer.first = 0;
        buffer.last = liveness.ops.size() - 1;
      }
      liveness.buffers.push_back(buffer);
    }
    if (auto call = llvm::dyn_cast<func::CallOp>(op)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (callee && !workspaces.count(callee))
        workspaces[callee] = templateWorkspaceBytes(callee);
      if (int64_t bytes = callee ? workspaces[callee] : 0)
        liveness.buffers.push_back({op, -1, bytes, i, i});
    }
  }
  std::stable_sort(liveness.buffers.begin(), liveness.buffers.end(),
                   [](const DeviceBuffer &a, const DeviceBuffer &b) { return a.first < b.first; });
  return liveness;
}

} // namespace mt
