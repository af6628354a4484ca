// The machine a plan is compiled for (plan/DeviceProfile.h): built in for the H200 (the
// workspace's shared PERF.md) and the H100 (docs/PERFORMANCE.md), or read from the JSON that
// `mt-run --calibrate` writes.
#ifndef MT_PASSES_DEVICEPROFILE_H
#define MT_PASSES_DEVICEPROFILE_H

#include "plan/DeviceProfile.h"

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mt {

/// The built-in profiles: "h200" and "h100".
mlir::FailureOr<DeviceProfile> builtinProfile(llvm::StringRef name);
/// `--target=h200`, `h100` or `--target=FILE.json`; errors name the file and the missing field.
mlir::FailureOr<DeviceProfile> loadDeviceProfile(llvm::StringRef target, std::string &error);

} // namespace mt

#endif // MT_PASSES_DEVICEPROFILE_H
