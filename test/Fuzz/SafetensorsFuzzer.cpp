// Fuzz target: the safetensors reader (runtime/PretrainedWeights' SafetensorsArchive) on any
// bytes: its header, shapes, dtypes and offsets; every tensor it accepts is read through.
#include "runtime/PretrainedWeights.h"
#include "test/Fuzz/FuzzInput.h"

#include <exception>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mt::fuzz::InputFile input(data, size, ".safetensors");
  try {
    mt::SafetensorsArchive archive(input.path);
    volatile uint8_t sum = 0;
    for (const auto &[name, tensor] : archive.tensors()) {
      int64_t bytes = tensor.dtype == "F64" ? 8 : tensor.dtype == "F32" ? 4 : 2;
      for (int64_t d : tensor.shape)
        bytes *= d;
      for (int64_t i = 0; i < bytes; ++i)
        sum = sum + static_cast<uint8_t>(tensor.data[i]);
    }
  } catch (const std::exception &) {
  }
  return 0;
}
