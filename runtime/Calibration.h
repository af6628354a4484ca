// Measures the machine a backend runs on and writes the device profile that
// `mtc --target=FILE.json` reads, so predicted steps are those of this machine.
#ifndef MT_RUNTIME_CALIBRATION_H
#define MT_RUNTIME_CALIBRATION_H

#include <string>

namespace mt {

/// Measures the host backend (GEMM and memory-bound kernels, copies, AdamW) and writes the
/// profile as JSON to `path`; returns a table of what it measured, for people.
std::string calibrateHost(const std::string &path);

} // namespace mt

#endif // MT_RUNTIME_CALIBRATION_H
