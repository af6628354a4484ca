// mt-device-precision: how the device stores floats, recorded on the module for the passes
// that size device buffers.
#include "passes/BufferLiveness.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mt {
#define GEN_PASS_DEF_DEVICEPRECISIONPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;

namespace {

struct DevicePrecisionPass : mt::impl::DevicePrecisionPassBase<DevicePrecisionPass> {
  using DevicePrecisionPassBase::DevicePrecisionPassBase;

  void runOnOperation() override {
    if (floatBytes != 2 && floatBytes != 4) {
      getOperation().emitError("mt-device-precision: float-bytes must be 2 or 4, got ")
          << floatBytes;
      return signalPassFailure();
    }
    if (floatBytes == 4)
      getOperation()->setAttr(mt::kDeviceFloatBytes,
                              Builder(&getContext()).getI64IntegerAttr(floatBytes));
  }
};

} // namespace
