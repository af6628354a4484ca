// Serializes a training module (after mt-autodiff) into the plan that mt-run executes.
#ifndef MT_PLAN_PLANEMITTER_H
#define MT_PLAN_PLANEMITTER_H

#include "plan/plan.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

namespace mt {

/// Fills `plan` from `module`'s @train_step and what mt-fit-step recorded on the module.
/// Parameter files are stored relative to `planDir` when they lie in it, absolute otherwise,
/// so a plan moves with its folder. `pipeline` is the pass pipeline that made the module
/// from the imported graph, which the plan keeps (mt-opt --pass-pipeline reproduces it).
mlir::LogicalResult emitPlan(mlir::ModuleOp module, llvm::StringRef planDir,
                             llvm::StringRef pipeline, plan::Plan &plan);

} // namespace mt

#endif // MT_PLAN_PLANEMITTER_H
