// The plan and its weights file, written through .partial files and renamed.
#include "plan/PlanWriter.h"

#include "frontend/InlineWeights.h"
#include "plan/PlanEmitter.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mt {

std::string writePlanFiles(mlir::ModuleOp module, llvm::StringRef path, llvm::StringRef pipeline) {
  std::string weightsPath = (path + ".weights").str(), partialWeights = weightsPath + ".partial";
  mlir::FailureOr<bool> wroteWeights = writeInlineWeights(module, weightsPath, partialWeights);
  if (mlir::failed(wroteWeights))
    return "failed";
  auto dropPartials = [&] {
    if (*wroteWeights)
      llvm::sys::fs::remove(partialWeights);
  };
  plan::Plan plan;
  if (mlir::failed(emitPlan(module, llvm::sys::path::parent_path(path), pipeline, plan))) {
    dropPartials();
    return "failed";
  }
  std::string partial = (path + ".partial").str(), error;
  {
    std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(partial, &error);
    if (!output) {
      dropPartials();
      return error;
    }
    // Deterministic (maps in key order): the same compile gives the same bytes, which
    // checkpoints identify a plan by.
    std::string bytes;
    {
      google::protobuf::io::StringOutputStream stream(&bytes);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      plan.SerializeToCodedStream(&coded);
    }
    output->os() << bytes;
    output->os().flush();
    if (output->os().has_error()) {
      dropPartials();
      error = "cannot write " + partial + ": " + output->os().error().message();
      output->os().clear_error();
      return error; // the partial plan goes with `output`
    }
    output->keep();
  }
  // The weights move first, then the plan: only a crash between the two renames pairs the
  // previous plan with the new weights.
  std::error_code moved;
  if (*wroteWeights)
    moved = llvm::sys::fs::rename(partialWeights, weightsPath);
  if (!moved)
    moved = llvm::sys::fs::rename(partial, path);
  if (moved) {
    dropPartials();
    llvm::sys::fs::remove(partial);
    return "cannot write " + path.str() + ": " + moved.message();
  }
  return "";
}

} // namespace mt
