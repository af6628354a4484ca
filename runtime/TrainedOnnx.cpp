// The trained ONNX model: the source ModelProto, parsed with onnx.proto's classes (generated
// from the system's onnx.proto into mt-run alone), initializers swapped for external data.
#include "runtime/TrainedOnnx.h"

#include "onnx.pb.h"
#include "runtime/PlanLoader.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>

namespace mt {

namespace {

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The bytes an initializer keeps in a file beside the source model, for inlining.
std::string externalBytes(const onnx::TensorProto &tensor, const std::string &sourceDir) {
  std::string location;
  long long offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    try {
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset")
        offset = std::stoll(entry.value());
      else if (entry.key() == "length")
        length = std::stoll(entry.value());
    } catch (const std::exception &) {
      throw std::runtime_error("initializer '" + tensor.name() + "': external data " + entry.key() +
                               " '" + entry.value() + "' is not a number");
    }
  }
  std::string file =
      location.empty() || location.front() == '/' ? location : sourceDir + "/" + location;
  std::string bytes = readFileBytes(file, "external data file");
  size_t size = bytes.size();
  if (offset < 0 || static_cast<size_t>(offset) > size ||
      (length >= 0 && static_cast<size_t>(length) > size - static_cast<size_t>(offset)))
    throw std::runtime_error("initializer '" + tensor.name() + "': " + file +
                             " does not hold the bytes its external data names");
  return bytes.substr(offset, length < 0 ? std::string::npos : static_cast<size_t>(length));
}

void writeAtomically(const std::string &path, const std::string &bytes) {
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out)
      throw std::runtime_error("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + temporary + " to " + path);
}

} // namespace

struct TrainedOnnx::Model {
  onnx::ModelProto proto;
  std::string source;
  /// Initializer name -> (plan parameter, whether it holds that parameter's transpose).
  std::map<std::string, std::pair<int, bool>> parameters;
};

TrainedOnnx::TrainedOnnx(const plan::Plan &plan, const std::string &planDir)
    : model(std::make_unique<Model>()), plan(plan) {
  std::string source = plan.model();
  if (source.empty())
    throw std::runtime_error("--save-onnx: the plan names no source model");
  if (std::ifstream(source).fail() && source.front() != '/')
    source = planDir + "/" + source;
  if (!model->proto.ParseFromString(readFileBytes(source, "source model")))
    throw std::runtime_error("--save-onnx: the plan's source model " + source +
                             " is not an ONNX model");
  model->source = source;
  for (int p = 0; p < plan.parameters_size(); ++p) {
    model->parameters[plan.parameters(p).name()] = {p, false};
    for (const std::string &copy : plan.parameters(p).transposed_copies())
      model->parameters[copy] = {p, true};
  }
  size_t found = 0;
  for (const onnx::TensorProto &tensor : model->proto.graph().initializer()) {
    auto parameter = model->parameters.find(tensor.name());
    if (parameter == model->parameters.end())
      continue;
    ++found;
    const plan::Parameter &declared = plan.parameters(parameter->second.first);
    if (declared.type().dtype() != plan::F32 || tensor.data_type() != onnx::TensorProto::FLOAT)
      throw std::runtime_error("--save-onnx: parameter '" + declared.name() +
                               "' is not fp32 in the source model");
  }
  if (found != model->parameters.size())
    throw std::runtime_error("--save-onnx: " + source + " lacks initializers of " +
                             std::to_string(model->parameters.size() - found) +
                             " of the plan's parameters (was it changed since mtc read it?)");
}

TrainedOnnx::~TrainedOnnx() = default;

void TrainedOnnx::write(const std::string &path, const std::vector<const float *> &weights) const {
  onnx::ModelProto out = model->proto;
  std::string dataPath = path + ".data";
  std::string data;
  std::vector<float> transposed;
  for (onnx::TensorProto &tensor : *out.mutable_graph()->mutable_initializer()) {
    auto parameter = model->parameters.find(tensor.name());
    if (parameter == model->parameters.end()) {
      if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
        tensor.set_raw_data(externalBytes(tensor, directoryOf(model->source)));
        tensor.clear_external_data();
        tensor.clear_data_location();
      }
      continue;
    }
    auto [p, isTranspose] = parameter->second;
    const plan::TensorType &type = plan.parameters(p).type();
    int64_t count = numElements(type);
    const float *values = weights[p];
    if (isTranspose) {
      int64_t rows = type.shape(0), cols = type.shape(1);
      transposed.resize(count);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          transposed[c * rows + r] = values[r * cols + c];
      values = transposed.data();
    }
    // Each tensor starts 64-byte aligned, so that consumers may map it.
    data.resize((data.size() + 63) / 64 * 64, '\0');
    size_t offset = data.size(), bytes = static_cast<size_t>(count) * sizeof(float);
    data.append(reinterpret_cast<const char *>(values), bytes);
    tensor.clear_float_data();
    tensor.clear_raw_data();
    tensor.clear_external_data();
    tensor.set_data_location(onnx::TensorProto::EXTERNAL);
    auto entry = [&](const char *key, const std::string &value) {
      onnx::StringStringEntryProto *added = tensor.add_external_data();
      added->set_key(key);
      added->set_value(value);
    };
    entry("location", baseName(dataPath));
    entry("offset", std::to_string(offset));
    entry("length", std::to_string(bytes));
  }
  std::string serialized;
  if (!out.SerializeToString(&serialized))
    throw std::runtime_error("--save-onnx: cannot serialize the model");
  writeAtomically(dataPath, data);
  writeAtomically(path, serialized);
}

} // namespace mt
