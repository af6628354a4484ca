// The graph walk of the ONNX frontend: reads the model, checks its opset, binds input
// shapes, turns initializers into parameter references, visits nodes in dependency order
// and returns the graph outputs from one function.
#include "frontend/OnnxImporter.h"

#include "frontend/GraphImporter.h"
#include "frontend/ModelReader.h"
#include "frontend/TiedWeights.h"
#include "ir/MtOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "plan/DeviceLayout.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>
#include <deque>

using namespace mlir;

namespace mt {

namespace {

constexpr int64_t kMinOpset = 14, kMaxOpset = 23;

} // namespace

llvm::Error parseInputShape(llvm::StringRef spec, ImportOptions &options) {
  auto [name, dims] = spec.rsplit(':');
  llvm::SmallVector<int64_t, 4> shape;
  llvm::SmallVector<llvm::StringRef, 4> parts;
  dims.split(parts, 'x');
  for (llvm::StringRef part : parts) {
    int64_t dim;
    if (part.getAsInteger(10, dim) || dim <= 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--input-shape '" + spec.str() +
                                         "' should be NAME:DxDx... with positive sizes");
    shape.push_back(dim);
  }
  // A tensor too large to count in bytes would wrap every size computed from it.
  if (std::string error = dimensionsError(shape); !error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--input-shape '" + spec.str() + "' " + error);
  if (name.empty() || dims.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--input-shape '" + spec.str() + "' should be NAME:DxDx...");
  options.inputShapes[name] = shape;
  return llvm::Error::success();
}

GraphImporter::GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
                             llvm::StringRef modelPath, const ImportOptions &options)
    : context(context), builder(&context), model(model), modelPath(modelPath.str()),
      options(options) {}

Type GraphImporter::elementType(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return builder.getF32Type();
  case onnx::TensorProto::FLOAT16:
    return builder.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return builder.getBF16Type();
  case onnx::TensorProto::DOUBLE:
    return builder.getF64Type();
  case onnx::TensorProto::INT64:
    return builder.getI64Type();
  case onnx::TensorProto::INT32:
    return builder.getI32Type();
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
    return builder.getI8Type();
  case onnx::TensorProto::BOOL:
    return builder.getI1Type();
  default:
    return nullptr;
  }
}

Location GraphImporter::locationOf(llvm::StringRef name) {
  return NameLoc::get(builder.getStringAttr(name), FileLineColLoc::get(&context, modelPath, 0, 0));
}

Shape GraphImporter::shapeOf(const ImportedValue &value) {
  if (value.known)
    return value.known->shape;
  if (value.initializer)
    return Shape(value.initializer->dims().begin(), value.initializer->dims().end());
  return Shape(llvm::cast<RankedTensorType>(value.value.getType()).getShape());
}

int32_t GraphImporter::dataTypeOf(const ImportedValue &value) {
  if (value.known)
    return value.known->dataType;
  if (value.initializer)
    return value.initializer->data_type();
  Type type = llvm::cast<RankedTensorType>(value.value.getType()).getElementType();
  for (int32_t dataType : {onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT16,
                           onnx::TensorProto::BFLOAT16, onnx::TensorProto::DOUBLE,
                           onnx::TensorProto::INT64, onnx::TensorProto::INT32,
                           onnx::TensorProto::INT8, onnx::TensorProto::BOOL})
    if (elementType(dataType) == type)
      return dataType;
  return onnx::TensorProto::UNDEFINED;
}

std::optional<HostTensor> GraphImporter::decodeTensor(const onnx::TensorProto &tensor) {
  if (!dimensionsError(tensor.dims()).empty())
    return std::nullopt;
  Shape shape(tensor.dims().begin(), tensor.dims().end());
  int64_t count = numElements(shape);
  std::string external;
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::optional<std::string> bytes = readExternalData(tensor);
    if (!bytes)
      return std::nullopt;
    external = std::move(*bytes);
  }
  const std::string &raw = external.empty() ? tensor.raw_data() : external;
  // Dimensions larger than the data stored are refused before anything is allocated for them.
  int64_t stored = !raw.empty() ? static_cast<int64_t>(raw.size())
                   : tensor.data_type() == onnx::TensorProto::FLOAT  ? tensor.float_data_size()
                   : tensor.data_type() == onnx::TensorProto::DOUBLE ? tensor.double_data_size()
                   : tensor.data_type() == onnx::TensorProto::INT64  ? tensor.int64_data_size()
                                                                     : tensor.int32_data_size();
  if (count > stored)
    return std::nullopt;
  HostTensor result = HostTensor::zeros(tensor.data_type(), shape);
  auto fromRaw = [&](auto sample) {
    using T = decltype(sample);
    if (raw.size() != count * sizeof(T))
      return false;
    for (int64_t i = 0; i < count; ++i) {
      T element;
      std::memcpy(&element, raw.data() + i * sizeof(T), sizeof(T));
      if constexpr (std::is_floating_point_v<T>)
        result.set(i, element);
      else
        result.setInteger(i, static_cast<int64_t>(element));
    }
    return true;
  };
  bool ok = true;
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    ok = raw.empty() ? tensor.float_data_size() == count : fromRaw(float());
    for (int64_t i = 0; raw.empty() && ok && i < count; ++i)
      result.set(i, tensor.float_data(i));
    break;
  case onnx::TensorProto::DOUBLE:
    ok = raw.empty() ? tensor.double_data_size() == count : fromRaw(double());
    for (int64_t i = 0; raw.empty() && ok && i < count; ++i)
      result.set(i, tensor.double_data(i));
    break;
  case onnx::TensorProto::INT64:
    ok = raw.empty() ? tensor.int64_data_size() == count : fromRaw(int64_t());
    for (int64_t i = 0; raw.empty() && ok && i < count; ++i)
      result.setInteger(i, tensor.int64_data(i));
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    // Both are 16-bit patterns, in raw_data or (one per entry) in int32_data.
    bool half = tensor.data_type() == onnx::TensorProto::FLOAT16;
    auto decode = [&](uint16_t bits) {
      llvm::APFloat value(half ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(),
                          llvm::APInt(16, bits));
      return value.convertToDouble();
    };
    ok = raw.empty() ? tensor.int32_data_size() == count : raw.size() == count * 2u;
    for (int64_t i = 0; ok && i < count; ++i) {
      uint16_t bits;
      if (raw.empty())
        bits = static_cast<uint16_t>(tensor.int32_data(i));
      else
        std::memcpy(&bits, raw.data() + 2 * i, 2);
      result.set(i, decode(bits));
    }
    break;
  }
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    if (!raw.empty()) {
      ok = tensor.data_type() == onnx::TensorProto::INT32 ? fromRaw(int32_t())
           : tensor.data_type() == onnx::TensorProto::INT8 ? fromRaw(int8_t())
                                                            : fromRaw(uint8_t());
    } else {
      ok = tensor.int32_data_size() == count;
      for (int64_t i = 0; ok && i < count; ++i)
        result.setInteger(i, tensor.int32_data(i));
    }
    break;
  default:
    ok = false;
  }
  if (!ok)
    return std::nullopt;
  return result;
}

