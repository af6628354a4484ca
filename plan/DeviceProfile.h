// The machine a plan is compiled for, as `mt-run --calibrate` measures it and `mtc --target`
// reads it: one struct and one JSON form, for the compiler and the runtime alike.
#ifndef MT_PLAN_DEVICEPROFILE_H
#define MT_PLAN_DEVICEPROFILE_H

#include <optional>
#include <string>

namespace mt {

struct DeviceProfile {
  std::string name;
  double gemmFlopsPerSecond = 0;   // dense bf16 GEMM with fp32 accumulation
  double memoryBytesPerSecond = 0; // device memory, for kernels bound by it
  double h2dBytesPerSecond = 0;    // pinned host->device, alone
  double d2hBytesPerSecond = 0;    // pinned device->host, alone
  double duplexFactor = 0;         // each direction's share of its rate when both run
  double hostAdamParamsPerSecond = 0;
  double deviceMemoryBytes = 0; // what plans may use
  double hostMemoryBytes = 0;   // the host's memory, where the host state lives; 0: unknown
  /// Fused attention, forward and backward, in FLOPs counted over every key (as the cost
  /// model counts them) a second; 0: unknown (attentionRate guesses).
  double attentionFlopsPerSecond = 0;
  /// AdamW's rate where each gradient is pulled from device memory a chunk at a time just
  /// before its update (the plan's pull_gradients), its pulls included; 0: unknown.
  double hostAdamPulledParamsPerSecond = 0;
};

/// The attention rate the cost model takes: the profile's, or where it is unknown (a profile
/// from before it was recorded), the GEMM rate times what mt's flash kernels reached of it
/// on the H200 (155 of 750 TFLOP/s counted, docs/PERFORMANCE.md).
double attentionRate(const DeviceProfile &profile);

/// The host-memory bytes one AdamW update of `count` elements reads and writes: the gradient,
/// the master and both moments read, the master and moments written (a split master's high
/// half is the device's bf16 copy: no bytes of its own). Of a gradient pulled just before its
/// update, the share `cached` is read from the CPU's cache (where the host's I/O writes land
/// there), not from host memory.
inline double adamwBytes(double count, double cached = 0) {
  return count * ((4 - cached) * 4 + 3 * 4);
}

/// The share of a pulled gradient's bytes that stays in the CPU's cache, from the profile's
/// AdamW rates: alone, AdamW moves 28 bytes a parameter; pulled, its pulls' DMA adds the
/// gradient's 4 written where it reads 4, up to 32, less 8 a parameter for
/// the share the cache keeps. 0 where the pulled rate is unknown.
double pulledGradientCacheShare(const DeviceProfile &profile);

/// How much longer AdamW takes within a step than alone (hostAdamParamsPerSecond is its rate
/// alone): it is bound by the host's memory, which the step's copies share, each byte a copy
/// moves over PCIe taking the time of a byte of AdamW's. `adamwBytes`: what its updates read
/// and write (the function above); `copiedBytes`: both ways.
double adamwSlowdown(double adamwBytes, double copiedBytes);

/// The profile as a JSON object: "name" and the rates, by their snake_case names (the host's
/// memory, the attention rate and the pulled AdamW rate where known).
std::string deviceProfileJson(const DeviceProfile &profile);

/// The profile of that JSON object; nothing, with `error` saying why, when the text is not a
/// JSON object or a rate is missing or not a positive number ("host_memory_bytes",
/// "attention_flops_per_second" and "host_adam_pulled_params_per_second" may be missing:
/// profiles from before them). Other members are ignored.
std::optional<DeviceProfile> parseDeviceProfile(const std::string &text, std::string &error);

} // namespace mt

#endif // MT_PLAN_DEVICEPROFILE_H
