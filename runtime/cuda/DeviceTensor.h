// A value of the step on the device: where its elements lie in the arena (or the executor's
// pools), how they are stored and its shape. Shared by the executor and the kernels.
#ifndef MT_RUNTIME_CUDA_DEVICETENSOR_H
#define MT_RUNTIME_CUDA_DEVICETENSOR_H

#include <cstdint>
#include <vector>

namespace mt::cuda {

/// How elements are stored. Floats are bf16 in the arena (the plan sizes them so) except
/// gradients bound for the host and constants, which are fp32; integers keep their width.
enum class Storage : int32_t { F32, BF16, I64, I32, U8 };

inline bool isReal(Storage storage) { return storage == Storage::F32 || storage == Storage::BF16; }
inline int64_t widthOf(Storage storage) {
  switch (storage) {
  case Storage::F32: case Storage::I32: return 4;
  case Storage::BF16: return 2;
  case Storage::I64: return 8;
  case Storage::U8: return 1;
  }
  return 0;
}

/// What a kernel needs of a tensor inside device code: a POD passed by value.
struct Ref {
  void *data;
  Storage storage;
};

struct DeviceTensor {
  void *data = nullptr;
  Storage storage = Storage::BF16;
  std::vector<int64_t> shape;

  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  int64_t bytes() const { return size() * widthOf(storage); }
  bool isFloat() const { return isReal(storage); }
  Ref ref() const { return {data, storage}; }
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_DEVICETENSOR_H