std::optional<std::string> GraphImporter::readExternalData(const onnx::TensorProto &tensor) {
  ExternalData where = externalDataOf(tensor);
  llvm::SmallString<256> path(llvm::sys::path::parent_path(modelPath));
  llvm::sys::path::append(path, where.file);
  auto buffer = llvm::MemoryBuffer::getFileSlice(path, where.length, where.offset);
  if (!buffer)
    return std::nullopt;
  return (*buffer)->getBuffer().str();
}

GraphImporter::ExternalData GraphImporter::externalDataOf(const onnx::TensorProto &tensor) {
  ExternalData where;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    if (entry.key() == "location")
      where.file = entry.value();
    else if (entry.key() == "offset")
      where.offset = std::strtoll(entry.value().c_str(), nullptr, 10);
    else if (entry.key() == "length")
      where.length = std::strtoll(entry.value().c_str(), nullptr, 10);
  }
  if (where.length < 0) {
    int64_t width;
    switch (tensor.data_type()) {
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
      width = 8;
      break;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
      width = 4;
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      width = 2;
      break;
    default:
      width = 1;
    }
    where.length = numElements(Shape(tensor.dims().begin(), tensor.dims().end())) * width;
  }
  return where;
}

Value GraphImporter::readParameter(const onnx::TensorProto &tensor, Location loc) {
  auto it = parameters.find(tensor.name());
  if (it != parameters.end())
    return it->second;
  auto type = RankedTensorType::get(Shape(tensor.dims().begin(), tensor.dims().end()),
                                    elementType(tensor.data_type()));
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(function);
  auto parameter =
      builder.create<ParameterOp>(loc, builder.getStringAttr(tensor.name()), TypeAttr::get(type),
                                  StringAttr(), IntegerAttr(), IntegerAttr(), StringAttr(),
                                  UnitAttr(), FloatAttr(), ArrayAttr(), ArrayAttr(), IntegerAttr());
  if (auto source = signature.transposedParameters.find(tensor.name());
      source != signature.transposedParameters.end()) {
    parameter.setSourceNameAttr(builder.getStringAttr(source->second));
    parameter.setSourceTransposed(true);
  }
  if (auto source = signature.offsetParameters.find(tensor.name());
      source != signature.offsetParameters.end()) {
    parameter.setSourceNameAttr(builder.getStringAttr(source->second.parameter));
    parameter.setSourceOffsetAttr(builder.getF64FloatAttr(source->second.offset));
  }
  llvm::SmallVector<StringRef> tied;
  for (const auto &alias : signature.tiedNames)
    if (alias.getValue() == tensor.name())
      tied.push_back(alias.getKey());
  llvm::sort(tied);
  if (!tied.empty())
    parameter.setTiedNamesAttr(builder.getStrArrayAttr(tied));
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    ExternalData where = externalDataOf(tensor);
    parameter.setExternalFileAttr(builder.getStringAttr(where.file));
    parameter.setOffsetAttr(builder.getI64IntegerAttr(where.offset));
    parameter.setLengthAttr(builder.getI64IntegerAttr(where.length));
  }
  if (lastParameterRead)
    builder.setInsertionPointAfter(lastParameterRead);
  else
    builder.setInsertionPointToStart(&function.getBody().front());
  auto read = builder.create<ParamOp>(loc, type, tensor.name());
  lastParameterRead = read;
  parameters[tensor.name()] = read;
  return read;
}

