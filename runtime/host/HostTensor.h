// A value of the step program in host memory: float tensors computed in T (float for
// training, double for gradient checks), integer and boolean tensors as int64.
#ifndef MT_RUNTIME_HOST_HOSTTENSOR_H
#define MT_RUNTIME_HOST_HOSTTENSOR_H

#include <cstdint>
#include <vector>

namespace mt::host {

using Shape = std::vector<int64_t>;

template <typename T>
struct HostTensor {
  Shape shape;
  bool isFloat = true;
  std::vector<T> reals;       // the elements when isFloat, row-major
  std::vector<int64_t> ints;  // the elements otherwise (booleans are 0 or 1)

  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

} // namespace mt::host

#endif // MT_RUNTIME_HOST_HOSTTENSOR_H
