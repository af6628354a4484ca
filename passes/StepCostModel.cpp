// The step cost model: per-layer work and bytes from the templates, device memory from the
// phases of the step, time from a simulation of the four resources (h2d, compute, d2h, CPU).
#include "passes/StepCostModel.h"

#include "passes/BufferLiveness.h"
#include "plan/DeviceLayout.h"

#include "ir/MtOps.h"
#include "ir/ShapeRules.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cassert>
#include <map>

using namespace mlir;

namespace mt {

namespace {

/// Device-side tensors are bf16 in the CUDA backend: two bytes an element.
constexpr int64_t kActivationBytes = 2;

int64_t elementsOf(Type type) {
  return numElements(llvm::cast<RankedTensorType>(type).getShape());
}

/// The keys each query of an attention over `key` ([B, H, S, D], or [B, S, H, D] when
/// `sequenceMajor`) is counted against: all S, or under a sliding window at most its width.
double keysSeen(Value key, std::optional<uint64_t> window, bool sequenceMajor) {
  int64_t keys = llvm::cast<RankedTensorType>(key.getType()).getShape()[sequenceMajor ? 1 : 2];
  return static_cast<double>(window ? std::min<int64_t>(keys, static_cast<int64_t>(*window))
                                    : keys);
}

/// Dense FLOPs of the ops that run on tensor cores; the rest is bound by memory.
double tensorCoreFlops(Operation *op) {
  auto shapeOf = [](Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); };
  if (auto matmul = llvm::dyn_cast<MatmulOp>(op)) {
    llvm::ArrayRef<int64_t> lhs = shapeOf(matmul.getLhs());
    int64_t k = lhs[lhs.size() - (matmul.getTransposeLhs() ? 2 : 1)];
    return 2.0 * elementsOf(matmul.getType()) * k;
  }
  if (auto linear = llvm::dyn_cast<LinearOp>(op))
    return 2.0 * elementsOf(linear.getType()) * shapeOf(linear.getInput()).back();
  // The fused loss's products: the logits forward; remade, then both gradients, backward.
  if (auto loss = llvm::dyn_cast<LinearCrossEntropyOp>(op))
    return 2.0 * elementsOf(loss.getInput().getType()) * elementsOf(loss.getWeight().getType()) /
           shapeOf(loss.getInput()).back();
  if (auto grad = llvm::dyn_cast<LinearCrossEntropyGradOp>(op))
    return 6.0 * elementsOf(grad.getInput().getType()) * elementsOf(grad.getWeight().getType()) /
           shapeOf(grad.getInput()).back();
  auto attentionWork = [&](Value query, Value key, std::optional<uint64_t> window,
                           bool sequenceMajor) {
    llvm::ArrayRef<int64_t> q = shapeOf(query); // every query row, in either layout
    return static_cast<double>(q[0]) * q[1] * q[2] * keysSeen(key, window, sequenceMajor) * q[3];
  };
  // Forward: q k^T and p v. Backward: the recomputed q k^T, then dv, dp, dq and dk.
  if (auto attention = llvm::dyn_cast<AttentionOp>(op))
    return 4 * attentionWork(attention.getQuery(), attention.getKey(), attention.getWindow(),
                             attention.getSequenceMajor());
  if (auto grad = llvm::dyn_cast<AttentionGradOp>(op))
    return 10 *
           attentionWork(grad.getQuery(), grad.getKey(), grad.getWindow(), grad.getSequenceMajor());
  return 0;
}

} // namespace

KernelWork kernelWork(Operation *op) {
  if (double flops = tensorCoreFlops(op))
    return {flops, 0};
  if (isReshapeView(op))
    return {0, 0};
  int64_t elements = 0;
  for (Type type : op->getOperandTypes())
    if (llvm::isa<RankedTensorType>(type))
      elements += elementsOf(type);
  for (Type type : op->getResultTypes())
    if (llvm::isa<RankedTensorType>(type))
      elements += elementsOf(type);
  return {0, static_cast<double>(elements) * kActivationBytes};
}

namespace {

struct Cost {
  double gemmFlops = 0;
  double attentionFlops = 0;   // fused attention's, at its own rate
  double memoryBytes = 0;      // read and written by kernels that are not GEMMs
  int64_t activationBytes = 0; // the most intermediate bytes alive at once (BufferLiveness)