Value GraphImporter::materialize(ImportedValue &value, Location loc) {
  if (value.value)
    return value.value;
  if (!value.transposeOf.empty()) {
    Value original = materialize(values[value.transposeOf], loc);
    auto parameter = (*module).lookupSymbol<ParameterOp>(value.transposeOf);
    llvm::SmallVector<Attribute> copies;
    if (std::optional<ArrayAttr> known = parameter.getTransposedCopies())
      copies.append(known->begin(), known->end());
    copies.push_back(builder.getStringAttr(value.initializer->name()));
    parameter.setTransposedCopiesAttr(builder.getArrayAttr(copies));
    auto type = llvm::cast<RankedTensorType>(original.getType());
    value.value = builder.create<TransposeOp>(
        loc, type.clone({type.getDimSize(1), type.getDimSize(0)}), original,
        builder.getDenseI64ArrayAttr({1, 0}));
    return value.value;
  }
  if (value.initializer) {
    value.value = readParameter(*value.initializer, loc);
    return value.value;
  }
  const HostTensor &known = *value.known;
  auto type = RankedTensorType::get(known.shape, elementType(known.dataType));
  DenseElementsAttr attr;
  if (known.isFloat()) {
    const llvm::fltSemantics &semantics =
        llvm::cast<FloatType>(type.getElementType()).getFloatSemantics();
    llvm::SmallVector<llvm::APFloat> elements;
    for (double r : known.reals) {
      llvm::APFloat element(r);
      bool lost;
      element.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &lost);
      elements.push_back(element);
    }
    attr = DenseElementsAttr::get(type, elements);
  } else {
    unsigned width = type.getElementTypeBitWidth();
    llvm::SmallVector<llvm::APInt> elements;
    for (int64_t i : known.integers)
      elements.push_back(llvm::APInt(64, static_cast<uint64_t>(i), /*isSigned=*/true)
                             .trunc(width));
    attr = DenseElementsAttr::get(type, elements);
  }
  value.value = builder.create<ConstantOp>(loc, attr);
  return value.value;
}

