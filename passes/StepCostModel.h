// The cost model of a training step: what the plan moves, computes and keeps on the device,
// and the step time it predicts by simulating the MegaTrain schedule on a device profile
// (weights prefetched layer by layer into two slots on the h2d stream, layers computed on
// the compute stream, gradients and checkpoints offloaded on d2h, AdamW on the CPU).
#ifndef MT_PASSES_STEPCOSTMODEL_H
#define MT_PASSES_STEPCOSTMODEL_H

#include "passes/DeviceProfile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <limits>
#include <map>
#include <string>
#include <vector>

namespace mt {

/// The share of the target's host memory the host state may take: the rest is the system's
/// and the run's own (data, threads, pinned staging).
constexpr double kHostShare = 0.9;

struct ScheduleOptions {
  int64_t microBatches = 1;
  /// "auto" (the cost model picks), "layer-major" or "sample-major".
  std::string accumulation = "auto";
  /// Keep each layer's input (its checkpoint) on the device instead of in host memory; the
  /// default offloads them, so device memory does not grow with depth.
  bool checkpointsOnDevice = false;
  /// Prefetch streams the fp32 masters (cast on the device where slots are bf16) instead of
  /// the host's bf16 copies: twice the PCIe bytes of bf16 slots, and the host's masters kept
  /// whole (the same 12 bytes a parameter as split masters).
  bool streamMasters = false;
  /// Layers per checkpoint (mt-recompute's K): blocks of K recompute their forward.
  int64_t recomputeInterval = 1;
  /// Layers' gradients the ring holds (0: the cost model picks).
  int64_t gradientRingLayers = 0;
  /// The ring in device memory, each update pulling its gradient into the CPU's cache just
  /// before it runs (a plan's pull_gradients), where each update starts as its gradient lands.
  bool pullGradients = false;
  /// The device memory that ring may take beside the plan's peak.
  int64_t deviceRoomBytes = std::numeric_limits<int64_t>::max();
  /// The last layers whose weights stay on the device from forward to backward
  /// (mt-insert-transfers' resident-layers): their backward prefetch moves the checkpoint
  /// alone, and their weights stay in device memory beside the two slots.
  int64_t residentLayers = 0;
  /// The last layers whose weights stay on the device across steps (mt-insert-transfers'
  /// persistent-layers; at least the layer count: the prologue's and epilogue's too). Each
  /// crosses once a step, after its update, its bf16 copy a piece at a time as the update
  /// writes it.
  int64_t persistentLayers = 0;
  /// Layers spread over the step (updatesLayerOnDevice) and the prologue's parameters whose
  /// AdamW runs on the device (mt-run --device-updates), where every weight persists and the
  /// gradients are pulled (elsewhere none): their low halves and moments stay in device
  /// memory where the room beside the plan's peak and the ring holds them (mt-run's
  /// default), else cross in and back, kDeviceUpdateBytes a parameter each way; the host's
  /// AdamW updates the rest.
  int64_t deviceUpdateLayers = 0;
};

/// One command of the predicted step, for timelines.
struct TimelineSlice {
  std::string name;
  std::string stream; // "h2d", "compute", "d2h", "cpu" or "updates" (on the device)
  double start = 0, seconds = 0;
};

struct StepEstimate {
  int64_t params = 0, layers = 0, templates = 0;
  int64_t peakDeviceBytes = 0, hostBytes = 0;
  /// What the peak is made of, for messages: "weight slots 1.2 GiB, ...".
  std::string peakBreakdown;
  double hostBytesPerParam = 0;
  int64_t h2dBytesPerStep = 0, d2hBytesPerStep = 0;
  double flopsPerStep = 0;         // model FLOPs as PERF.md counts them (no recompute)
  double executedFlopsPerStep = 0; // what the kernels run, recompute included
  double predictedStepSeconds = 0;
  /// Seconds each resource is busy in the predicted step: h2d, compute, d2h, cpu, and
  /// updates (the device's AdamW with its state's crossings, where any).
  std::map<std::string, double> busySeconds;
  int64_t recomputeInterval = 1;
  /// Layers' gradients the host's ring holds where each update starts as its gradient lands:
  /// three where the CPU's updates keep up, else enough for every gradient where the host's
  /// memory has room, else the shallowest within 1% of the fastest that fits; 0 where every
  /// gradient has a slot (several runs a step).
  int64_t gradientRingLayers = 0;
  /// Whether that ring is in device memory (ScheduleOptions::pullGradients, where there is a
  /// ring), and its bytes there, beside peakDeviceBytes.
  bool pullGradients = false;
  int64_t gradientRingDeviceBytes = 0;
  bool streamMasters = false;
  std::string accumulation;
  bool checkpointsOnDevice = false;
  int64_t residentLayers = 0, persistentLayers = 0;
  /// ScheduleOptions::deviceUpdateLayers where the step can update on the device, else 0,
  /// and of the parameters updated there, those whose state stays in device memory.
  int64_t deviceUpdateLayers = 0, deviceUpdateResidentParams = 0;
  /// Layers that keep their activations for the backward (mt-autodiff's saved-layers), and
  /// those activations' device memory.
  int64_t savedLayers = 0, savedBytes = 0;
  std::vector<TimelineSlice> timeline;
};

/// What one kernel does, as the cost model counts it: dense FLOPs for the ops that run on
/// tensor cores (products, attention, the fused loss), else the bytes it reads and writes at
/// the device's activation width. The plan records it per command for mt-run --profile.
struct KernelWork {
  double flops = 0, bytes = 0;
};
KernelWork kernelWork(mlir::Operation *op);

/// Estimates the step of a module after mt-train (@train_step calling layer templates),
/// scheduled or not: copies and recomputed calls are what the model itself accounts for.
mlir::FailureOr<StepEstimate> estimateStep(mlir::ModuleOp module, const DeviceProfile &profile,
                                           const ScheduleOptions &options);

/// "1.25 GiB", "512.00 KiB": bytes in the largest binary unit that keeps a number >= 1.
std::string formatBytes(double bytes);

/// The timeline as Chrome trace-event JSON (Perfetto, chrome://tracing): one track per stream.
std::string timelineJson(const StepEstimate &estimate);

} // namespace mt

#endif // MT_PASSES_STEPCOSTMODEL_H
