// The machine a plan is compiled for: GEMM rate, PCIe and memory bandwidths, device memory,
// CPU AdamW rate. Built in for the H200 (../shared/PERF.md), or read from the JSON that
// `mt-run --calibrate` writes.
#ifndef MT_PASSES_DEVICEPROFILE_H
#define MT_PASSES_DEVICEPROFILE_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mt {

struct DeviceProfile {
  std::string name;
  double gemmFlopsPerSecond = 0;     // dense bf16 GEMM with fp32 accumulation
  double memoryBytesPerSecond = 0;   // device memory, for kernels bound by it
  double h2dBytesPerSecond = 0;      // pinned host->device, alone
  double d2hBytesPerSecond = 0;      // pinned device->host, alone
  double duplexFactor = 0;           // each direction's share of its rate when both run
  double hostAdamParamsPerSecond = 0;
  double deviceMemoryBytes = 0;      // what plans may use
};

/// The built-in profiles: "h200".
mlir::FailureOr<DeviceProfile> builtinProfile(llvm::StringRef name);
/// `--target=h200` or `--target=FILE.json`; errors name the file and the missing field.
mlir::FailureOr<DeviceProfile> loadDeviceProfile(llvm::StringRef target, std::string &error);

} // namespace mt

#endif // MT_PASSES_DEVICEPROFILE_H
