// mt-opt: mlir-opt with the mt dialect, passes and pipelines registered.
#include "ir/MtDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mt::MTDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  mt::registerPassesAndPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "mt optimizer driver\n", registry));
}
