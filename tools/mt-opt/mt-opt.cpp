// mt-opt: mlir-opt with the mt dialect, passes and pipelines registered; with -o PLAN.mtp it
// writes the plan of the module its pipeline made, as mtc -o does.
#include "ir/MtDialect.h"
#include "passes/Passes.h"
#include "plan/PlanWriter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mt::MTDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  mt::registerPassesAndPipelines();
  auto [input, output] =
      mlir::registerAndParseCLIOptions(argc, argv, "mt optimizer driver\n", registry);
  if (!llvm::StringRef(output).ends_with(".mtp"))
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, input, output, registry));

  // The pipeline as it ran (what the plan records, as mtc's does), then the module it made,
  // read back.
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  std::string pipeline, text, error;
  config.emitBytecode(true); // locations included, which the plan's commands keep
  config.setPassPipelineSetupFn([&, base = config](mlir::PassManager &pm) {
    if (mlir::failed(base.setupPassPipeline(pm)))
      return mlir::failure();
    llvm::raw_string_ostream os(pipeline);
    pm.printAsTextualPipeline(os);
    return mlir::success();
  });
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "mt-opt: " << error << "\n";
    return 1;
  }
  llvm::raw_string_ostream ir(text);
  if (mlir::failed(mlir::MlirOptMain(ir, std::move(file), registry, config)))
    return 1;
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module)
    return 1;
  error = mt::writePlanFiles(*module, output, pipeline);
  if (!error.empty() && error != "failed")
    llvm::errs() << "mt-opt: " << error << "\n";
  return error.empty() ? 0 : 1;
}
