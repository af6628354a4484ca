// mt-insert-transfers: the copies of the MegaTrain schedule made explicit in the step.
//
//   %y = call @layer_0(%x, %w...) {mt.layer = 3}
// becomes
//   %d:n, %t = mt.prefetch %w... {kind = "weights", layer = 3}   (two calls earlier)
//   %c, %tc = mt.offload %x {kind = "checkpoint", layer = 3}
//   %a:n = mt.await %d... after %t
//   %y = call @layer_0(%x, %a...) {mt.layer = 3}
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
  if constexpr (std::is_same_v<CopyOp, PrefetchOp>)
    return b.create<CopyOp>(loc, types, values, b.getStringAttr(kind), b.getI64IntegerAttr(layer),
                            /*persistent=*/UnitAttr());
  else
    return b.create<CopyOp>(loc, types, values, b.getStringAttr(kind), b.getI64IntegerAttr(layer));
}

struct InsertTransfersPass : mt::impl::InsertTransfersPassBase<InsertTransfersPass> {
  using InsertTransfersPassBase::InsertTransfersPassBase;

  void runOnOperation() override {
    if (residentLayers < 0 || persistentLayers < 0) {
      getOperation().emitError("mt-insert-transfers: resident-layers and persistent-layers must "
                               "be at least 0, got ")
          << residentLayers.getValue() << " and " << persistentLayers.getValue();
      return signalPassFailure();
    }
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
    // recomputation of its block) leaves for host memory once computed; it comes back when
    // the weights of its first backward reader do, and later readers share that copy.
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
    // Consecutive calls that read the same parameters (a layer's micro-batches) form a group
    // that shares one prefetch; group g's weights arrive right after group g - lookahead is
    // done, and so do the checkpoints its calls read back.
    auto parametersOf = [](func::CallOp call) {
      llvm::SmallVector<Value> values;
      for (Value operand : call.getOperands())
        if (operand.getDefiningOp<ParamOp>())
          values.push_back(operand);
      return values;
    };
    llvm::SmallVector<llvm::SmallVector<func::CallOp>> groups;
    for (func::CallOp call : calls) {
      if (groups.empty() || parametersOf(groups.back().front()) != parametersOf(call))
        groups.emplace_back();
      groups.back().push_back(call);
    }
    // The last `residentLayers` parameter sets the step reads (its last layers' weights)
    // stay on the device from their first prefetch to their last reader (the recomputation
    // and backward of those layers): one crossing a step instead of two, for their bytes of
    // device memory.
    llvm::SmallVector<llvm::SmallVector<Value>> readOrder;
    for (auto &group : groups)
      if (llvm::SmallVector<Value> weights = parametersOf(group.front());
          !weights.empty() && !llvm::is_contained(readOrder, weights))
        readOrder.push_back(weights);
    // The last `persistentLayers` of them keep their weights on the device across steps as
    // well: their one prefetch, where the step first reads them, is marked persistent; the
    // runtime fills it once and then from each update.
    llvm::SmallVector<std::pair<llvm::SmallVector<Value>, PrefetchOp>> resident;
    const size_t keptSets = std::max<size_t>(residentLayers, persistentLayers);
    const size_t firstPersistent =
        readOrder.size() - std::min<size_t>(persistentLayers, readOrder.size());
    for (size_t i = readOrder.size() - std::min(keptSets, readOrder.size()); i < readOrder.size();
         ++i)
      resident.push_back({readOrder[i], PrefetchOp()});
    llvm::DenseMap<Value, Value> reloaded;
    for (auto [g, group] : llvm::enumerate(groups)) {
      Operation *anchor = g >= static_cast<size_t>(lookahead)
                              ? groups[g - lookahead].back().getOperation()
                              : nullptr;
      auto placeAfter = [&](Value hostValue) {
        Operation *at = anchor;
        // Never before what it copies exists (a checkpoint offloaded late in the forward).
        if (Operation *producer = hostValue.getDefiningOp();
            producer && !llvm::isa<ParamOp>(producer) && (!at || at->isBeforeInBlock(producer)))
          at = producer;
        if (at)
          b.setInsertionPointAfter(at);
        else
          b.setInsertionPoint(start);
      };
      llvm::SmallVector<Value> weights = parametersOf(group.front());
      if (!weights.empty()) {
        auto kept = llvm::find_if(resident, [&](auto &set) { return set.first == weights; });
        PrefetchOp prefetch = kept != resident.end() ? kept->second : PrefetchOp();
        if (!prefetch) {
          bool persistent =
              llvm::is_contained(llvm::ArrayRef(readOrder).drop_front(firstPersistent), weights);
          placeAfter(weights.front());
          prefetch = createCopy<PrefetchOp>(b, group.front().getLoc(), weights, "weights",
                                            layerOf(group.front()));
          prefetch.setPersistent(persistent);
          if (kept != resident.end())
            kept->second = prefetch;
        }
        for (func::CallOp call : group)
          for (OpOperand &operand : call->getOpOperands())
            if (auto it = llvm::find(weights, operand.get()); it != weights.end())
              operand.set(prefetch.getResult(it - weights.begin()));
      }
      for (func::CallOp call : group) {
        Value input = call.getOperand(0);
        if (!readsCheckpoint(call) || !hostCheckpoint.count(input))
          continue;
        Value &copy = reloaded[input];
        if (!copy) {
          placeAfter(hostCheckpoint[input]);
          copy = createCopy<PrefetchOp>(b, call.getLoc(), hostCheckpoint[input], "checkpoint",
                                        layerOf(call))
                     .getResult(0);
        }
        call->setOperand(0, copy);
      }
    }

    // Prologue and epilogue parameters arrive just before their first use, ahead of the
    // layers' prefetches issued there for later calls: copies cross in the order the step
    // reads them (the embedding's table before the first layers' weights, not after them).
    // Where every layer's weights persist, theirs do too.
    const bool edgesPersist = persistentLayers > 0 && firstPersistent == 0;
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
      Operation *at = first;
      for (auto layerCopy = llvm::dyn_cast_or_null<PrefetchOp>(at->getPrevNode());
           layerCopy && layerCopy.getLayer() >= 0;
           layerCopy = llvm::dyn_cast_or_null<PrefetchOp>(at->getPrevNode()))
        at = layerCopy;
      b.setInsertionPoint(at);
      auto prefetch = createCopy<PrefetchOp>(b, read.getLoc(), read.getResult(), "weights", -1);
      prefetch.setPersistent(edgesPersist);
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

    // A persistent weight's device copy is the only one the runtime keeps current: no
    // streamed prefetch may read the same parameter.
    llvm::DenseMap<Attribute, bool> persists; // per parameter: whether its prefetches persist
    for (auto prefetch : body.getOps<PrefetchOp>())
      if (prefetch.getKind() == "weights")
        for (Value operand : prefetch.getOperands()) {
          auto read = operand.getDefiningOp<ParamOp>();
          if (!read)
            continue;
          auto [it, first] = persists.try_emplace(read.getNameAttr(), prefetch.getPersistent());
          if (!first && it->second != prefetch.getPersistent()) {
            prefetch.emitError("mt-insert-transfers: parameter ")
                << read.getName()
                << " is read by persistent and by streamed weights; keep every layer that reads "
                   "it persistent (persistent-layers), or none";
            return signalPassFailure();
          }
        }

    // Each copy's values are read through an await of its token, placed before the first
    // reader: whatever reads them waits for the copy.
    for (Operation &op : llvm::make_early_inc_range(body))
      if (llvm::isa<PrefetchOp, OffloadOp>(op))
        awaitCopy(b, &op);

    // Each parameter lives in the host block of the first weights prefetch that reads it.
    ModuleOp module = getOperation();
    for (auto prefetch : body.getOps<PrefetchOp>())
      if (prefetch.getKind() == "weights")
        for (Value operand : prefetch.getOperands())
          if (auto read = operand.getDefiningOp<ParamOp>())
            if (auto parameter = module.lookupSymbol<ParameterOp>(read.getNameAttr());
                parameter && !parameter.getLayer())
              parameter.setLayer(prefetch.getLayer());
  }

  /// Routes every reader of `copy`'s values through one mt.await of its token, before the
  /// first of them.
  static void awaitCopy(OpBuilder &b, Operation *copy) {
    ValueRange values = copy->getResults().drop_back(); // the token is last
    Operation *first = nullptr;
    for (Value value : values)
      for (Operation *reader : value.getUsers())
        if (!first || reader->isBeforeInBlock(first))
          first = reader;
    if (!first)
      return;
    b.setInsertionPoint(first);
    auto await = b.create<AwaitOp>(copy->getLoc(), copy->getResults().back(), values);
    for (auto [value, awaited] : llvm::zip(values, await.getResults()))
      value.replaceAllUsesExcept(awaited, await);
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