/// Whether a tensor is shaped as a mask over scores, [1, ..., 1, T, T] of rank 3 or more
/// (no weight of a language model is).
static bool hasMaskShape(const onnx::TensorProto &tensor) {
  int rank = tensor.dims_size();
  if (rank < 3 || tensor.dims(rank - 1) != tensor.dims(rank - 2))
    return false;
  for (int d = 0; d + 2 < rank; ++d)
    if (tensor.dims(d) != 1)
      return false;
  return true;
}

/// Whether `reals` are an additive mask: zeros and at least one fill at or below -1e30, and
/// nothing else.
static bool isAdditiveMask(const std::vector<double> &reals) {
  bool filled = false;
  for (double r : reals) {
    if (r <= -1e30)
      filled = true;
    else if (r != 0.0)
      return false;
  }
  return filled;
}

LogicalResult GraphImporter::importInitializers() {
  signature = readExportSignature(model.graph());
  for (const onnx::TensorProto &tensor : model.graph().initializer()) {
    Location loc = locationOf(tensor.name());
    if (std::string error = dimensionsError(tensor.dims()); !error.empty())
      return emitError(loc) << "initializer '" << tensor.name() << "' " << error;
    if (!elementType(tensor.data_type()))
      return emitError(loc) << "initializer '" << tensor.name() << "' has unsupported data type "
                            << onnx::TensorProto::DataType_Name(
                                   static_cast<onnx::TensorProto::DataType>(tensor.data_type()));
    // Float initializers with more than one element are what the model trains: they become
    // parameters, and their bytes are not read. The rest (integers, masks, scalars) fold.
    ImportedValue imported;
    bool isParameter = HostTensor::isFloatType(tensor.data_type()) &&
                       numElements(Shape(tensor.dims().begin(), tensor.dims().end())) > 1;
    // A module's buffer (rotary frequencies) is no weight PyTorch trains either, nor a
    // constant the exporter materialized (the ones of a norm without weights): under an
    // export signature, an initializer that is no parameter and holds one value throughout.
    if (signature.buffers.contains(tensor.name()))
      isParameter = false;
    else if (isParameter && !signature.empty() && !signature.isParameter(tensor.name()) &&
             tensor.data_location() != onnx::TensorProto::EXTERNAL)
      if (std::optional<HostTensor> known = decodeTensor(tensor);
          known && llvm::all_equal(known->reals))
        isParameter = false;
    // An additive attention mask is no weight anyone trains: it folds like the integer masks
    // do. It holds infinities, or only zeros and a masking fill (the float's lowest value, as
    // transformers writes it; the exporter folds a static batch's mask into an initializer,
    // external data included). Of external data only mask shapes are read: [1, ..., T, T].
    if (isParameter &&
        (tensor.data_location() != onnx::TensorProto::EXTERNAL || hasMaskShape(tensor)))
      if (std::optional<HostTensor> known = decodeTensor(tensor);
          known && (llvm::any_of(known->reals, [](double r) { return std::isinf(r); }) ||
                    isAdditiveMask(known->reals)))
        isParameter = false;
    if (isParameter) {
      imported.initializer = &tensor;
    } else {
      imported.known = decodeTensor(tensor);
      if (!imported.known)
        return emitError(loc) << "initializer '" << tensor.name()
                              << "' is not a parameter, so mt folds it, but its bytes are "
                                 "missing, truncated or of a type mt does not fold";
    }
    values[tensor.name()] = std::move(imported);
  }
  // The dynamo exporter keeps tied weights one initializer; the legacy one may not.
  if (!signature.empty())
    return success();
  std::vector<const onnx::TensorProto *> matrices;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    if (values[tensor.name()].initializer)
      matrices.push_back(&tensor);
  auto bytes = [&](const onnx::TensorProto &tensor) -> std::optional<std::string> {
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
      return readExternalData(tensor);
    if (!tensor.raw_data().empty())
      return tensor.raw_data();
    if (tensor.float_data_size() == 0)
      return std::nullopt; // no float elements to compare (fuzzing found the empty memcpy)
    std::string packed(tensor.float_data_size() * sizeof(float), '\0');
    std::memcpy(packed.data(), tensor.float_data().data(), packed.size());
    return packed;
  };
  for (const auto &copy : findTransposedCopies(matrices, bytes)) {
    values[copy.getKey()].transposeOf = copy.getValue();
  }
  return success();
}

