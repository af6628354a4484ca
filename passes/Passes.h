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

/// Raises the primitive chains of an imported graph to fused ops (`mt-raise`).
void buildRaisePassPipeline(mlir::OpPassManager &pm);

struct TrainPipelineOptions : mlir::PassPipelineOptions<TrainPipelineOptions> {
  Option<bool> segmentLayers{*this, "segment-layers",
                             llvm::cl::desc("Cut the model into layer templates"),
                             llvm::cl::init(true)};
};

/// Turns the raised graph into the training step: layer templates, loss, backward, cleanup
/// (`mt-train`).
void buildTrainPassPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &options);

/// Registers every mt pass and pipeline with the global registry, for mt-opt and mtc.
void registerPassesAndPipelines();

} // namespace mt

#endif // MT_PASSES_PASSES_H
