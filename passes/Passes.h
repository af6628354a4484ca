// Pass constructors (generated from Passes.td) and the pipelines that group them.
#ifndef MT_PASSES_PASSES_H
#define MT_PASSES_PASSES_H

#include "ir/MtOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mt {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

struct RaisePipelineOptions : mlir::PassPipelineOptions<RaisePipelineOptions> {
  Option<bool> foldAttentionLayout{
      *this, "fold-attention-layout",
      llvm::cl::desc("Attention on the projections' rows, without transposes into heads"),
      llvm::cl::init(true)};
};

/// Raises the primitive chains of an imported graph to fused ops (`mt-raise`).
void buildRaisePassPipeline(mlir::OpPassManager &pm, const RaisePipelineOptions &options);

struct TrainPipelineOptions : mlir::PassPipelineOptions<TrainPipelineOptions> {
  Option<bool> segmentLayers{*this, "segment-layers",
                             llvm::cl::desc("Cut the model into layer templates"),
                             llvm::cl::init(true)};
  Option<int64_t> layerMajorMicroBatches{
      *this, "layer-major-micro-batches",
      llvm::cl::desc("Micro-batches each layer runs while resident (1: none)"),
      llvm::cl::init(1)};
  Option<int64_t> savedLayers{
      *this, "saved-layers",
      llvm::cl::desc("The last layers that keep their activations for the backward (0: none)"),
      llvm::cl::init(0)};
};

/// Turns the raised graph into the training step: layer templates, loss, backward, cleanup
/// (`mt-train`).
void buildTrainPassPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &options);

struct SchedulePipelineOptions : mlir::PassPipelineOptions<SchedulePipelineOptions> {
  Option<int64_t> recomputeInterval{*this, "recompute-interval",
                                    llvm::cl::desc("Layers per checkpoint (K)"),
                                    llvm::cl::init(1)};
  Option<int64_t> lookahead{*this, "lookahead",
                            llvm::cl::desc("Calls ahead that weights are prefetched"),
                            llvm::cl::init(2)};
  Option<bool> checkpointsOnDevice{*this, "checkpoints-on-device",
                                   llvm::cl::desc("Keep layer inputs on the device"),
                                   llvm::cl::init(false)};
  Option<bool> overlapOffloads{
      *this, "overlap-offloads",
      llvm::cl::desc("Keep a tensor an offload reads until the next offload (mt-assign-buffers)"),
      llvm::cl::init(true)};
  Option<int64_t> residentLayers{
      *this, "resident-layers",
      llvm::cl::desc("The last layers whose weights stay on the device from forward to backward"),
      llvm::cl::init(0)};
  Option<int64_t> persistentLayers{
      *this, "persistent-layers",
      llvm::cl::desc("The last layers whose weights stay on the device across steps"),
      llvm::cl::init(0)};
};

/// Turns the training step into the MegaTrain schedule: copies, buffers, streams
/// (`mt-schedule`).
void buildSchedulePassPipeline(mlir::OpPassManager &pm, const SchedulePipelineOptions &options);

/// Registers every mt pass and pipeline with the global registry, for mt-opt and mtc.
void registerPassesAndPipelines();

} // namespace mt

#endif // MT_PASSES_PASSES_H
