// mt-fit-step: the compile policy. Builds the training step and its schedule with the first
// accumulation and recompute interval whose plan fits the device memory, and records them.
#include "passes/DeviceProfile.h"
#include "passes/DeviceReserve.h"
#include "passes/Passes.h"
#include "passes/StepCostModel.h"
#include "plan/DeviceLayout.h"

#include "passes/BufferLiveness.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

namespace mt {
#define GEN_PASS_DEF_FITSTEPPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// lighten-host takes another placement only for a step predicted this much of the one it has
/// or less: a 3% gain is worth the device memory.
constexpr double kLightenGain = 0.97;

/// gradient-ring=auto pulls the gradients only for a step predicted this much of the landed
/// one or less: the ring's device memory buys a 2% gain.
constexpr double kPullGain = 0.98;

/// The layer calls of the training step's forward.
int64_t layerCount(ModuleOp module) {
  int64_t layers = 0;
  module.lookupSymbol<func::FuncOp>("train_step").walk([&](func::CallOp call) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    layers += callee && !callee->hasAttr("mt.backward_of");
  });
  return layers;
}

struct FitStepPass : mt::impl::FitStepPassBase<FitStepPass> {
  using FitStepPassBase::FitStepPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (accumulation != "auto" && accumulation != "layer-major" && accumulation != "sample-major") {
      emitError(module.getLoc(),
                "mt-fit-step: accumulation must be auto, layer-major or sample-major, "
                "got '")
          << accumulation << "'";
      return signalPassFailure();
    }
    if (weightStream != "auto" && weightStream != "bf16" && weightStream != "fp32") {
      emitError(module.getLoc(), "mt-fit-step: weight-stream must be auto, bf16 or fp32, got '")
          << weightStream << "'";
      return signalPassFailure();
    }
    if (deviceUpdates != "auto" && !llvm::to_integer(deviceUpdates.getValue(), requestedUpdates)) {
      emitError(module.getLoc(), "mt-fit-step: device-updates must be a count of layers or "
                                 "auto, got '")
          << deviceUpdates << "'";
      return signalPassFailure();
    }
    if (gradientRing != "auto" && gradientRing != "host" && gradientRing != "device") {
      emitError(module.getLoc(), "mt-fit-step: gradient-ring must be auto, host or device, got '")
          << gradientRing << "'";
      return signalPassFailure();
    }
    if (microBatches < 1 || recomputeInterval < 0 || deviceMemory < 0 || residentLayers < 0 ||
        persistentLayers < 0 || savedLayers < 0 || requestedUpdates < 0) {
      emitError(module.getLoc(),
                "mt-fit-step: micro-batches must be at least 1, recompute-interval, "
                "device-memory, resident-layers, persistent-layers, saved-layers and "
                "device-updates at least 0; got ")
          << microBatches.getValue() << ", " << recomputeInterval.getValue() << ", "
          << deviceMemory.getValue() << ", " << residentLayers.getValue() << ", "
          << persistentLayers.getValue() << ", " << savedLayers.getValue() << " and "
          << requestedUpdates;
      return signalPassFailure();
    }
    // The device receives each update's bf16 copy of a persistent weight.
    auto floatBytes = module->getAttrOfType<IntegerAttr>(kDeviceFloatBytes);
    if (persistentLayers > 0 &&
        ((floatBytes && floatBytes.getInt() == 4) || weightStream == "fp32")) {
      emitError(module.getLoc(), "mt-fit-step: persistent-layers needs bf16 device floats and the "
                                 "host's bf16 copies (weight-stream bf16 or auto), got ")
          << (floatBytes && floatBytes.getInt() == 4 ? "fp32 device floats" : "weight-stream fp32");
      return signalPassFailure();
    }
    std::string error;
    FailureOr<DeviceProfile> loaded = loadDeviceProfile(target, error);
    if (failed(loaded)) {
      emitError(module.getLoc(), "mt-fit-step: ") << error;
      return signalPassFailure();
    }
    profile = *loaded;
    budget = deviceMemory > 0 ? static_cast<double>(deviceMemory) : profile.deviceMemoryBytes;