LogicalResult GraphImporter::importInputs(Location loc) {
  llvm::SmallVector<Type> types;
  llvm::SmallVector<std::string> names;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    if (values.count(input.name()))
      continue; // An initializer listed as input too (IR version < 4 style).
    Location inputLoc = locationOf(input.name());
    if (!input.type().has_tensor_type())
      return emitError(inputLoc) << "graph input '" << input.name() << "' is not a tensor";
    const onnx::TypeProto::Tensor &tensorType = input.type().tensor_type();
    Type element = elementType(tensorType.elem_type());
    if (!element)
      return emitError(inputLoc) << "graph input '" << input.name()
                                 << "' has unsupported data type "
                                 << onnx::TensorProto::DataType_Name(
                                        static_cast<onnx::TensorProto::DataType>(
                                            tensorType.elem_type()));
    auto bound = options.inputShapes.find(input.name());
    Shape shape;
    const auto &dims = tensorType.shape().dim();
    for (int d = 0; d < dims.size(); ++d) {
      if (dims[d].has_dim_value()) {
        shape.push_back(dims[d].dim_value());
        continue;
      }
      if (bound == options.inputShapes.end())
        return emitError(inputLoc)
               << "graph input '" << input.name() << "' has free dimension " << d
               << (dims[d].has_dim_param() ? " ('" + dims[d].dim_param() + "')" : "")
               << "; bind it with --input-shape " << input.name() << ":" << "<dims>";
      shape.push_back(-1);
    }
    if (bound != options.inputShapes.end()) {
      llvm::ArrayRef<int64_t> given = bound->second;
      bool agrees = given.size() == shape.size();
      for (size_t d = 0; agrees && d < shape.size(); ++d)
        agrees = shape[d] < 0 || shape[d] == given[d];
      if (!agrees)
        return emitError(inputLoc) << "--input-shape " << input.name() << " "
                                   << formatShape(given) << " does not fit the model's "
                                   << formatShape(shape) << " (-1 is free)";
      shape.assign(given.begin(), given.end());
    }
    types.push_back(RankedTensorType::get(shape, element));
    names.push_back(input.name());
  }
  for (const auto &bound : options.inputShapes)
    if (!llvm::is_contained(names, bound.getKey().str()))
      return emitError(loc) << "--input-shape names '" << bound.getKey()
                            << "', which is not a graph input";

  builder.setInsertionPointToEnd(module->getBody());
  function = builder.create<func::FuncOp>(loc, options.functionName,
                                          builder.getFunctionType(types, {}));
  Block *entry = function.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(names)) {
    function.setArgAttr(i, "mt.name", builder.getStringAttr(name));
    ImportedValue imported;
    imported.value = entry->getArgument(i);
    values[name] = imported;
  }
  builder.setInsertionPointToStart(entry);
  return success();
}

InFlightDiagnostic GraphImporter::nodeError(const onnx::NodeProto &node, llvm::StringRef name) {
  return emitError(locationOf(name))
         << "node '" << name << "' (" << node.op_type() << ", opset " << opset << "): ";
}

std::string GraphImporter::nodeName(int index) {
  const onnx::NodeProto &node = model.graph().node(index);
  return node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
}