  void add(Operation *op) {
    KernelWork work = kernelWork(op);
    (llvm::isa<AttentionOp, AttentionGradOp>(op) ? attentionFlops : gemmFlops) += work.flops;
    memoryBytes += work.bytes;
  }
  /// Another run of a template (a micro-batch): work adds up, memory is reused.
  void merge(const Cost &other) {
    gemmFlops += other.gemmFlops;
    attentionFlops += other.attentionFlops;
    memoryBytes += other.memoryBytes;
    activationBytes = std::max(activationBytes, other.activationBytes);
  }
  double flops() const { return gemmFlops + attentionFlops; }
  double seconds(const DeviceProfile &profile) const {
    return gemmFlops / profile.gemmFlopsPerSecond + attentionFlops / attentionRate(profile) +
           memoryBytes / profile.memoryBytesPerSecond;
  }
};

Cost costOf(func::FuncOp function) {
  Cost cost;
  for (Operation &op : function.getBody().front().without_terminator())
    if (!llvm::isa<ConstantOp>(op))
      cost.add(&op);
  cost.activationBytes = templateWorkspaceBytes(function);
  return cost;
}

/// The parameter read behind `value`, looking through the await and the prefetch that
/// brought it to the device in a scheduled step.
ParamOp parameterBehind(Value value) {
  if (auto await = value.getDefiningOp<AwaitOp>())
    value = await.getValues()[llvm::cast<OpResult>(value).getResultNumber()];
  if (auto prefetch = value.getDefiningOp<PrefetchOp>())
    value = prefetch.getOperand(llvm::cast<OpResult>(value).getResultNumber());
  return value.getDefiningOp<ParamOp>();
}

/// What a set of pulled gradients' updates wait for before they start: per tensor, a copy
/// issued and waited for, and its first chunk (kFirstPull elements, or all of a smaller one).
struct PullWaits {
  int64_t tensors = 0, firstElements = 0;
  void add(int64_t elements) {
    ++tensors;
    firstElements += std::min(elements, kFirstPull);
  }
};

struct LayerCost {
  /// savedBytes: the activations a saving layer keeps from its forward to its backward.
  int64_t params = 0, checkpointBytes = 0, savedBytes = 0;
  PullWaits pulls;
  Cost forward, backward;
};

/// Replays the schedule and records each command's slice.
class Simulator {
public:
  Simulator(const DeviceProfile &profile, std::vector<TimelineSlice> &timeline)
      : profile(profile), timeline(&timeline) {}

  /// Records the slices from here on into `other` instead.
  void record(std::vector<TimelineSlice> &other) { timeline = &other; }

  /// Runs `seconds` on `stream` once it is free and `after` has passed; returns the end.
  double run(const std::string &stream, const std::string &name, double seconds, double after) {
    double &free = freeAt[stream];
    double start = std::max(free, after);
    timeline->push_back({name, stream, start, seconds});
    free = start + seconds;
    return free;
  }
  double end() const {
    double last = 0;
    for (const auto &[stream, free] : freeAt)
      last = std::max(last, free);
    return last;
  }

  const DeviceProfile &profile;

private:
  std::vector<TimelineSlice> *timeline;
  std::map<std::string, double> freeAt;
};

/// The CPU's updates, one at a time as mt-run's worker runs them: of the gradients landed by
/// the time it is free, the one the next forward reads first.
class UpdateWorker {
public:
  explicit UpdateWorker(Simulator &sim) : sim(sim) {}

  /// Update `id` (its gradient landed at `time`; `need`: its place in the next forward's
  /// reads) takes `seconds`.
  void land(int64_t id, int64_t need, double time, double seconds, std::string name) {
    pending.push_back({need, time, seconds, id, std::move(name)});
    if (static_cast<int64_t>(ends.size()) <= id)
      ends.resize(id + 1, -1.0);
  }
  /// When update `id` (landed before) ends, running the worker until it has (every landed
  /// one: id < 0).
  double endOf(int64_t id) {
    assert(id < static_cast<int64_t>(ends.size()) && "an update that never landed");
    while (!pending.empty() && (id < 0 || ends[id] < 0)) {
      double at = std::max(
          free, std::min_element(pending.begin(), pending.end(), [](const Item &a, const Item &b) {
                  return a.time < b.time;
                })->time);
      auto next = pending.end();
      for (auto it = pending.begin(); it != pending.end(); ++it)
        if (it->time <= at && (next == pending.end() || it->need < next->need))
          next = it;
      free = sim.run("cpu", next->name, next->seconds, at);
      ends[next->id] = free;
      pending.erase(next);
    }
    assert((id < 0 || ends[id] >= 0) && "an update that never landed");
    return id < 0 ? free : ends[id];
  }

private:
  struct Item {
    int64_t need;
    double time, seconds;
    int64_t id;
    std::string name;
  };
  Simulator &sim;
  std::vector<Item> pending;
  std::vector<double> ends; // per id: when it ended (-1: not yet)
  double free = 0;
};

} // namespace