    llvm::SmallVector<std::string> modes;
    if (accumulation != "auto")
      modes.push_back(accumulation);
    else
      modes.assign({"layer-major", "sample-major"});
    if (microBatches == 1)
      modes.resize(1);
    for (auto [attempt, mode] : llvm::enumerate(modes)) {
      bool last = attempt + 1 == modes.size();
      FailureOr<ModuleOp> trained = train(mode, fitSavedLayers ? 0 : savedLayers.getValue());
      if (failed(trained))
        return signalPassFailure();
      int64_t interval = 0;
      // Asked for a device ring: the plan's arena and placement fit beside the least one and
      // the runtime's margin, so that the ring has room.
      planBudget = budget;
      if (schedule && gradientRing == "device") {
        ScheduleOptions least = costOptions(1, mode);
        least.pullGradients = true;
        least.deviceRoomBytes = 0;
        FailureOr<StepEstimate> ring = estimateStep(*trained, profile, least);
        if (failed(ring))
          return signalPassFailure();
        if (ring->pullGradients)
          planBudget = budget - static_cast<double>(ring->gradientRingDeviceBytes + kPullMargin);
      }
      if (schedule && fitSavedLayers && failed(fitSaved(*trained, mode)))
        return signalPassFailure();
      if (schedule) {
        // lighten-host may schedule the trained step again, other ways.
        FailureOr<ModuleOp> unscheduled;
        if (lightenHost) {
          OpPassManager copy(ModuleOp::getOperationName());
          unscheduled = tryPipeline(*trained, copy);
          if (failed(unscheduled))
            return signalPassFailure();
        }
        FailureOr<int64_t> fitted = scheduleWithin(*trained, /*report=*/last);
        if (failed(fitted)) {
          trained->erase();
          if (lightenHost)
            (*unscheduled)->erase();
          if (last || failedPipeline)
            return signalPassFailure();
          continue;
        }
        interval = *fitted;
        if (lightenHost && failed(lighten(*trained, *unscheduled, mode, interval)))
          return signalPassFailure();
      }
      adopt(*trained);
      if (failed(record(mode, interval)))
        return signalPassFailure();
      return;
    }
  }

