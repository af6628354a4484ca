// Measures the GPU machine for the compiler's cost model: the bf16 GEMM rate, device memory
// bandwidth, pinned copies each way and both at once, device memory, and the CPU AdamW rate.
#ifndef MT_RUNTIME_CUDA_CALIBRATION_H
#define MT_RUNTIME_CUDA_CALIBRATION_H

#include <string>

namespace mt::cuda {

/// True when a CUDA device answers.
bool deviceAvailable();

/// Measures device 0 and writes the profile as JSON to `path` (the fields
/// `mtc --target=FILE.json` reads); returns a table of what it measured.
std::string calibrateDevice(const std::string &path);

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_CALIBRATION_H
