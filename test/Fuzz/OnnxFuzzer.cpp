// Fuzz target: the ONNX frontend (frontend/OnnxImporter) on any bytes, as a binary model or,
// built with MT_FUZZ_ONNX_TEXT, as ONNX text: a bad model is diagnostics and a null module,
// never a crash; an imported one verifies.
#include "frontend/OnnxImporter.h"
#include "ir/MtDialect.h"
#include "test/Fuzz/FuzzInput.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#ifdef MT_FUZZ_ONNX_TEXT
  mt::fuzz::InputFile input(data, size, ".onnxtxt");
#else
  mt::fuzz::InputFile input(data, size, ".onnx");
#endif
  mlir::MLIRContext context;
  context.loadDialect<mt::MTDialect, mlir::func::FuncDialect>();
  // Diagnostics are the expected outcome of a bad model: kept quiet.
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) {});
  mt::ImportOptions options;
  mlir::OwningOpRef<mlir::ModuleOp> module = mt::importOnnxModel(input.path, context, options);
  if (module && mlir::failed(mlir::verify(*module)))
    std::abort(); // the importer built IR its own verifiers refuse
  return 0;
}
