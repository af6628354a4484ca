// What `mtc --summary` prints of a compiled module: its parameters, op counts and signature,
// and the cost model's step, for people (text) or scripts (one JSON object).
#ifndef MT_PASSES_STEPSUMMARY_H
#define MT_PASSES_STEPSUMMARY_H

#include "passes/StepCostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace mt {

/// What the summary says beside the module: the input it was compiled from (where the module
/// names none), the options that shaped the step, and the pipeline that made it.
struct SummaryContext {
  std::string input, target, pipeline;
  int64_t microBatches = 1;
  bool json = false;
};

/// `step` is the cost model's estimate, or null before mt-train.
void printSummary(mlir::ModuleOp module, const StepEstimate *step, const SummaryContext &context,
                  llvm::raw_ostream &os);

} // namespace mt

#endif // MT_PASSES_STEPSUMMARY_H
