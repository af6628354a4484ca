// Device profiles: the H200's and the H100's measured rates, and JSON profiles from
// calibration.
#include "passes/DeviceProfile.h"

#include "llvm/Support/MemoryBuffer.h"

namespace mt {

namespace {

/// The H100 80GB HBM3 machine the device tool lends, measured in docs/PERFORMANCE.md (session
/// 41): products at 657-717 TFLOP/s inside training steps (mt-run --profile; calibration's
/// 8192^3 best of five, 798-803, overstates them), cuDNN's attention at 711-779, calibration's
/// device copies at 2.89-2.95 TB/s, pinned copies at 49-55 and 55 GB/s (0.81-0.92 of both at
/// once), mt's AdamW alone at 4.1-5.2 and pulled at 3.7-5.2 G params/s on its host's 16
/// cores (the medians below); 81.8 GB usable and a host of 135 GB.
DeviceProfile h100() {
  DeviceProfile h100;
  h100.name = "h100";
  h100.gemmFlopsPerSecond = 690e12;
  h100.memoryBytesPerSecond = 2.9e12;
  h100.h2dBytesPerSecond = 54e9;
  h100.d2hBytesPerSecond = 55.1e9;
  h100.duplexFactor = 0.86;
  h100.hostAdamParamsPerSecond = 4.55e9;
  h100.hostAdamPulledParamsPerSecond = 4.0e9;
  h100.deviceMemoryBytes = 81.8e9;
  h100.hostMemoryBytes = 135.1e9;
  h100.attentionFlopsPerSecond = 720e12;
  return h100;
}

} // namespace

mlir::FailureOr<DeviceProfile> builtinProfile(llvm::StringRef name) {
  if (name == "h100")
    return h100();
  if (name != "h200")
    return mlir::failure();
  // ../shared/PERF.md, measured on the device machine: 710-796 TFLOP/s bf16 GEMM, 55.4 and
  // 55.1 GB/s pinned copies (49.9 + 50.9 both at once), 4.6 G params/s fused CPU AdamW on 16
  // cores; 4.8 TB/s HBM3e and 139 GiB usable of 141 GB; a host of 125 GiB.
  DeviceProfile h200;
  h200.name = "h200";
  h200.gemmFlopsPerSecond = 750e12;
  h200.memoryBytesPerSecond = 4.0e12;
  h200.h2dBytesPerSecond = 55.4e9;
  h200.d2hBytesPerSecond = 55.1e9;
  h200.duplexFactor = 0.91;
  h200.hostAdamParamsPerSecond = 4.6e9;
  h200.deviceMemoryBytes = 139.0 * (1ull << 30);
  h200.hostMemoryBytes = 125.0 * (1ull << 30);
  // cuDNN's flash attention (mt-run's default where cuDNN loads), forward and backward: 720
  // TFLOP/s counted over every key (mt-run --profile on the 3.82B model at 32 x 2048 tokens
  // on the H100, whose SMs and clocks the H200 shares; docs/PERFORMANCE.md). mt's own
  // kernels, where cuDNN is absent, reach about 300: calibrate such a machine.
  h200.attentionFlopsPerSecond = 720e12;
  // AdamW with each gradient pulled just before its update: 4.6% faster than alone in
  // mt-gpu-landing-bench on the H200 machine's host (5.24-5.40 against 5.01-5.16 G params/s,
  // docs/PERFORMANCE.md), two thirds of the gradient read from the cache.
  h200.hostAdamPulledParamsPerSecond = 4.6e9 * 1.046;
  return h200;
}

mlir::FailureOr<DeviceProfile> loadDeviceProfile(llvm::StringRef target, std::string &error) {
  if (!target.ends_with(".json")) {
    mlir::FailureOr<DeviceProfile> builtin = builtinProfile(target);
    if (mlir::failed(builtin))
      error = "unknown --target '" + target.str() + "' (h200, h100, or a profile FILE.json)";
    return builtin;
  }
  auto buffer = llvm::MemoryBuffer::getFile(target);
  if (!buffer) {
    error = "cannot read " + target.str();
    return mlir::failure();
  }
  std::optional<DeviceProfile> profile = parseDeviceProfile((*buffer)->getBuffer().str(), error);
  if (!profile) {
    error = target.str() + ": " + error;
    return mlir::failure();
  }
  profile->name = target.str();
  return *profile;
}

} // namespace mt
