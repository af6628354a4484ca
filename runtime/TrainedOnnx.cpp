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
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = std::stoll(entry.value());
    else if (entry.key() == "length")
      length = std::stoll(entry.value());
  }
  std::string file =
      location.empty() || location.front() == '/' ? location : sourceDir + "/" + location;
  std::string bytes = readFileBytes(file, "external data file");
  if (offset < 0 || static_cast<size_t>(offset) > bytes.size() ||
      (length >= 0 && static_cast<size_t>(offset + length) > bytes.size()))
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

void writeTrainedOnnx(const std::string &path, const plan::Plan &plan, const std::string &planDir,
                      const std::vector<const float *> &weights) {
  std::string source = plan.model();
  if (std::ifstream(source).fail() && source.front() != '/')
    source = planDir + "/" + source;
  onnx::ModelProto model;
  if (!model.ParseFromString(readFileBytes(source, "source model")))
    throw std::runtime_error("--save-onnx: the plan's source model " + source +
                             " is not an ONNX model");
  std::map<std::string, int> parameterIndex;
  for (int p = 0; p < plan.parameters_size(); ++p)
    parameterIndex[plan.parameters(p).name()] = p;

  std::string dataPath = path + ".data";
  std::string data;
  size_t replaced = 0;
  for (onnx::TensorProto &tensor : *model.mutable_graph()->mutable_initializer()) {
    auto parameter = parameterIndex.find(tensor.name());
    if (parameter == parameterIndex.end()) {
      if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
        tensor.set_raw_data(externalBytes(tensor, directoryOf(source)));
        tensor.clear_external_data();
        tensor.clear_data_location();
      }
      continue;
    }
    const plan::Parameter &declared = plan.parameters(parameter->second);
    if (declared.type().dtype() != plan::F32 || tensor.data_type() != onnx::TensorProto::FLOAT)
      throw std::runtime_error("--save-onnx: parameter '" + declared.name() +
                               "' is not fp32 in the source model");
    size_t bytes = static_cast<size_t>(numElements(declared.type())) * sizeof(float);
    // Each tensor starts 64-byte aligned, so that consumers may map it.
    data.resize((data.size() + 63) / 64 * 64, '\0');
    size_t offset = data.size();
    data.append(reinterpret_cast<const char *>(weights[parameter->second]), bytes);
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
    ++replaced;
  }
  if (replaced != parameterIndex.size())
    throw std::runtime_error("--save-onnx: " + source + " lacks initializers of " +
                             std::to_string(parameterIndex.size() - replaced) +
                             " of the plan's parameters (was it changed since mtc read it?)");
  std::string serialized;
  if (!model.SerializeToString(&serialized))
    throw std::runtime_error("--save-onnx: cannot serialize the model");
  writeAtomically(dataPath, data);
  writeAtomically(path, serialized);
}

} // namespace mt
