// Reading ONNX models: protobuf with no 64 MiB limit, or the text syntax through libonnx.
#include "frontend/ModelReader.h"

#include "mlir/IR/Diagnostics.h"
#include "onnx/defs/parser.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <stdexcept>

using namespace mlir;

namespace mt {

LogicalResult readModel(llvm::StringRef path, MLIRContext &context, onnx::ModelProto &model) {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/false);
  if (!buffer)
    return emitError(loc) << "cannot read " << path << ": " << buffer.getError().message();
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (path.ends_with(".onnxtxt")) {
    // libonnx's parser reads numbers with std::stof and friends, which throw on text such as
    // ".0" or "-,": that is malformed text too, not a crash.
    onnx::Status status;
    try {
      status = onnx::OnnxParser::Parse(model, bytes.str().c_str());
    } catch (const std::exception &error) {
      return emitError(loc) << "malformed ONNX text: a number it cannot read (" << error.what()
                            << ")";
    }
    if (!status.IsOK())
      return emitError(loc) << "malformed ONNX text: " << status.ErrorMessage();
    return success();
  }
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(bytes.data()), static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT_MAX);
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return emitError(loc) << "malformed ONNX file (truncated or not an ONNX ModelProto)";
  return success();
}

} // namespace mt
