// Pretrained weights in and out by PyTorch's names and layouts: a .safetensors file or a
// folder of shards with model.safetensors.index.json (what save_pretrained writes),
// memory-mapped, matched to the plan's parameters and converted into the fp32 masters.
#ifndef MT_RUNTIME_PRETRAINEDWEIGHTS_H
#define MT_RUNTIME_PRETRAINEDWEIGHTS_H

#include "plan/plan.pb.h"
#include "runtime/MappedFile.h"
#include "runtime/Safetensors.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mt {

class HostState;

/// Where each plan parameter's weights come from when its PyTorch name is not in the plan
/// (the legacy exporter's `onnx::MatMul_123`): a JSON object of parameter name -> PyTorch
/// name, or -> {"name": ..., "transposed": true, "offset": c} for a weight the graph holds
/// transposed, or plus a constant (the legacy exporter's fold of Gemma's `1 + weight`).
struct WeightsMap {
  struct Source {
    std::string name;
    bool transposed = false;
    double offset = 0; // the parameter holds the tensor plus this
  };
  std::map<std::string, Source> sources;
  static WeightsMap read(const std::string &path);
};

/// The tensors of a safetensors file or of a folder of shards, mapped into memory.
class SafetensorsArchive {
public:
  struct Tensor {
    std::string dtype; // "F32", "BF16", "F16", "F64"
    std::vector<int64_t> shape;
    const char *data = nullptr;
    std::string file;
  };

  /// Reads every header and maps every shard; throws naming the file and what is wrong.
  explicit SafetensorsArchive(const std::string &path);
  ~SafetensorsArchive();
  const std::map<std::string, Tensor> &tensors() const { return byName; }

private:
  std::vector<MappedFile> mappings;
  std::map<std::string, Tensor> byName;
};

/// Each plan parameter's PyTorch name, layout and offset: the weights map's entry, else the
/// plan's. A map entry that names no parameter is an error.
std::vector<WeightsMap::Source> pytorchSources(const plan::Plan &plan, const WeightsMap &map);

/// The weights `masters` (one per plan parameter) under the names, layouts and values of
/// `sources`, for writeSafetensors; a transposed or offset parameter is converted back into
/// `converted`.
std::vector<NamedTensor> pytorchWeights(const plan::Plan &plan,
                                        const std::vector<WeightsMap::Source> &sources,
                                        const std::vector<const float *> &masters,
                                        std::vector<std::vector<float>> &converted);

/// The sources of pytorchSources, each checked against `archive` before anything is written: a
/// missing or mis-shaped tensor, or one the plan does not use, is an error naming it (with
/// suggestions for a weights map where names differ).
std::vector<WeightsMap::Source> matchPretrainedWeights(const plan::Plan &plan,
                                                       const SafetensorsArchive &archive,
                                                       const WeightsMap &map);

/// Fills the held masters from `archive` as `sources` says, converting to fp32 (transposing,
/// adding the offset), on every core.
void loadPretrainedWeights(HostState &state, const SafetensorsArchive &archive,
                           const std::vector<WeightsMap::Source> &sources);

} // namespace mt

#endif // MT_RUNTIME_PRETRAINEDWEIGHTS_H
