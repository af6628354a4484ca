// What torch's dynamo exporter records about the PyTorch module behind an ONNX graph: which
// initializers are parameters and which are buffers (the graph signature it writes as
// metadata), so that buffers fold like constants instead of being trained, and which
// PyTorch parameter each initializer holds (pretrained weights in and out by name).
#ifndef MT_FRONTEND_EXPORTSIGNATURE_H
#define MT_FRONTEND_EXPORTSIGNATURE_H

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mt {

struct ExportSignature {
  /// Module paths of the buffers (`model.rotary_emb.inv_freq`): not trained by PyTorch.
  llvm::StringSet<> buffers;
  /// The exported program's placeholder of each parameter (`p_model_lm_head_weight`) -> its
  /// module path (`model.lm_head.weight`).
  llvm::StringMap<std::string> parameters;
  /// An initializer the exporter folded from a parameter (`val_152`, the transpose of a
  /// linear layer's weight) -> that parameter's module path.
  llvm::StringMap<std::string> transposedParameters;
  /// An initializer the exporter folded from `offset + parameter` (`add_6`, Gemma's RMSNorm
  /// scale `1 + weight`) -> that parameter's module path and the offset.
  struct Offset {
    std::string parameter;
    double offset;
  };
  llvm::StringMap<Offset> offsetParameters;
  llvm::StringSet<> parameterNames;
  /// A tied weight's other name (`model.embed_tokens.weight`), which no initializer holds ->
  /// the parameter that does (`lm_head.weight`): found from the module a node using that
  /// parameter belongs to.
  llvm::StringMap<std::string> tiedNames;

  /// Whether the exporter said the initializer `name` holds a PyTorch parameter (itself,
  /// transposed or offset); false for every initializer when there is no signature.
  bool isParameter(llvm::StringRef name) const {
    return parameterNames.contains(name) || transposedParameters.contains(name) ||
           offsetParameters.contains(name);
  }
  bool empty() const { return parameters.empty(); }
};

/// The signature in `graph`'s metadata; empty for a graph the dynamo exporter did not write.
ExportSignature readExportSignature(const onnx::GraphProto &graph);

} // namespace mt

#endif // MT_FRONTEND_EXPORTSIGNATURE_H
