// Writes inline parameter bytes of an ONNX model into the plan's weights file.
#include "frontend/InlineWeights.h"

#include "frontend/ModelReader.h"
#include "ir/MtOps.h"
#include "ir/ShapeRules.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace mt {

namespace {

/// The little-endian bytes of an inline float initializer, from raw_data or the typed field.
std::optional<std::string> initializerBytes(const onnx::TensorProto &tensor, int64_t length) {
  if (!tensor.raw_data().empty())
    return tensor.raw_data().size() == static_cast<size_t>(length)
               ? std::optional<std::string>(tensor.raw_data())
               : std::nullopt;
  std::string bytes;
  auto append = [&](const auto &values) {
    for (const auto &value : values)
      bytes.append(reinterpret_cast<const char *>(&value), sizeof(value));
  };
  if (tensor.data_type() == onnx::TensorProto::FLOAT)
    append(tensor.float_data());
  else if (tensor.data_type() == onnx::TensorProto::DOUBLE)
    append(tensor.double_data());
  else
    for (int32_t half : tensor.int32_data()) // float16 and bfloat16: one 16-bit value each.
      bytes.append(reinterpret_cast<const char *>(&half), 2);
  return bytes.size() == static_cast<size_t>(length) ? std::optional<std::string>(bytes)
                                                     : std::nullopt;
}

} // namespace

FailureOr<bool> writeInlineWeights(ModuleOp module, llvm::StringRef weightsPath,
                                   llvm::StringRef writtenPath) {
  llvm::SmallVector<ParameterOp> inlined;
  for (ParameterOp parameter : module.getOps<ParameterOp>())
    if (!parameter.getExternalFile())
      inlined.push_back(parameter);
  auto source = module->getAttrOfType<StringAttr>("mt.source");
  if (inlined.empty() || !source || source.getValue().ends_with(".mlir"))
    return false;

  onnx::ModelProto model;
  if (failed(readModel(source.getValue(), *module.getContext(), model)))
    return failure();
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers[tensor.name()] = &tensor;

  std::error_code error;
  llvm::raw_fd_ostream out(writtenPath, error);
  if (error)
    return module.emitError("cannot write ") << writtenPath << ": " << error.message();
  // Absolute, so that the plan emitter can tell this file from the model's own external data.
  llvm::SmallString<256> absolute(weightsPath);
  llvm::sys::fs::make_absolute(absolute);
  Builder b(module.getContext());
  int64_t offset = 0;
  for (ParameterOp parameter : inlined) {
    RankedTensorType type = parameter.getTensorType();
    int64_t length = numElements(type.getShape()) * type.getElementTypeBitWidth() / 8;
    const onnx::TensorProto *tensor = initializers.lookup(parameter.getSymName());
    std::optional<std::string> bytes = tensor ? initializerBytes(*tensor, length) : std::nullopt;
    if (!bytes) {
      out.close();
      llvm::sys::fs::remove(writtenPath);
      return parameter.emitOpError("has no complete inline initializer in ") << source.getValue();
    }
    out << *bytes;
    parameter.setExternalFileAttr(b.getStringAttr(absolute));
    parameter.setOffsetAttr(b.getI64IntegerAttr(offset));
    parameter.setLengthAttr(b.getI64IntegerAttr(length));
    offset += length;
  }
  out.close();
  if (out.has_error()) {
    std::string why = out.error().message();
    out.clear_error();
    llvm::sys::fs::remove(writtenPath);
    return module.emitError("cannot write ") << writtenPath << ": " << why;
  }
  return true;
}

} // namespace mt
