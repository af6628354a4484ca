// The pass pipelines of mt and their registration, so mt-opt and mtc run them by name.
#include "passes/Passes.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace mt {

namespace {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace

void buildRaisePassPipeline(OpPassManager &pm, const RaisePipelineOptions &options) {
  // Canonicalization first: it folds transposes into matmul flags and chains of reshapes into
  // one, the forms that the linear and attention patterns look for.
  pm.addPass(createCanonicalizerPass());
  // Parameter-driven patterns next: they only look at which operand is an mt.param.
  pm.addPass(createRaiseEmbeddingPass());
  pm.addPass(createRaiseLinearPass());
  // LayerNorm before RMSNorm: its centered input, (x - mean) / sqrt(mean((x - mean)^2) + eps),
  // also reads as the RMSNorm of x - mean. Norms before activations: a norm's weight product
  // must not be mistaken for a factor of an activation's product tree.
  pm.addPass(createRaiseLayerNormPass());
  pm.addPass(createRaiseRmsNormPass());
  pm.addPass(createRaiseGeluPass());
  pm.addPass(createRaiseSiluPass());
  // Gated units once their activations are raised.
  pm.addPass(createRaiseGluPass());
  // RoPE before attention: attention's keys are traced back through the repeat of
  // grouped-query heads to whatever produced them, by then an mt.rope.
  pm.addPass(createRaiseRopePass());
  pm.addPass(createRaiseAttentionPass());
  // Attention raised, the transposes into its heads and back fold into its layout.
  if (options.foldAttentionLayout)
    pm.addPass(createFoldAttentionLayoutPass());
  // Constants and views that only the raised chains used are now dead or duplicated.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
}

void buildTrainPassPipeline(OpPassManager &pm, const TrainPipelineOptions &options) {
  // Layers first, so that autodiff differentiates each template once into a backward
  // template (which recomputes the layer from its input) instead of every layer's copy.
  if (options.segmentLayers)
    pm.addPass(createSegmentLayersPass());
  // Layer-major micro-batches are copies of the forward, made before autodiff so that each
  // parameter's gradient is summed over them on the device.
  SplitMicroBatchesPassOptions split;
  split.count = options.layerMajorMicroBatches;
  pm.addPass(createSplitMicroBatchesPass(split));
  // The loss and the backward are built over fused ops, whose gradient rules are single ops.
  AutodiffPassOptions autodiff;
  autodiff.savedLayers = options.savedLayers;
  pm.addPass(createAutodiffPass(autodiff));
  // Gradient rules also differentiate into constants and integer views; those results are
  // dead, and reused subexpressions (transposed weights, broadcast scalars) merge.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  // Sums of gradient parts last: the canonical form has settled which adds remain.
  pm.addPass(createAccumulateGradientsPass());
}

void buildSchedulePassPipeline(OpPassManager &pm, const SchedulePipelineOptions &options) {
  // Recompute first: it decides which layer inputs the backward needs from the forward, the
  // checkpoints that the copies then move.
  RecomputePassOptions recompute;
  recompute.interval = options.recomputeInterval;
  pm.addPass(createRecomputePass(recompute));
  // A layer template that no call reads any more (the plain forward of layers that all keep
  // their activations) goes.
  pm.addPass(createSymbolDCEPass());
  // The copies next: they decide which tensors live on the device and when.
  InsertTransfersPassOptions transfers;
  transfers.lookahead = options.lookahead;
  transfers.checkpointsOnDevice = options.checkpointsOnDevice;
  transfers.residentLayers = options.residentLayers;
  transfers.persistentLayers = options.persistentLayers;
  pm.addPass(createInsertTransfersPass(transfers));
  // Offsets next, by the liveness the copies created; the streams pass orders every reuse of
  // a buffer after the last use of its previous tensor, so it needs the offsets.
  AssignBuffersPassOptions buffers;
  buffers.overlapOffloads = options.overlapOffloads;
  pm.addPass(createAssignBuffersPass(buffers));
  pm.addPass(createAssignStreamsPass());
}

void registerPassesAndPipelines() {
  registerMTPasses();
  PassPipelineRegistration<RaisePipelineOptions>(
      "mt-raise", "Raise the primitive chains of an imported ONNX graph to fused ops",
      buildRaisePassPipeline);
  PassPipelineRegistration<TrainPipelineOptions>(
      "mt-train", "Cut layers into templates, append the loss and the backward pass",
      buildTrainPassPipeline);
  PassPipelineRegistration<SchedulePipelineOptions>(
      "mt-schedule", "Explicit copies, device buffers, streams and events for @train_step",
      buildSchedulePassPipeline);
}

} // namespace mt
