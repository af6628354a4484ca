// Pretrained weights in: safetensors headers parsed as JSON (protobuf's Struct), shards
// memory-mapped, tensors matched by name and converted into the masters in parallel.
#include "runtime/PretrainedWeights.h"

#include "runtime/HostState.h"
#include "runtime/PlanLoader.h"
#include "runtime/ThreadPool.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

namespace mt {

namespace {

google::protobuf::Struct parseJson(const std::string &text, const std::string &what) {
  google::protobuf::Struct parsed;
  if (!google::protobuf::util::JsonStringToMessage(text, &parsed).ok())
    throw std::runtime_error(what + " is not a JSON object");
  return parsed;
}

bool isDirectory(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

plan::DType dtypeOf(const std::string &name) {
  if (name == "F32")
    return plan::F32;
  if (name == "BF16")
    return plan::BF16;
  if (name == "F16")
    return plan::F16;
  return plan::F64;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::vector<int64_t> planShape(const plan::Parameter &parameter) {
  return {parameter.type().shape().begin(), parameter.type().shape().end()};
}

/// The shape a parameter's source tensor has: the plan's, or its transpose's.
std::vector<int64_t> sourceShape(const plan::Parameter &parameter, bool transposed) {
  std::vector<int64_t> shape = planShape(parameter);
  if (transposed && shape.size() == 2)
    std::swap(shape[0], shape[1]);
  return shape;
}

} // namespace

WeightsMap WeightsMap::read(const std::string &path) {
  google::protobuf::Struct json =
      parseJson(readFileBytes(path, "--weights-map"), "--weights-map " + path);
  WeightsMap map;
  for (const auto &[name, value] : json.fields()) {
    Source source;
    if (value.has_string_value()) {
      source.name = value.string_value();
    } else if (value.has_struct_value()) {
      const auto &fields = value.struct_value().fields();
      auto named = fields.find("name");
      auto transposed = fields.find("transposed");
      auto offset = fields.find("offset");
      if (named == fields.end() || !named->second.has_string_value())
        throw std::runtime_error("--weights-map " + path + ": entry '" + name +
                                 "' has no \"name\"");
      for (const auto &[key, field] : fields)
        if (key != "name" && key != "transposed" && key != "offset")
          throw std::runtime_error("--weights-map " + path + ": entry '" + name +
                                   "' has an unknown field \"" + key + "\"");
      source.name = named->second.string_value();
      source.transposed = transposed != fields.end() && transposed->second.bool_value();
      if (offset != fields.end()) {
        source.offset = offset->second.number_value();
        if (!offset->second.has_number_value() || !std::isfinite(source.offset))
          throw std::runtime_error("--weights-map " + path + ": entry '" + name +
                                   "' has an \"offset\" that is not a finite number");
      }
    } else {
      throw std::runtime_error("--weights-map " + path + ": entry '" + name +
                               "' must be a name or {\"name\": ..., \"transposed\": ..., "
                               "\"offset\": ...}");
    }
    map.sources[name] = source;
  }
  return map;
}

SafetensorsArchive::SafetensorsArchive(const std::string &path) {
  std::vector<std::string> files;
  if (isDirectory(path)) {
    std::string index = path + "/model.safetensors.index.json";
    if (access(index.c_str(), R_OK) != 0) {
      files.push_back(path + "/model.safetensors");
    } else {
      google::protobuf::Struct json = parseJson(readFileBytes(index, "index"), index);
      auto weightMap = json.fields().find("weight_map");
      if (weightMap == json.fields().end() || !weightMap->second.has_struct_value())
        throw std::runtime_error(index + " has no \"weight_map\"");
      std::set<std::string> shards;
      for (const auto &[name, file] : weightMap->second.struct_value().fields()) {
        if (!file.has_string_value() || file.string_value().empty())
          throw std::runtime_error(index + ": tensor '" + name + "' names no shard file");
        shards.insert(path + "/" + file.string_value());
      }
      files.assign(shards.begin(), shards.end());
    }
  } else {
    files.push_back(path);
  }
  for (const std::string &file : files) {
    MappedFile mapping(file, "weights file");
    if (mapping.size() < 8)
      throw std::runtime_error(file + " is not a safetensors file (too short to map)");
    const char *bytes = mapping.data();
    uint64_t headerBytes;
    std::memcpy(&headerBytes, bytes, 8);
    if (headerBytes > mapping.size() - 8)
      throw std::runtime_error(file + ": the header length " + std::to_string(headerBytes) +
                               " runs past the end of the file");
    google::protobuf::Struct header =
        parseJson(std::string(bytes + 8, headerBytes), file + "'s header");
    const char *data = bytes + 8 + headerBytes;
    uint64_t dataBytes = mapping.size() - 8 - headerBytes;
    for (const auto &item : header.fields()) {
      // Named, not bound: lambdas below capture them (C++17 cannot capture bindings).
      const std::string &name = item.first;
      const google::protobuf::Value &entry = item.second;
      if (name == "__metadata__")
        continue;
      const auto &fields = entry.struct_value().fields();
      auto field = [&](const char *key) -> const google::protobuf::Value & {
        auto it = fields.find(key);
        if (it == fields.end())
          throw std::runtime_error(file + ": tensor '" + name + "' has no " + key);
        return it->second;
      };
      Tensor tensor;
      tensor.file = file;
      tensor.dtype = field("dtype").string_value();
      if (tensor.dtype != "F32" && tensor.dtype != "BF16" && tensor.dtype != "F16" &&
          tensor.dtype != "F64")
        throw std::runtime_error(file + ": tensor '" + name + "' has dtype " + tensor.dtype +
                                 "; weights must be F32, BF16, F16 or F64");
      // Sizes and offsets must be whole numbers a double holds exactly, and their product
      // must not wrap: a hostile header is refused, never read past.
      auto whole = [&](const google::protobuf::Value &value, const char *what) {
        double number = value.number_value();
        if (!value.has_number_value() || !(number >= 0 && number < 9007199254740992.0) ||
            number != static_cast<double>(static_cast<uint64_t>(number)))
          throw std::runtime_error(file + ": tensor '" + name + "' has a " + what +
                                   " that is not a whole number");
        return static_cast<uint64_t>(number);
      };
      uint64_t bytes = static_cast<uint64_t>(bytesPerElement(dtypeOf(tensor.dtype)));
      for (const google::protobuf::Value &d : field("shape").list_value().values()) {
        uint64_t size = whole(d, "dimension");
        if (__builtin_mul_overflow(bytes, size, &bytes))
          throw std::runtime_error(file + ": tensor '" + name + "' is too large");
        tensor.shape.push_back(static_cast<int64_t>(size));
      }
      const auto &offsets = field("data_offsets").list_value().values();
      if (offsets.size() != 2)
        throw std::runtime_error(file + ": tensor '" + name + "' needs two data_offsets");
      uint64_t begin = whole(offsets[0], "data offset"), end = whole(offsets[1], "data offset");
      if (begin > end || end > dataBytes || end - begin != bytes)
        throw std::runtime_error(file + ": tensor '" + name + "' " + formatShape(tensor.shape) +
                                 " " + tensor.dtype + " does not fit bytes [" +
                                 std::to_string(begin) + ", " + std::to_string(end) + ")");
      tensor.data = data + begin;
      if (!byName.emplace(name, tensor).second)
        throw std::runtime_error("tensor '" + name + "' is in two shards");
    }
    mappings.push_back(std::move(mapping));
  }
}

SafetensorsArchive::~SafetensorsArchive() = default;

std::vector<WeightsMap::Source> pytorchSources(const plan::Plan &plan, const WeightsMap &map) {
  std::set<std::string> names;
  for (const plan::Parameter &parameter : plan.parameters())
    names.insert(parameter.name());
  for (const auto &[name, source] : map.sources)
    if (!names.count(name))
      throw std::runtime_error("--weights-map: '" + name + "' is not a parameter of the plan");
  std::vector<WeightsMap::Source> sources;
  for (const plan::Parameter &parameter : plan.parameters()) {
    auto mapped = map.sources.find(parameter.name());
    if (mapped != map.sources.end())
      sources.push_back(mapped->second);
    else
      sources.push_back(
          {parameter.source_name().empty() ? parameter.name() : parameter.source_name(),
           parameter.source_transposed(), parameter.source_offset()});
  }
  return sources;
}

std::vector<NamedTensor> pytorchWeights(const plan::Plan &plan,
                                        const std::vector<WeightsMap::Source> &sources,
                                        const std::vector<const float *> &masters,
                                        std::vector<std::vector<float>> &converted) {
  std::vector<NamedTensor> tensors;
  // At most two conversions a parameter; reserved, so the pointers taken stay valid.
  converted.reserve(2 * plan.parameters_size());
  for (int p = 0; p < plan.parameters_size(); ++p) {
    std::vector<int64_t> shape = planShape(plan.parameters(p));
    const float *data = masters[p];
    if (sources[p].offset != 0) {
      int64_t count = 1;
      for (int64_t d : shape)
        count *= d;
      std::vector<float> &back = converted.emplace_back(count);
      for (int64_t i = 0; i < count; ++i)
        back[i] = static_cast<float>(data[i] - sources[p].offset);
      data = back.data();
    }
    if (sources[p].transposed && shape.size() == 2) {
      int64_t rows = shape[0], cols = shape[1];
      std::vector<float> &back = converted.emplace_back(rows * cols);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          back[c * rows + r] = data[r * cols + c];
      data = back.data();
      std::swap(shape[0], shape[1]);
    }
    tensors.push_back({sources[p].name, shape, data});
    // A tied weight under each of its names, as PyTorch's state_dict holds it.
    for (const std::string &tied : plan.parameters(p).tied_names())
      if (tied != sources[p].name)
        tensors.push_back({tied, shape, data});
  }
  return tensors;
}

std::vector<WeightsMap::Source> matchPretrainedWeights(const plan::Plan &plan,
                                                       const SafetensorsArchive &archive,
                                                       const WeightsMap &map) {
  const auto &tensors = archive.tensors();
  std::vector<WeightsMap::Source> sources = pytorchSources(plan, map);
  std::vector<int> unmatched;
  std::set<std::string> used, tiedCopies;
  std::string errors;
  for (int p = 0; p < plan.parameters_size(); ++p) {
    const plan::Parameter &parameter = plan.parameters(p);
    const WeightsMap::Source source = sources[p];
    auto tensor = tensors.find(source.name);
    if (tensor == tensors.end()) {
      // A tied weight saved under its other name (save_pretrained keeps the embedding's).
      auto tied = std::find_if(parameter.tied_names().begin(), parameter.tied_names().end(),
                               [&](const std::string &name) { return tensors.count(name); });
      if (tied == parameter.tied_names().end()) {
        unmatched.push_back(p);
        continue;
      }
      tensor = tensors.find(*tied);
      sources[p].name = *tied;
    }
    used.insert(tensor->first);
    std::vector<int64_t> expected = sourceShape(parameter, source.transposed);
    if (tensor->second.shape != expected)
      errors += "\n  tensor '" + tensor->first + "' is " + formatShape(tensor->second.shape) +
                "; parameter '" + parameter.name() + "' needs " + formatShape(expected) +
                (source.transposed ? " (its transpose)" : "");
  }
  // A tensor nothing uses: another name for a used one (tied weights saved twice, same bytes)
  // is harmless; anything else means the model and the weights differ.
  for (const plan::Parameter &parameter : plan.parameters())
    for (const std::string &tied : parameter.tied_names())
      if (tensors.count(tied) && !used.count(tied))
        tiedCopies.insert(tied);
  for (const auto &named : tensors) {
    const std::string &name = named.first;
    const SafetensorsArchive::Tensor &tensor = named.second;
    if (used.count(name) || tiedCopies.count(name))
      continue;
    bool duplicate = std::any_of(used.begin(), used.end(), [&](const std::string &other) {
      const SafetensorsArchive::Tensor &kept = tensors.at(other);
      int64_t bytes = bytesPerElement(dtypeOf(kept.dtype));
      for (int64_t d : kept.shape)
        bytes *= d;
      return kept.dtype == tensor.dtype && kept.shape == tensor.shape &&
             std::equal(kept.data, kept.data + bytes, tensor.data);
    });
    if (!duplicate)
      errors += "\n  tensor '" + name + "' " + formatShape(tensor.shape) +
                " is not a parameter of the plan";
  }
  std::string suggestions;
  for (int p : unmatched) {
    const plan::Parameter &parameter = plan.parameters(p);
    errors += "\n  parameter '" + parameter.name() + "' " + formatShape(planShape(parameter)) +
              ": no tensor '" + sources[p].name + "' in the weights";
    // The unused tensors of its shape (or its transpose's) are what a map could name.
    for (const auto &[name, tensor] : tensors) {
      if (used.count(name))
        continue;
      for (bool transposed : {false, true})
        if (tensor.shape == sourceShape(parameter, transposed) &&
            (!transposed || tensor.shape != planShape(parameter)))
          suggestions += "\n  \"" + parameter.name() + "\": " +
                         (transposed ? "{\"name\": \"" + name + "\", \"transposed\": true}"
                                     : "\"" + name + "\"") +
                         ",";
    }
  }
  if (!errors.empty())
    throw std::runtime_error("the weights do not match the plan:" + errors +
                             (suggestions.empty()
                                  ? ""
                                  : "\ncandidates for a --weights-map file (JSON; pick one per "
                                    "parameter):" +
                                        suggestions));
  return sources;
}

void loadPretrainedWeights(HostState &state, const SafetensorsArchive &archive,
                           const std::vector<WeightsMap::Source> &sources) {
  const plan::Plan &plan = state.plan;
  runParallel(plan.parameters_size(), [&](int64_t p) {
    const SafetensorsArchive::Tensor &tensor = archive.tensors().at(sources[p].name);
    plan::DType dtype = dtypeOf(tensor.dtype);
    int64_t width = bytesPerElement(dtype);
    ParameterState &parameter = state.parameters[p];
    std::vector<int64_t> shape = planShape(plan.parameters(p));
    bool transposed = sources[p].transposed && shape.size() == 2;
    // The held elements in the plan's layout [rows, cols]: element (i / cols, i % cols) of a
    // transposed source [cols, rows] sits at (i % cols) * rows + i / cols.
    for (int64_t i = parameter.held.begin; i < parameter.held.end; ++i) {
      int64_t from = transposed ? (i % shape[1]) * shape[0] + i / shape[1] : i;
      float value =
          static_cast<float>(decodeReal(tensor.data + from * width, dtype) + sources[p].offset);
      parameter.writeMasters(i - parameter.held.begin, 1, &value);
    }
  });
}

} // namespace mt