LogicalResult GraphImporter::importNodes() {
  const auto &nodes = model.graph().node();
  // Kahn's algorithm: exporters emit nodes in order, but the format does not promise it.
  llvm::StringMap<int> producer;
  for (int n = 0; n < nodes.size(); ++n)
    for (const std::string &output : nodes[n].output())
      if (!output.empty())
        producer[output] = n;
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<int>> consumers(nodes.size());
  for (int n = 0; n < nodes.size(); ++n) {
    for (const std::string &input : nodes[n].input()) {
      if (input.empty() || values.count(input))
        continue;
      auto it = producer.find(input);
      if (it == producer.end())
        return nodeError(nodes[n], nodeName(n))
               << "reads '" << input << "', which no node, initializer or graph input provides";
      ++pending[n];
      consumers[it->second].push_back(n);
    }
  }
  std::deque<int> ready;
  for (int n = 0; n < nodes.size(); ++n)
    if (pending[n] == 0)
      ready.push_back(n);
  int visited = 0;
  while (!ready.empty()) {
    int n = ready.front();
    ready.pop_front();
    ++visited;
    if (failed(importNode(*this, nodes[n], nodeName(n))))
      return failure();
    for (int consumer : consumers[n])
      if (--pending[consumer] == 0)
        ready.push_back(consumer);
  }
  if (visited != nodes.size()) {
    // Every unvisited node waits on another unvisited one; following those waits from any of
    // them must come back to a node, which is then on a cycle.
    int n = std::find_if(pending.begin(), pending.end(), [](int p) { return p > 0; }) -
            pending.begin();
    std::vector<bool> seen(nodes.size(), false);
    while (!seen[n]) {
      seen[n] = true;
      for (const std::string &input : nodes[n].input()) {
        auto it = producer.find(input);
        if (!input.empty() && !values.count(input) && it != producer.end() &&
            pending[it->second] > 0) {
          n = it->second;
          break;
        }
      }
    }
    return nodeError(nodes[n], nodeName(n)) << "is on a cycle: the graph is not a DAG";
  }
  return success();
}

LogicalResult GraphImporter::importOutputs(Location loc) {
  llvm::SmallVector<Value> results;
  for (const onnx::ValueInfoProto &output : model.graph().output()) {
    auto it = values.find(output.name());
    Location outputLoc = locationOf(output.name());
    if (it == values.end())
      return emitError(outputLoc) << "graph output '" << output.name()
                                  << "' is not produced by any node";
    Value value = materialize(it->second, outputLoc);
    auto type = llvm::cast<RankedTensorType>(value.getType());
    if (output.type().has_tensor_type()) {
      const onnx::TypeProto::Tensor &declared = output.type().tensor_type();
      Type element = elementType(declared.elem_type());
      bool agrees = !element || element == type.getElementType();
      if (declared.has_shape()) {
        agrees &= declared.shape().dim_size() == type.getRank();
        for (int d = 0; agrees && d < declared.shape().dim_size(); ++d)
          agrees = !declared.shape().dim(d).has_dim_value() ||
                   declared.shape().dim(d).dim_value() == type.getDimSize(d);
      }
      if (!agrees)
        return emitError(outputLoc) << "graph output '" << output.name() << "' is declared "
                                    << onnx::TensorProto::DataType_Name(
                                           static_cast<onnx::TensorProto::DataType>(
                                               declared.elem_type()))
                                    << " with " << declared.shape().dim_size()
                                    << " dimensions but computes " << type;
    }
    results.push_back(value);
  }
  builder.create<func::ReturnOp>(loc, results);
  function.setFunctionType(
      builder.getFunctionType(function.getArgumentTypes(), ValueRange(results).getTypes()));
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::import() {
  Location loc = FileLineColLoc::get(&context, modelPath, 0, 0);
  for (const onnx::OperatorSetIdProto &set : model.opset_import())
    if (set.domain().empty() || set.domain() == "ai.onnx")
      opset = set.version();
  if (opset < kMinOpset || opset > kMaxOpset) {
    emitError(loc) << "the model's default-domain opset is "
                   << (opset ? std::to_string(opset) : std::string("missing")) << "; mt supports "
                   << kMinOpset << " to " << kMaxOpset;
    return nullptr;
  }
  if (!model.has_graph() || model.graph().output_size() == 0) {
    emitError(loc) << "the model has no graph outputs";
    return nullptr;
  }
  module = ModuleOp::create(loc);
  (*module)->setAttr("mt.source", builder.getStringAttr(modelPath));
  (*module)->setAttr("mt.opset", builder.getI64IntegerAttr(opset));
  if (failed(importInitializers()) || failed(importInputs(loc)) || failed(importNodes()) ||
      failed(importOutputs(loc)))
    return nullptr;
  if (failed(verify(*module)))
    return nullptr;
  return std::move(module);
}

OwningOpRef<ModuleOp> importOnnxModel(llvm::StringRef path, MLIRContext &context,
                                      const ImportOptions &options) {
  context.loadDialect<MTDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (failed(readModel(path, context, model)))
    return nullptr;
  return GraphImporter(context, model, path, options).import();
}

} // namespace mt
