// Writes a compiled module as mt-run's files: the plan, and beside it the weights file of the
// parameters the model stored inline, both replaced whole or not at all.
#ifndef MT_PLAN_PLANWRITER_H
#define MT_PLAN_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mt {

/// Writes the plan of `module` (see emitPlan) to `path` and the inline parameters' bytes to
/// `path`.weights. Each is written beside its file and moved over it once both are
/// complete: a write that is killed or runs out of disk leaves the previous pair whole.
/// Returns the error, or "" (a failed emission has reported through the module's
/// diagnostics: "failed").
std::string writePlanFiles(mlir::ModuleOp module, llvm::StringRef path, llvm::StringRef pipeline);

} // namespace mt

#endif // MT_PLAN_PLANWRITER_H
