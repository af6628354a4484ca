// Writes named fp32 tensors in the safetensors format (a JSON header, then the bytes).
#ifndef MT_RUNTIME_SAFETENSORS_H
#define MT_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data;
};

/// Writes to `path` through a temporary file renamed into place, so a crash never leaves a
/// half-written file under the final name. Throws std::runtime_error on failure.
void writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors);

} // namespace mt

#endif // MT_RUNTIME_SAFETENSORS_H