FailureOr<StepEstimate> estimateStep(ModuleOp module, const DeviceProfile &profile,
                                     const ScheduleOptions &options) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return module.emitError("the cost model needs @train_step; run mt-train first");
  StepEstimate estimate;
  estimate.accumulation = options.accumulation == "auto" ? "layer-major" : options.accumulation;
  bool layerMajor = estimate.accumulation == "layer-major";
  // Layer-major micro-batches are in the step itself (each layer called once per
  // micro-batch); sample-major ones are the runtime running the step once per micro-batch.
  int64_t micro = layerMajor ? 1 : std::max<int64_t>(options.microBatches, 1);
  estimate.checkpointsOnDevice = options.checkpointsOnDevice;
  int64_t interval = std::max<int64_t>(options.recomputeInterval, 1);
  estimate.recomputeInterval = interval;
  int64_t parameterCount = 0, largestParameter = 0;
  for (ParameterOp parameter : module.getOps<ParameterOp>()) {
    int64_t elements = numElements(parameter.getTensorType().getShape());
    estimate.params += elements;
    largestParameter = std::max(largestParameter, elements);
    ++parameterCount;
  }

  // The forward ends at the op that computes the loss; the rest of the step is backward.
  Operation *lossOp = step.getBody().front().getTerminator()->getOperand(0).getDefiningOp();
  bool inForward = true;
  std::vector<LayerCost> layers;
  Cost edge;
  llvm::SmallVector<Operation *> edgeOps;
  // The edge's parameters: the prologue's (read before the first layer: the embedding), whose
  // gradients land last in the backward, and the epilogue's (the head's), whose land first.
  // One read first between layers counts as the epilogue's (no decoder has one).
  int64_t edgeParams = 0, prologueParams = 0, tokens = 0;
  PullWaits prologuePulls, epiloguePulls;
  double matmulParams = 0, attentionTerm = 0;
  llvm::SmallPtrSet<Operation *, 16> edgeReads;
  for (BlockArgument argument : step.getArguments())
    if (llvm::isa<IntegerType>(getElementTypeOrSelf(argument.getType())) && !tokens)
      tokens = elementsOf(argument.getType());

  // Symbols by hash, and each template's cost and forward work once: a 108-layer step calls
  // each template 108 times, and a template's liveness walks the whole module.
  SymbolTable symbols(module);
  llvm::DenseMap<Operation *, Cost> templateCosts;
  auto costOfTemplate = [&](func::FuncOp callee) -> const Cost & {
    auto [entry, inserted] = templateCosts.try_emplace(callee.getOperation());
    if (inserted)
      entry->second = costOf(callee);
    return entry->second;
  };
  llvm::DenseMap<Operation *, std::pair<double, double>> templateWork;
  auto countForwardWork = [&](Operation *op, double calls) {
    if (auto linear = llvm::dyn_cast<LinearOp>(op))
      matmulParams += calls * elementsOf(linear.getWeight().getType());
    if (auto loss = llvm::dyn_cast<LinearCrossEntropyOp>(op))
      matmulParams += calls * elementsOf(loss.getWeight().getType());
    if (auto attention = llvm::dyn_cast<AttentionOp>(op)) {
      llvm::ArrayRef<int64_t> q = attention.getQuery().getType().getShape();
      attentionTerm +=
          calls * 12.0 * q[1] * q[3] *
          keysSeen(attention.getKey(), attention.getWindow(), attention.getSequenceMajor()) * q[0] *
          q[2];
    }
  };
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (llvm::isa<PrefetchOp, OffloadOp, AwaitOp>(op) || op.hasAttr("mt.recompute"))
      continue;
    if (auto call = llvm::dyn_cast<func::CallOp>(op)) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      auto index = call->getAttrOfType<IntegerAttr>("mt.layer");
      if (!callee || !index)
        return call.emitOpError("is not a layer call the cost model knows");
      int64_t i = index.getInt();
      if (!callee->hasAttr("mt.backward_of")) {
        // A layer's first call makes it; its other calls are micro-batches of it.
        if (i == static_cast<int64_t>(layers.size())) {
          layers.emplace_back();
          for (Value operand : call.getOperands())
            if (parameterBehind(operand)) {
              layers.back().params += elementsOf(operand.getType());
              layers.back().pulls.add(elementsOf(operand.getType()));
            }
        }
        if (i < 0 || i >= static_cast<int64_t>(layers.size()))
          return call.emitOpError("calls layers out of order");
        layers[i].checkpointBytes += elementsOf(call.getOperand(0).getType()) * kActivationBytes;
        for (Value saved : call.getResults().drop_front())
          layers[i].savedBytes += deviceBytes(saved);
        layers[i].forward.merge(costOfTemplate(callee));
        // The work of a template's ops (whole numbers of FLOP, exact in any order).
        auto [work, counted] = templateWork.try_emplace(callee.getOperation());
        if (counted) {
          double matmuls = matmulParams, attention = attentionTerm;
          callee.walk([&](Operation *inner) { countForwardWork(inner, 1); });
          work->second = {matmulParams - matmuls, attentionTerm - attention};
        } else {
          matmulParams += work->second.first;
          attentionTerm += work->second.second;
        }
      } else {
        if (i < 0 || i >= static_cast<int64_t>(layers.size()))
          return call.emitOpError("differentiates a layer the forward did not call");
        layers[i].backward.merge(costOfTemplate(callee));
      }
    } else if (!llvm::isa<ParamOp, ConstantOp>(op)) {
      edge.add(&op);
      edgeOps.push_back(&op);
      if (inForward)
        countForwardWork(&op, 1);
      for (Value operand : op.getOperands())
        if (ParamOp read = parameterBehind(operand); read && edgeReads.insert(read).second) {
          edgeParams += elementsOf(read.getType());
          (layers.empty() ? prologuePulls : epiloguePulls).add(elementsOf(read.getType()));
          if (layers.empty())
            prologueParams += elementsOf(read.getType());
        }
    }
    if (&op == lossOp)
      inForward = false;
  }
  edge.activationBytes = peakLiveBytes(edgeOps);
  estimate.layers = layers.size();
  llvm::StringSet<> templates;
  step.walk([&](func::CallOp call) { templates.insert(call.getCallee()); });
  for (auto &entry : templates)
    if (auto callee = symbols.lookup<func::FuncOp>(entry.getKey());
        callee && !callee->hasAttr("mt.backward_of"))
      ++estimate.templates;

  // What crosses PCIe: weight slots hold device floats (bf16 unless the module says
  // otherwise), filled from the host's copies of that width (the split masters' high halves)
  // or from the fp32 masters.
  auto floatBytes = module->getAttrOfType<IntegerAttr>(kDeviceFloatBytes);
  int64_t slot = floatBytes ? floatBytes.getInt() : 2;
  int64_t stream = options.streamMasters ? 4 : slot;
  estimate.streamMasters = stream == 4;
  int64_t checkpoints = 0, maxLayerParams = 0, maxCheckpoint = 0;
  int64_t maxBackwardActivations = 0, savedBytes = 0;
  for (auto [i, layer] : llvm::enumerate(layers)) {
    savedBytes += layer.savedBytes;
    estimate.savedLayers += layer.savedBytes > 0;
    // Only every K-th layer's input is kept for the backward, and the output of a layer
    // that keeps its activations (mt-recompute does not run it again).
    if (i % interval == 0 || (i > 0 && layers[i - 1].savedBytes > 0))
      checkpoints += layer.checkpointBytes;
    maxLayerParams = std::max(maxLayerParams, layer.params);
    maxCheckpoint = std::max(maxCheckpoint, layer.checkpointBytes);
    maxBackwardActivations = std::max(maxBackwardActivations, layer.backward.activationBytes);
  }
  const int64_t L = static_cast<int64_t>(layers.size());
  // Recompute: in a block of K, the forward of all but the last layer runs a second time.
  auto recomputed = [&](size_t i) {
    return (i % interval) != static_cast<size_t>(interval - 1) && i + 1 < layers.size() &&
           layers[i].savedBytes == 0;
  };
  // A layer's weights cross for its forward, then again for its recomputation and for its
  // backward, unless they stay on the device: the last `residentLayers` layers'
  // (mt-insert-transfers' resident-layers), and the last layer's where its forward and
  // backward calls meet (a last block of one layer) and share one prefetch.
  estimate.residentLayers = std::clamp<int64_t>(options.residentLayers, 0, L);
  estimate.persistentLayers = std::clamp<int64_t>(options.persistentLayers, 0, L);
  auto persists = [&](size_t i) { return i + estimate.persistentLayers >= layers.size(); };
  const bool edgesPersist = options.persistentLayers > 0 && estimate.persistentLayers == L;
  auto stays = [&](size_t i) {
    bool meets = i + 1 == layers.size() && i % interval == 0;
    return meets || i + estimate.residentLayers >= layers.size() || persists(i);
  };
  auto laterCrossings = [&](size_t i) -> int64_t { return stays(i) ? 0 : recomputed(i) ? 2 : 1; };
  // What stays takes device memory beside the two slots, but for the last layer's weights,
  // which hold a slot throughout unless they persist. Persistent weights stay through the
  // step's edges as well, and cross once, after their update.
  int64_t crossingParams = edgeParams * (edgesPersist ? 1 : 2), residentBeside = 0;
  int64_t persistentLayerParams = 0;
  for (auto [i, layer] : llvm::enumerate(layers)) {
    crossingParams += layer.params * (1 + laterCrossings(i));
    if (stays(i) && (i + 1 < layers.size() || persists(i)))
      residentBeside += layer.params;
    if (persists(i))
      persistentLayerParams += layer.params;
  }
  const int64_t persistentParams = persistentLayerParams + (edgesPersist ? edgeParams : 0);
  int64_t weightPasses = layerMajor ? 1 : micro;
  int64_t offloadedCheckpoints = options.checkpointsOnDevice ? 0 : checkpoints * micro;
  // Persistent weights cross once a step however many runs it takes.
  estimate.h2dBytesPerStep =
      (weightPasses * (crossingParams - persistentParams) + persistentParams) * stream +
      offloadedCheckpoints;
  estimate.d2hBytesPerStep = weightPasses * estimate.params * 4 + offloadedCheckpoints;
  // Beside the fp32 masters, moments and any bf16 copies, pinned host slots for what lands:
  // each checkpoint, and the fp32 gradients in a ring (up to all of them) where each update
  // starts as its gradient lands (one run a step; mt-run --grad-clip keeps every gradient,
  // 4 bytes a parameter more), or every gradient and their sum over several runs a step
  // (their bytes below, once the ring's depth is chosen). Where the ring is in device memory
  // (pulled), the host keeps only the slots each update pulls its gradient through.
  const bool ringed = layerMajor || micro == 1;
  const bool pulled = ringed && options.pullGradients;
  estimate.pullGradients = pulled;
  // Updates on the device: the prologue's and layers spread over the step, where every weight
  // persists and the gradients wait in a device ring. Their weights cross in no step (the device
  // writes them) and their gradients not at all. Their low halves and moments stay in device
  // memory, as the runtime keeps them (in the read order, as many as the room beside the plan's
  // peak and the ring holds, less kResidentMargin), or cross in and back (the high halves are
  // the device's copy).
  estimate.deviceUpdateLayers = pulled && estimate.persistentLayers == L
                                    ? std::clamp<int64_t>(options.deviceUpdateLayers, 0, L)
                                    : 0;
  const int64_t ringLayerBytes = std::max(maxLayerParams, edgeParams) * 4;
  double residentRoom = static_cast<double>(options.deviceRoomBytes) -
                        static_cast<double>(gradientRingBytes(
                            std::max(options.gradientRingLayers, kLeastGradientRingLayers),
                            ringLayerBytes, estimate.params * 4)) -
                        static_cast<double>(kResidentMargin - kPullMargin);
  // Per layer (and the prologue, last), the parameters updated on the device, and those of
  // them whose state is resident.
  std::vector<int64_t> deviceOf(L + 1, 0), residentOf(L + 1, 0);
  auto placeOnDevice = [&](size_t item, int64_t params) {
    deviceOf[item] = params;
    residentOf[item] = static_cast<int64_t>(
        std::clamp<double>(residentRoom / kDeviceUpdateBytes, 0, static_cast<double>(params)));
    residentRoom -= static_cast<double>(residentOf[item]) * kDeviceUpdateBytes;
  };
  if (estimate.deviceUpdateLayers > 0)
    placeOnDevice(L, prologueParams);
  for (int64_t i = 0; i < L; ++i)
    if (updatesLayerOnDevice(i, L, estimate.deviceUpdateLayers))
      placeOnDevice(i, layers[i].params);
  int64_t deviceParams = 0, residentParams = 0;
  for (int64_t i = 0; i <= L; ++i) {
    deviceParams += deviceOf[i];
    residentParams += residentOf[i];
  }
  estimate.deviceUpdateResidentParams = residentParams;
  const int64_t streamedParams = deviceParams - residentParams;
  estimate.h2dBytesPerStep += streamedParams * kDeviceUpdateBytes - deviceParams * stream;
  estimate.d2hBytesPerStep += streamedParams * kDeviceUpdateBytes - deviceParams * 4;

  // Device memory: the larger of the layer phase and the prologue/epilogue phase. Saving
  // layers' activations are all alive where the forward turns into the backward.
  int64_t checkpointBuffers =
      options.checkpointsOnDevice ? checkpoints * micro : 2 * maxCheckpoint * micro;
  // The two weight slots, unless every layer persists (in memory of its own).
  const int64_t slotBytes = estimate.persistentLayers < L ? 2 * maxLayerParams * slot : 0;
  int64_t layerPhase = slotBytes + residentBeside * slot + 2 * maxLayerParams * 4 +
                       maxBackwardActivations + checkpointBuffers + savedBytes +
                       (edgesPersist ? edgeParams * slot : 0);
  int64_t edgePhase = edgeParams * (slot + 4) + edge.activationBytes + checkpointBuffers +
                      savedBytes + persistentLayerParams * slot;
  estimate.peakDeviceBytes = std::max(layerPhase, edgePhase);
  estimate.savedBytes = savedBytes;
  const std::string savedPart =
      savedBytes ? ", saved activations " + formatBytes(savedBytes) : std::string();
  estimate.peakBreakdown =
      layerPhase >= edgePhase
          ? "layers: " + (slotBytes ? "weight slots " + formatBytes(slotBytes) + ", " : "") +
                (residentBeside ? "resident weights " + formatBytes(residentBeside * slot) + ", "
                                : "") +
                (edgesPersist ? "persistent prologue/epilogue weights " +
                                    formatBytes(edgeParams * slot) + ", "
                              : "") +
                "gradient staging " + formatBytes(2 * maxLayerParams * 4) +
                ", activations of one layer's backward " + formatBytes(maxBackwardActivations) +
                ", checkpoints " + formatBytes(checkpointBuffers) + savedPart
          : "prologue/epilogue: weights and gradients " + formatBytes(edgeParams * (slot + 4)) +
                ", activations " + formatBytes(edge.activationBytes) + ", checkpoints " +
                formatBytes(checkpointBuffers) + savedPart +
                (persistentLayerParams
                     ? ", persistent layers' weights " + formatBytes(persistentLayerParams * slot)
                     : "");

  estimate.flopsPerStep = micro * (6.0 * matmulParams * tokens + attentionTerm);
  double executed = edge.flops();
  for (auto [i, layer] : llvm::enumerate(layers))
    executed += layer.forward.flops() * (recomputed(i) ? 2 : 1) + layer.backward.flops();
  estimate.executedFlopsPerStep = micro * executed;

  // The schedule: weights of layer i go to slot i % 2 once compute is done with the layer
  // that used it before; checkpoints go out after each forward and come back before the
  // backward; each layer's gradients go out, then AdamW updates the layer on the CPU. The
  // gradients land in the backward's order: the epilogue's first, the layers' last first, the
  // prologue's last. Where they land in a ring of `ring` layers (0: every gradient a slot of
  // its own), placed by placeInRing as the runtime places them (each layer's together, where
  // the runtime places each parameter: short of every gradient the two differ by up to a
  // layer's bytes), a gradient goes out only once the updates of those whose bytes it
  // overlaps have run, and the runtime issues nothing further until then.
  // Two steps run, the second's prefetches waiting for the first's updates (the last updates
  // overlap the next forward): the step is the second's end less the first's; the timeline is
  // the first's.
  double h2d = profile.h2dBytesPerSecond * profile.duplexFactor;
  double d2h = profile.d2hBytesPerSecond * profile.duplexFactor;
  // A parameter's update: AdamW's rate alone, slowed by the step's copies, which share the
  // host's memory with it where the updates run beside them (not after several runs). Of a
  // pulled gradient, the share the host's I/O writes leave in the CPU's cache (measured by
  // the profile's pulled AdamW rate) AdamW reads there, and those bytes take no share of the
  // memory. Each byte moves at the speed AdamW's bytes alone move at its rate alone. (The
  // pull itself, at PCIe's rate, runs ahead of the update that reads it: AdamW, about a
  // fifth of that rate, sets the pace.)
  const double cached = pulled ? pulledGradientCacheShare(profile) : 0;
  // The host's AdamW updates all but the device's parameters.
  const double params = static_cast<double>(estimate.params - deviceParams);
  const double gradientBytes = weightPasses * params * 4;
  // A persistent weight's bf16 copy (its master's high half) crosses once a step, a copy's
  // bytes like the others', and so does the state of an update on the device.
  const double stepBytes =
      adamwBytes(params, cached) +
      static_cast<double>(estimate.h2dBytesPerStep + estimate.d2hBytesPerStep) -
      cached * gradientBytes;
  const double adamwSeconds = (ringed && params > 0 ? stepBytes / adamwBytes(params) : 1.0) /
                              profile.hostAdamParamsPerSecond;
  double edgeSeconds = micro * edge.seconds(profile);
  const int64_t epilogueParams = edgeParams - prologueParams;
  // Update ids within a step: layer n is n, the epilogue L, the prologue L + 1; step s's are
  // offset by s * (L + 2). Their landing order, and each one's parameters.
  const int64_t kEpilogue = L, kPrologue = L + 1, stride = L + 2;
  // A pulled gradient's update starts once its first chunk has crossed: a copy issued and
  // waited for (about 10 us, an estimate), then the chunk at PCIe's rate, each tensor.
  auto pullWaitOf = [&](int64_t item) {
    const PullWaits &waits = item == kEpilogue   ? epiloguePulls
                             : item == kPrologue ? prologuePulls
                                                 : layers[item].pulls;
    return pulled ? waits.tensors * 10e-6 + waits.firstElements * 4.0 / d2h : 0.0;
  };
  auto paramsOf = [&](int64_t item) {
    return item == kEpilogue   ? epilogueParams
           : item == kPrologue ? prologueParams
                               : layers[item].params;
  };
  // Its place in the order the next forward reads the parameters.
  auto needOf = [&](int64_t item) {
    return item == kPrologue ? 0 : item == kEpilogue ? L + 1 : item + 1;
  };
  auto onDevice = [&](int64_t item) {
    return estimate.deviceUpdateLayers > 0 &&
           (item == kPrologue ||
            (item < L && updatesLayerOnDevice(item, L, estimate.deviceUpdateLayers)));
  };
  std::vector<int64_t> landings;
  if (epilogueParams > 0)
    landings.push_back(kEpilogue);
  for (int64_t n = L; n-- > 0;)
    landings.push_back(n);
  if (prologueParams > 0)
    landings.push_back(kPrologue);
  auto simulate = [&](int64_t ring, std::vector<TimelineSlice> &timeline) {
    // Per landing, the landings whose ring bytes it overlaps: earlier ones of its step, later
    // ones of the step before.
    std::vector<std::vector<size_t>> overlaps(landings.size());
    if (ring > 0) {
      std::vector<int64_t> bytes;
      for (int64_t item : landings)
        bytes.push_back(paramsOf(item) * 4);
      auto places =
          placeInRing(bytes, gradientRingBytes(ring, ringLayerBytes, estimate.params * 4));
      for (size_t i = 0; i < places.size(); ++i)
        for (size_t j = 0; j < places.size(); ++j)
          if (i != j && places[i].first < places[j].second && places[j].first < places[i].second)
            overlaps[i].push_back(j);
    }
    std::vector<TimelineSlice> second;
    Simulator sim(profile, timeline);
    UpdateWorker worker(sim);
    // When each update on the device (by update id) has its state back in host memory.
    std::map<int64_t, double> deviceEnds;
    auto endOfUpdate = [&](int64_t id) {
      return onDevice(id % stride) ? deviceEnds.at(id) : worker.endOf(id);
    };
    double firstEnd = 0;
    for (int64_t s = 0; s < 2; ++s) {
      if (s == 1)
        sim.record(second); // the timeline holds the first step
      // When the previous step's update of `item` has run (s = 0, or an empty edge: at once).
      auto updated = [&](int64_t item) {
        return s > 0 && paramsOf(item) > 0 ? endOfUpdate((s - 1) * stride + item) : 0.0;
      };
      // A persistent set's bf16 copy crosses a piece at a time as its update writes it: from
      // the update's start, ending a piece after the update at the earliest.
      auto send = [&](int64_t item, int64_t sent, const std::string &name) {
        double seconds = static_cast<double>(sent) * stream / h2d, end = updated(item);
        double start = 0;
        if (s > 0 && paramsOf(item) > 0)
          start = std::max(end - (paramsOf(item) * adamwSeconds + pullWaitOf(item)),
                           end + std::min<double>(sent, kSendPiece) * stream / h2d - seconds);
        return sim.run("h2d", name, seconds, start);
      };
      // The device writes its own updates' weights: the epilogue's alone then cross.
      double edgeIn =
          onDevice(kPrologue) ? std::max(updated(kPrologue), send(kEpilogue, epilogueParams,
                                                                  "send the epilogue's update"))
          : edgesPersist ? send(kPrologue, edgeParams, "send the prologue's and epilogue's updates")
                         : sim.run("h2d", "prefetch prologue/epilogue weights",
                                   weightPasses * edgeParams * stream / h2d, updated(kPrologue));
      // Prefetch k (forward layers, then backward layers) fills slot k % 2, so it waits
      // until the command that read prefetch k - 2 is done with that slot.
      std::vector<double> slotReleased;
      auto slotFree = [&] {
        size_t k = slotReleased.size();
        return k >= 2 ? slotReleased[k - 2] : 0.0;
      };
      double previous = sim.run("compute", "prologue", edgeSeconds * 0.05, edgeIn);
      for (int64_t i = 0; i < L; ++i) {
        const LayerCost &layer = layers[i];
        // A persistent layer's weights cross after its update, into memory of their own.
        double weights =
            onDevice(i)   ? updated(i)
            : persists(i) ? send(i, layer.params, llvm::formatv("send layer {0}'s update", i).str())
                          : sim.run("h2d", llvm::formatv("prefetch layer {0}", i),
                                    weightPasses * layer.params * stream / h2d,
                                    std::max(slotFree(), updated(i)));
        previous = sim.run("compute", llvm::formatv("forward layer {0}", i),
                           micro * layer.forward.seconds(profile), std::max(weights, previous));
        slotReleased.push_back(previous);
        if (!options.checkpointsOnDevice)
          sim.run("d2h", llvm::formatv("offload checkpoint {0}", i),
                  micro * layer.checkpointBytes / d2h, previous);
      }
      previous = sim.run("compute", "epilogue, loss and their backward", edgeSeconds * 0.9,
                         std::max(previous, updated(kEpilogue)));
      // Landing k's gradients go out once their ring bytes are free; AdamW then updates them.
      size_t k = 0;
      auto land = [&](int64_t item, llvm::StringRef what) {
        for (size_t j : overlaps[k])
          if (j < k || s > 0)
            previous = std::max(previous, endOfUpdate((j < k ? s : s - 1) * stride + landings[j]));
        // Into a device ring, a copy within device memory (read and written).
        double bytes = weightPasses * paramsOf(item) * 4.0;
        double grads =
            sim.run("d2h", llvm::formatv("offload {0} gradients", what),
                    pulled ? 2 * bytes / profile.memoryBytesPerSecond : bytes / d2h, previous);
        if (onDevice(item)) {
          const size_t at = item == kPrologue ? L : item;
          // The device's AdamW reads and writes the state, the gradient and the weight in
          // device memory: 28 bytes a parameter.
          const double kernel = deviceOf[at] * 28.0 / profile.memoryBytesPerSecond;
          // Where it streams, the state crosses in a piece at a time and back as each piece
          // is updated, two pieces in flight, on the updater's own streams, and a piece more.
          // Of the time the step's crossings take, both ways one after the other, the streamed
          // updates take their parameters' share: measured on the H100 machine, the state
          // crossed at 28 GB/s each way beside the step's own copies, where PCIe carries 55
          // (3.82B: 1.9G parameters' state in 688 ms). Its bytes also pass through the host's
          // memory (read going in, written coming back), which the host's AdamW shares: of
          // the time the step's host bytes take at AdamW's pace, they take their share too.
          const double streamed = static_cast<double>(deviceOf[at] - residentOf[at]);
          double crossing = 0;
          if (streamed > 0) {
            const double share = streamed / static_cast<double>(streamedParams);
            double piece = std::min<double>(streamed, kUpdatePiece) * kDeviceUpdateBytes / h2d;
            double crossings = share * (static_cast<double>(estimate.h2dBytesPerStep) / h2d +
                                        static_cast<double>(estimate.d2hBytesPerStep) / d2h);
            double memory = share * stepBytes / (adamwBytes(1) * profile.hostAdamParamsPerSecond);
            crossing = std::max(crossings, memory) + piece;
          }
          deviceEnds[s * stride + item] =
              sim.run("updates", llvm::formatv("device AdamW {0}", what),
                      std::max(crossing, kernel), grads);
        } else {
          worker.land(s * stride + item, needOf(item), grads,
                      paramsOf(item) * adamwSeconds + pullWaitOf(item),
                      llvm::formatv("AdamW {0}", what));
        }
        ++k;
      };
      if (epilogueParams > 0)
        land(kEpilogue, "epilogue");
      for (int64_t n = L; n-- > 0;) {
        const LayerCost &layer = layers[n];
        double bytes = weightPasses * laterCrossings(n) * layer.params * stream +
                       (options.checkpointsOnDevice ? 0 : micro * layer.checkpointBytes);
        double weights = sim.run("h2d", llvm::formatv("prefetch layer {0} and its checkpoint", n),
                                 bytes / h2d, slotFree());
        double recompute =
            interval > 1 && layer.savedBytes == 0 ? micro * layer.forward.seconds(profile) : 0;
        previous = sim.run("compute", llvm::formatv("backward layer {0}", n),
                           micro * layer.backward.seconds(profile) + recompute,
                           std::max(weights, previous));
        slotReleased.push_back(previous);
        land(n, llvm::formatv("layer {0}", n).str());
      }
      previous = sim.run("compute", "prologue backward", edgeSeconds * 0.05, previous);
      if (prologueParams > 0)
        land(kPrologue, "prologue");
      if (s == 0)
        firstEnd = std::max(sim.end(), worker.endOf(-1));
    }
    return std::max(sim.end(), worker.endOf(-1)) - firstEnd;
  };
  // The ring's depth: where the CPU's updates fall behind the backward, a ring too shallow
  // makes the backward wait for them (and the worker, which takes the gradients the next
  // forward needs first, leaves the oldest, whose bytes the next to land need, for last), and
  // the next forward then finds fewer left to overlap. Where the least depth (three layers)
  // is within 1% of the fastest, it is enough. Otherwise, where the host's memory has room
  // beside the state and checkpoints, the ring holds every gradient: no landing then waits
  // for an update however slow the host's CPU (hosts of one kind measured 3.4 to 6.5 G
  // AdamW parameters a second: a depth that suffices on one stalls the backward on the other,
  // the gradients landing last waiting for the first's updates). Where it has not, the
  // shallowest depth within 1% of the fastest that fits. A pulled ring fits in the device
  // memory left beside the plan's peak instead.
  int64_t stateBytes = estimate.params * 12 + offloadedCheckpoints;
  auto fits = [&](int64_t depth) {
    double ring =
        static_cast<double>(gradientRingBytes(depth, ringLayerBytes, estimate.params * 4));
    if (pulled)
      return ring <= static_cast<double>(options.deviceRoomBytes);
    double hostRoom = profile.hostMemoryBytes * kHostShare;
    return hostRoom <= 0 || static_cast<double>(stateBytes) + ring <= hostRoom;
  };
  if (ringed && options.gradientRingLayers > 0) {
    estimate.gradientRingLayers = options.gradientRingLayers;
  } else if (ringed) {
    // The depth that holds every gradient, with room for the runtime's rounding of each to
    // the device alignment (its ring holds the gradients' aligned bytes).
    int64_t ringedBytes = estimate.params * 4 + parameterCount * kDeviceAlignment;
    int64_t whole = ringLayerBytes > 0 ? (ringedBytes + ringLayerBytes - 1) / ringLayerBytes : 0;
    int64_t deepest = std::max(kLeastGradientRingLayers, whole);
    while (deepest > kLeastGradientRingLayers && !fits(deepest))
      --deepest;
    std::vector<std::pair<int64_t, double>> steps;
    for (int64_t d = kLeastGradientRingLayers; d <= deepest; ++d) {
      std::vector<TimelineSlice> scratch;
      steps.push_back({d, simulate(d, scratch)});
    }
    double fastest = std::min_element(steps.begin(), steps.end(), [](auto &a, auto &b) {
                       return a.second < b.second;
                     })->second;
    if (steps.front().second > fastest * 1.01 && deepest >= whole &&
        steps.back().second <= fastest * 1.01)
      estimate.gradientRingLayers = deepest;
    else
      estimate.gradientRingLayers = std::find_if(steps.begin(), steps.end(), [&](auto &step) {
                                      return step.second <= fastest * 1.01;
                                    })->first;
  }
  estimate.predictedStepSeconds =
      simulate(ringed ? estimate.gradientRingLayers : 0, estimate.timeline);
  int64_t ringBytes =
      ringed ? gradientRingBytes(estimate.gradientRingLayers, ringLayerBytes, estimate.params * 4)
             : 0;
  if (pulled)
    estimate.gradientRingDeviceBytes = ringBytes;
  int64_t hostGradientBytes = !ringed  ? estimate.params * 8
                              : pulled ? kPullSlots * std::min(kPullChunk, largestParameter) * 4
                                       : ringBytes;
  estimate.hostBytes = stateBytes + hostGradientBytes;
  estimate.hostBytesPerParam =
      estimate.params ? static_cast<double>(estimate.hostBytes) / estimate.params : 0;
  for (const TimelineSlice &slice : estimate.timeline)
    estimate.busySeconds[slice.stream] += slice.seconds;
  return estimate;
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:f2} {1}", bytes, units[unit]).str();
}

std::string timelineJson(const StepEstimate &estimate) {
  const char *streams[] = {"h2d", "compute", "d2h", "cpu", "updates"};
  // The device's updates have a track where the step has any.
  const bool updates = llvm::any_of(
      estimate.timeline, [](const TimelineSlice &slice) { return slice.stream == "updates"; });
  llvm::json::Array events;
  for (int tid = 0; tid < (updates ? 5 : 4); ++tid)
    events.push_back(llvm::json::Object{
        {"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid},
        {"args", llvm::json::Object{{"name", streams[tid]}}}});
  for (const TimelineSlice &slice : estimate.timeline) {
    int tid = std::find(std::begin(streams), std::end(streams), slice.stream) - std::begin(streams);
    events.push_back(llvm::json::Object{{"name", slice.name},
                                        {"ph", "X"},
                                        {"pid", 1},
                                        {"tid", tid},
                                        {"ts", slice.start * 1e6},
                                        {"dur", slice.seconds * 1e6}});
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(llvm::json::Object{{"traceEvents", std::move(events)},
                                             {"displayTimeUnit", "ms"}});
  return text;
}

} // namespace mt
