// Tied weights the legacy exporter untied: it writes a tied lm_head that MatMul reads as a
// transposed copy of the embedding, so the graph would train two tensors where PyTorch
// trains one.
#ifndef MT_FRONTEND_TIEDWEIGHTS_H
#define MT_FRONTEND_TIEDWEIGHTS_H

#include "onnx/onnx_pb.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>
#include <vector>

namespace mt {

/// Among fp32 matrices of transposed, non-square shapes, those that hold another's transpose
/// element for element (and not one value throughout): copy name -> original name. `bytes`
/// gives an initializer's little-endian elements (nullopt when unreadable).
llvm::StringMap<std::string> findTransposedCopies(
    const std::vector<const onnx::TensorProto *> &matrices,
    llvm::function_ref<std::optional<std::string>(const onnx::TensorProto &)> bytes);

} // namespace mt

#endif // MT_FRONTEND_TIEDWEIGHTS_H