private:
  /// The step trained from the pass's module with `mode`'s micro-batches, its last `saved`
  /// layers keeping their activations.
  FailureOr<ModuleOp> train(llvm::StringRef mode, int64_t saved) {
    OpPassManager pipeline(ModuleOp::getOperationName());
    TrainPipelineOptions options;
    options.segmentLayers = segmentLayers.getValue();
    options.savedLayers = saved;
    // Sample-major micro-batches are the runtime running the step once each; layer-major
    // ones are in the step.
    options.layerMajorMicroBatches = mode == "layer-major" ? microBatches.getValue() : 1;
    buildTrainPassPipeline(pipeline, options);
    return tryPipeline(getOperation(), pipeline);
  }

  /// fit-saved-layers: `trained` (no layer saving) becomes the step whose last N layers keep
  /// their activations, N as many as the cost model's peak leaves room for (each layer's
  /// activations weigh alike: every layer's, over the peak without, gives N), where that
  /// step is predicted at least 3% faster; the choice and its numbers are recorded.
  LogicalResult fitSaved(ModuleOp &trained, llvm::StringRef mode) {
    ScheduleOptions options = costOptions(recomputeInterval, mode);
    FailureOr<StepEstimate> none = estimateStep(trained, profile, options);
    if (failed(none))
      return failure();
    const int64_t layers = none->layers;
    // The trained step that saves, erased unless it becomes the plan.
    ModuleOp candidate;
    auto dropCandidate = llvm::make_scope_exit([&] {
      if (candidate)
        candidate->erase();
    });
    auto trainSaving = [&](int64_t count) -> FailureOr<StepEstimate> {
      if (candidate)
        candidate->erase();
      candidate = nullptr;
      FailureOr<ModuleOp> saving = train(mode, count);
      if (failed(saving))
        return failure();
      candidate = *saving;
      return estimateStep(candidate, profile, options);
    };
    FailureOr<StepEstimate> step = trainSaving(layers);
    if (failed(step))
      return failure();
    if (step->savedBytes == 0) {
      savedChoice = "none: no layer has a product or attention to keep";
      return success();
    }
    // The cost model's peak is the schedule's within a few percent: room is kept for that.
    double room = planBudget * 0.95 - static_cast<double>(none->peakDeviceBytes);
    double perLayer = static_cast<double>(step->savedBytes) / layers;
    int64_t count = std::clamp<int64_t>(static_cast<int64_t>(room / perLayer), 0, layers);
    if (count == 0) {
      savedChoice = "none: a layer's activations (" + formatBytes(static_cast<int64_t>(perLayer)) +
                    ") find no room beside the peak of " + formatBytes(none->peakDeviceBytes);
      return success();
    }
    if (count < layers && failed(step = trainSaving(count)))
      return failure();
    bool chosen = step->peakDeviceBytes <= planBudget * 0.95 &&
                  step->predictedStepSeconds <= none->predictedStepSeconds * kLightenGain;
    // The schedule must fit too: its peak is the cost model's within a few percent.
    bool scheduleFits = !chosen || fitsScheduled(candidate);
    if (failedPipeline)
      return failure();
    char numbers[200];
    std::snprintf(numbers, sizeof numbers,
                  "the last %lld of %lld layers keeping their activations (%s): the cost model "
                  "predicts %.3g s against %.3g s recomputing every layer",
                  static_cast<long long>(count), static_cast<long long>(layers),
                  formatBytes(step->savedBytes).c_str(), step->predictedStepSeconds,
                  none->predictedStepSeconds);
    savedChoice = (chosen && scheduleFits ? "" : "none, with ") + std::string(numbers) +
                  (scheduleFits ? "" : ", but its schedule does not fit the budget");
    if (!chosen || !scheduleFits)
      return success();
    trained->erase();
    trained = candidate;
    candidate = nullptr;
    return success();
  }

  /// Whether `trained` scheduled as asked fits the budget (scheduled on a copy).
  bool fitsScheduled(ModuleOp trained) {
    OpPassManager copy(ModuleOp::getOperationName());
    FailureOr<ModuleOp> scheduled = tryPipeline(trained, copy);
    if (failed(scheduled))
      return false;
    bool fits = succeeded(scheduleWithin(*scheduled, /*report=*/false));
    (*scheduled)->erase();
    return fits;
  }

  /// Runs `pipeline` on a copy of `from` nested in this pass's module (a pass may only run
  /// pipelines on what it holds); returns the copy, which adopt() or erase() ends.
  FailureOr<ModuleOp> tryPipeline(ModuleOp from, OpPassManager &pipeline) {
    ModuleOp module = getOperation();
    auto copy = llvm::cast<ModuleOp>(from->clone());
    // A copy of the pass's own module holds none of the tries nested in it.
    for (ModuleOp nested : llvm::make_early_inc_range(copy.getOps<ModuleOp>()))
      nested->erase();
    module.getBody()->push_back(copy);
    if (failed(runPipeline(pipeline, copy))) {
      copy->erase();
      return failure();
    }
    return copy;
  }

  /// The module becomes `chosen`: its operations and attributes.
  void adopt(ModuleOp chosen) {
    ModuleOp module = getOperation();
    chosen->remove();
    module.getBody()->clear();
    module.getBody()->getOperations().splice(module.getBody()->end(),
                                             chosen.getBody()->getOperations());
    module->setAttrs(chosen->getAttrDictionary());
    chosen->erase();
  }

  /// Schedules `trained` in place with the recompute interval asked for, or the smallest
  /// that fits the budget (only checkpoints kept on the device depend on it), its offloads
  /// overlapped with compute where any interval fits so (mt-assign-buffers). Returns K; a
  /// plan that does not fit fails, with an error giving the smallest one's numbers when
  /// `report`, else silently (failure() also when a pipeline itself failed, which has
  /// reported: failedPipeline).
  FailureOr<int64_t> scheduleWithin(ModuleOp &trained, bool report) {
    int64_t layers = layerCount(trained);
    llvm::SmallVector<int64_t> candidates;
    if (recomputeInterval > 0)
      candidates.push_back(recomputeInterval);
    else if (!checkpointsOnDevice)
      candidates.push_back(1);
    else
      for (int64_t k = 1; k == 1 || k / 2 < layers; k *= 2)
        candidates.push_back(std::min<int64_t>(k, std::max<int64_t>(layers, 1)));
    int64_t smallest = 0, bestInterval = 1;
    std::string breakdown = "unknown";
    // Every interval with its offloads overlapped, then, where none fits, without (one
    // buffer fewer alive, copies that compute waits for).
    llvm::SmallVector<std::pair<int64_t, bool>> tries;
    for (bool overlap : {true, false})
      for (int64_t k : candidates)
        tries.push_back({k, overlap});
    for (auto [k, overlap] : tries) {
      OpPassManager pipeline(ModuleOp::getOperationName());
      SchedulePipelineOptions options;
      options.recomputeInterval = k;
      options.checkpointsOnDevice = checkpointsOnDevice.getValue();
      options.overlapOffloads = overlap;
      options.residentLayers = residentLayers.getValue();
      options.persistentLayers = persistentLayers.getValue();
      buildSchedulePassPipeline(pipeline, options);
      FailureOr<ModuleOp> scheduled = tryPipeline(trained, pipeline);
      if (failed(scheduled)) {
        failedPipeline = true;
        return failure();
      }
      int64_t peak = peakDeviceBytes(*scheduled);
      if (peak <= planBudget) {
        trained->erase();
        trained = *scheduled;
        return k;
      }
      if (!smallest || peak < smallest) {
        smallest = peak;
        bestInterval = k;
        // What the smallest plan's memory is made of, as the cost model sees it.
        FailureOr<StepEstimate> parts = estimateStep(*scheduled, profile, costOptions(k));
        if (succeeded(parts))
          breakdown = parts->peakBreakdown;
      }
      scheduled->erase();
    }
    // At the model's location, without the module attached: the numbers say it all.
    if (report)
      emitError(getOperation().getLoc())
          << "the plan needs " << formatBytes(smallest)
          << " of device memory (its arena and reserve, recompute interval " << bestInterval
          << "; the cost model's largest phase is " << breakdown << ") but " << formatBytes(budget)
          << " are available"
          << (planBudget < budget ? ", and the least device ring of gradients and the margin "
                                    "beside it need " +
                                        formatBytes(budget - planBudget) +
                                        " of them (gradient-ring device; host needs neither)"
                                  : std::string())
          << (checkpointsOnDevice ? "; try checkpoints on the host (mtc --checkpoints=host)" : "");
    return failure();
  }

  /// lighten-host: the CPU's AdamW shares the host's memory with the step's copies, so where
  /// it is behind, a step that moves fewer bytes through that memory is faster. Of the plans
  /// with checkpoints on the device or on the host, each with as many layers resident as the
  /// cost model's peak leaves room for, the fastest predicted
  /// replaces `trained` (scheduled with `interval`) where it is at least 3% faster and its
  /// schedule fits; the choice and its numbers are recorded for the summary. `unscheduled`,
  /// the trained step before its schedule, is consumed.
  LogicalResult lighten(ModuleOp &trained, ModuleOp unscheduled, llvm::StringRef mode,
                        int64_t &interval) {
    // `unscheduled` ends here, unless it becomes the plan.
    auto dropUnscheduled = llvm::make_scope_exit([&] {
      if (unscheduled)
        unscheduled->erase();
    });
    FailureOr<StepEstimate> now = estimateStep(trained, profile, costOptions(interval, mode));
    if (failed(now))
      return failure();
    const int64_t layers = now->layers; // each layer once, whatever the micro-batches
    const double faster = now->predictedStepSeconds * kLightenGain;
    double best = now->predictedStepSeconds;
    std::optional<std::pair<bool, int64_t>> chosen;
    for (bool onDevice : {true, false}) {
      auto estimate = [&](int64_t resident) {
        ScheduleOptions options = costOptions(1, mode);
        options.checkpointsOnDevice = onDevice;
        options.residentLayers = resident;
        return estimateStep(unscheduled, profile, options);
      };
      // The most layers resident whose peak fits (it grows with them), by bisection; the
      // cost model's peak is the schedule's within a few percent: room is kept for that.
      auto fits = [&](const StepEstimate &step) {
        return step.peakDeviceBytes <= planBudget * 0.95;
      };
      FailureOr<StepEstimate> step = estimate(0);
      if (failed(step))
        return failure();
      if (!fits(*step))
        continue;
      int64_t low = 0, high = layers; // low fits; the most that fits is in [low, high]
      while (low < high) {
        int64_t middle = (low + high + 1) / 2;
        FailureOr<StepEstimate> tried = estimate(middle);
        if (failed(tried))
          return failure();
        if (fits(*tried)) {
          low = middle;
          step = tried;
        } else {
          high = middle - 1;
        }
      }
      if (step->predictedStepSeconds < best) {
        best = step->predictedStepSeconds;
        chosen = {onDevice, low};
      }
    }
    if (!chosen || best > faster)
      return success();
    bool askedOnDevice = checkpointsOnDevice;
    int64_t askedResident = residentLayers;
    checkpointsOnDevice = chosen->first;
    residentLayers = chosen->second;
    FailureOr<int64_t> fitted = scheduleWithin(unscheduled, /*report=*/false);
    // The schedule may need more recomputation than the estimate's (a larger K where one
    // layer's checkpoint each does not fit): the plan as scheduled must still be faster.
    FailureOr<StepEstimate> scheduled =
        succeeded(fitted) ? estimateStep(unscheduled, profile, costOptions(*fitted, mode))
                          : FailureOr<StepEstimate>(failure());
    if (failed(scheduled) || scheduled->predictedStepSeconds > faster) {
      checkpointsOnDevice = askedOnDevice;
      residentLayers = askedResident;
      return failedPipeline ? failure() : success();
    }
    trained->erase();
    trained = unscheduled;
    unscheduled = nullptr;
    interval = *fitted;
    char numbers[160];
    std::snprintf(numbers, sizeof numbers,
                  "checkpoints on the %s, %lld of %lld layers resident: the cost model predicts "
                  "%.3g s against %.3g s",
                  chosen->first ? "device" : "host", static_cast<long long>(chosen->second),
                  static_cast<long long>(layers), scheduled->predictedStepSeconds,
                  now->predictedStepSeconds);
    placement = std::string(numbers) + " (AdamW behind, sharing host memory with the copies)";
    return success();
  }

  /// The cost model's view of a step scheduled with interval `k`.
  ScheduleOptions costOptions(int64_t k, llvm::StringRef mode = "layer-major",
                              bool streamMasters = false) const {
    ScheduleOptions options;
    options.microBatches = microBatches;
    options.accumulation = mode.str();
    options.checkpointsOnDevice = checkpointsOnDevice;
    options.recomputeInterval = std::max<int64_t>(k, 1);
    options.streamMasters = streamMasters;
    options.residentLayers = residentLayers;
    options.persistentLayers = persistentLayers;
    return options;
  }

  /// Where prefetch streams the weights from (weight-stream), recorded on the module with
  /// the reason. Fails only where the masters were asked for and their staging does not fit.
  LogicalResult chooseWeightStream() {
    ModuleOp module = getOperation();
    Builder b(module.getContext());
    auto floatBytes = module->getAttrOfType<IntegerAttr>(kDeviceFloatBytes);
    bool masters = weightStream == "fp32";
    std::string why = "as asked (weight-stream " + weightStream + ")";
    if (floatBytes && floatBytes.getInt() == 4) {
      masters = true;
      why = "the fp32 slots read them";
    } else if (persistentLayers > 0) {
      why = "the persistent weights receive each update's bf16 copy";
    } else if (weightStream == "auto") {
      // The copies are the split masters' high halves: they cost the host no memory, and the
      // fp32 masters would cost twice the PCIe bytes.
      why = "the host's split masters hold them (12 bytes a parameter either way)";
    }
    module->setAttr(kStreamMasters, b.getBoolAttr(masters));
    if (masters && schedule && peakDeviceBytes(module) > planBudget) {
      if (weightStream == "fp32")
        return emitError(module.getLoc())
               << "streaming the fp32 masters needs " << formatBytes(deviceReserve(module).staging)
               << " of device memory to cast them in, beyond the " << formatBytes(planBudget)
               << " available; stream bf16 copies (weight-stream bf16)";
      masters = false;
      why += "; no device memory is left for the masters' staging";
      module->setAttr(kStreamMasters, b.getBoolAttr(false));
    }
    module->setAttr("mt.weight_stream",
                    b.getStringAttr((masters ? "fp32 masters, cast on the device: "
                                             : "bf16 copies kept on the host: ") +
                                    why));
    return success();
  }

  /// Where the gradients' ring is (gradient-ring), recorded on the module with the reason
  /// (`mt.pull_gradients`, `mt.gradient_ring`): in host memory, where each gradient lands; or
  /// in device memory beside the plan's peak, within the budget, each update pulling its
  /// gradient just before it runs (fewer bytes through the host's memory by the share its I/O
  /// writes leave in the CPU's cache, which the profile measures; and a ring as deep as the
  /// device has room for). `auto` pulls where the cost model predicts a step at least 2%
  /// faster.
  /// `landedOptions` is the step's, landed; returns the estimate of the step as chosen, and
  /// the options it was estimated with in `chosen`.
  FailureOr<StepEstimate> chooseGradientRing(const ScheduleOptions &landedOptions,
                                             ScheduleOptions &chosen) {
    chosen = landedOptions;
    ModuleOp module = getOperation();
    Builder b(module.getContext());
    bool pull = false;
    std::string why = schedule ? "in host memory (gradient-ring host, the default; device or "
                                 "auto put the ring in device memory)"
                               : "in host memory: the step is not scheduled";
    FailureOr<StepEstimate> landed = estimateStep(module, profile, landedOptions);
    if (failed(landed))
      return failure();
    FailureOr<StepEstimate> pulled = failure();
    if (gradientRing != "host" && schedule) {
      // The runtime leaves kPullMargin of the device free beside the ring.
      int64_t peak = peakDeviceBytes(module);
      ScheduleOptions pulledOptions = landedOptions;
      pulledOptions.pullGradients = true;
      pulledOptions.deviceRoomBytes = std::max<int64_t>(budget - peak - kPullMargin, 0);
      pulled = estimateStep(module, profile, pulledOptions);
      if (failed(pulled))
        return failure();
      if (!pulled->pullGradients) {
        if (gradientRing == "device")
          return emitError(module.getLoc())
                 << "gradient-ring=device needs a ring, which only a step whose updates start "
                    "as its gradients land has (one run a step: layer-major accumulation)";
        why = "none: every gradient and their sum in host memory (several runs a step)";
      } else {
        bool fits = pulled->gradientRingDeviceBytes <= pulledOptions.deviceRoomBytes;
        if (gradientRing == "device" && !fits)
          return emitError(module.getLoc())
                 << "pulled gradients need a ring of "
                 << formatBytes(pulled->gradientRingDeviceBytes)
                 << " of device memory beside the plan's " << formatBytes(peak) << " and "
                 << formatBytes(kPullMargin) << " kept free, beyond the " << formatBytes(budget)
                 << " available; land them in host memory (mtc --gradient-ring=host)";
        // The cache's share is the profile's measure (its pulled AdamW rate), or none.
        std::string reads =
            profile.hostAdamPulledParamsPerSecond > 0
                ? std::to_string(std::lround(100 * pulledGradientCacheShare(profile))) +
                      "% of a pulled gradient from the CPU's cache, by the profile"
                : std::string("a pulled gradient from host memory: the profile has no pulled "
                              "AdamW rate");
        char numbers[192];
        std::snprintf(numbers, sizeof numbers,
                      "the cost model predicts a step of %.3g s pulling them from a device ring "
                      "of %s, %.3g s landing them in host memory",
                      pulled->predictedStepSeconds,
                      formatBytes(pulled->gradientRingDeviceBytes).c_str(),
                      landed->predictedStepSeconds);
        pull = gradientRing == "device" ||
               (fits && pulled->predictedStepSeconds <= landed->predictedStepSeconds * kPullGain);
        if (pull)
          chosen = pulledOptions;
        why = (pull ? "in device memory, each update pulling its gradient: "
                    : "in host memory, where each gradient lands: ") +
              (gradientRing == "device" ? std::string("as asked (gradient-ring device); ") : "") +
              numbers + " (AdamW reading " + reads + ")" +
              (fits ? "" : "; the device ring does not fit the budget beside the plan's peak");
      }
    }
    module->setAttr("mt.pull_gradients", b.getBoolAttr(pull));
    module->setAttr("mt.gradient_ring", b.getStringAttr(why));
    return pull ? pulled : landed;
  }

  /// Which layers update on the device (device-updates), recorded on the module with the
  /// reason (`mt.device_update_layers`, `mt.device_updates`), from the step as chosen so far
  /// (`options`, `chosen`: its ring kept as deep); returns the estimate of the step with them.
  FailureOr<StepEstimate> chooseDeviceUpdates(ScheduleOptions options, StepEstimate chosen) {
    ModuleOp module = getOperation();
    Builder b(module.getContext());
    if (deviceUpdates == "0")
      return chosen;
    const int64_t layers = chosen.layers;
    const bool can = chosen.pullGradients && chosen.persistentLayers == layers && layers > 0;
    std::string why;
    StepEstimate best = chosen;
    options.gradientRingLayers = chosen.gradientRingLayers;
    auto estimateWith = [&](int64_t n) {
      options.deviceUpdateLayers = n;
      return estimateStep(module, profile, options);
    };
    char numbers[256];
    if (!can) {
      const char *needs = "every weight persistent (persistent-layers at least the layer "
                          "count) and the gradients in a device ring (gradient-ring=device)";
      if (deviceUpdates != "auto")
        return emitError(module.getLoc())
               << "device-updates " << deviceUpdates << " needs " << needs;
      why = std::string("none: the step updates on the device with ") + needs;
    } else if (deviceUpdates == "auto") {
      for (int64_t n = 1; n <= layers; ++n) {
        FailureOr<StepEstimate> step = estimateWith(n);
        if (failed(step))
          return failure();
        if (step->predictedStepSeconds < best.predictedStepSeconds)
          best = *step;
      }
      if (best.predictedStepSeconds > chosen.predictedStepSeconds * kPullGain)
        best = chosen;
      if (best.deviceUpdateLayers == 0)
        std::snprintf(numbers, sizeof numbers,
                      "none: the cost model predicts %.3g s with none, no count of layers "
                      "updated on the device 2%% faster",
                      chosen.predictedStepSeconds);
      else
        std::snprintf(
            numbers, sizeof numbers,
            "the cost model predicts %.3g s with %lld of %lld layers' "
            "updates on the device (%s of their state resident there), %.3g s with "
            "none",
            best.predictedStepSeconds, static_cast<long long>(best.deviceUpdateLayers),
            static_cast<long long>(layers),
            formatBytes(static_cast<double>(best.deviceUpdateResidentParams) * kDeviceUpdateBytes)
                .c_str(),
            chosen.predictedStepSeconds);
      why = numbers;
    } else {
      FailureOr<StepEstimate> step = estimateWith(std::min(requestedUpdates, layers));
      if (failed(step))
        return failure();
      best = *step;
      std::snprintf(
          numbers, sizeof numbers,
          "as asked (device-updates %lld): the cost model predicts %.3g s (%s of "
          "their state resident on the device), %.3g s with none",
          static_cast<long long>(requestedUpdates), best.predictedStepSeconds,
          formatBytes(static_cast<double>(best.deviceUpdateResidentParams) * kDeviceUpdateBytes)
              .c_str(),
          chosen.predictedStepSeconds);
      why = numbers;
    }
    module->setAttr("mt.device_update_layers", b.getI64IntegerAttr(best.deviceUpdateLayers));
    module->setAttr("mt.device_updates", b.getStringAttr(why));
    return best;
  }

  /// What was chosen, and the cost model's model FLOP and predicted step.
  LogicalResult record(llvm::StringRef mode, int64_t interval) {
    ModuleOp module = getOperation();
    if (failed(chooseWeightStream()))
      return failure();
    auto masters = module->getAttrOfType<BoolAttr>(kStreamMasters);
    ScheduleOptions chosen;
    FailureOr<StepEstimate> step =
        chooseGradientRing(costOptions(interval, mode, masters.getValue()), chosen);
    if (failed(step))
      return failure();
    step = chooseDeviceUpdates(chosen, *step);
    if (failed(step))
      return failure();
    Builder b(module.getContext());
    module->setAttr("mt.micro_batches", b.getI64IntegerAttr(microBatches));
    module->setAttr("mt.accumulation", b.getStringAttr(mode));
    module->setAttr("mt.recompute_interval", b.getI64IntegerAttr(step->recomputeInterval));
    module->setAttr("mt.gradient_ring_layers", b.getI64IntegerAttr(step->gradientRingLayers));
    // The room beside the plan's peak that the ring and the device's updates' resident state
    // were placed in, for the summary's estimate.
    module->setAttr("mt.device_room_bytes", b.getI64IntegerAttr(chosen.deviceRoomBytes));
    module->setAttr("mt.resident_layers", b.getI64IntegerAttr(step->residentLayers));
    module->setAttr("mt.persistent_layers", b.getI64IntegerAttr(step->persistentLayers));
    module->setAttr("mt.checkpoints_on_device", b.getBoolAttr(step->checkpointsOnDevice));
    if (!placement.empty())
      module->setAttr("mt.placement", b.getStringAttr(placement));
    if (!savedChoice.empty())
      module->setAttr("mt.saved_layers_choice", b.getStringAttr(savedChoice));
    module->setAttr("mt.device_memory_budget", b.getF64FloatAttr(schedule ? budget : 0));
    module->setAttr("mt.model_flops", b.getF64FloatAttr(step->flopsPerStep));
    module->setAttr("mt.predicted_step_seconds", b.getF64FloatAttr(step->predictedStepSeconds));
    return success();
  }

  DeviceProfile profile;
  double budget = 0;
  /// What the plan's arena and placement may take of it: the budget, less the least device
  /// ring and kPullMargin where gradient-ring=device asks for one.
  double planBudget = 0;
  std::string placement;   // lighten-host's choice, where it chose
  std::string savedChoice; // fit-saved-layers' choice, where it chose
  int64_t requestedUpdates = 0; // device-updates as a count (auto: 0)
  bool failedPipeline = false;
};

} // namespace
