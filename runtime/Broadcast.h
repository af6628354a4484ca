// Numpy broadcasting of one operand's shape to a result's: the strides both backends walk
// operands with, and the message when the shapes do not broadcast.
#ifndef MT_RUNTIME_BROADCAST_H
#define MT_RUNTIME_BROADCAST_H

#include <cstdint>
#include <string>
#include <vector>

namespace mt {

/// Sets `strides` to those of row-major `shape` read as `target` (0 on broadcast axes) and
/// returns "", or returns why `shape` does not broadcast to `target`.
inline std::string broadcastStrides(const std::vector<int64_t> &shape,
                                    const std::vector<int64_t> &target,
                                    std::vector<int64_t> &strides) {
  if (shape.size() > target.size())
    return "cannot broadcast rank " + std::to_string(shape.size()) + " to rank " +
           std::to_string(target.size());
  std::vector<int64_t> own(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    own[d - 1] = own[d] * shape[d];
  strides.assign(target.size(), 0);
  size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == target[lead + d])
      strides[lead + d] = shape[d] == 1 ? 0 : own[d];
    else if (shape[d] != 1)
      return "cannot broadcast axis " + std::to_string(d) + " of size " +
             std::to_string(shape[d]) + " to " + std::to_string(target[lead + d]);
  }
  return "";
}

} // namespace mt

#endif // MT_RUNTIME_BROADCAST_H
