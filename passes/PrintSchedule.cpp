// mt-print-schedule: the predicted step, stream by stream, for people reading a schedule.
#include "passes/DeviceReserve.h"
#include "passes/Passes.h"
#include "passes/StepCostModel.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "mt-print-schedule"

namespace mt {
#define GEN_PASS_DEF_PRINTSCHEDULEPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

struct PrintSchedulePass : mt::impl::PrintSchedulePassBase<PrintSchedulePass> {
  using PrintSchedulePassBase::PrintSchedulePassBase;

  void runOnOperation() override {
    std::string error;
    FailureOr<DeviceProfile> profile = loadDeviceProfile(target, error);
    if (failed(profile)) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    ScheduleOptions options;
    options.microBatches = microBatches;
    auto masters = getOperation()->getAttrOfType<BoolAttr>(kStreamMasters);
    options.streamMasters = masters && masters.getValue();
    FailureOr<StepEstimate> step = estimateStep(getOperation(), *profile, options);
    if (failed(step))
      return signalPassFailure();
    llvm::raw_ostream &os = llvm::outs();
    os << llvm::formatv("step on {0}: {1} layers in {2} template(s), predicted {3:f3} ms\n",
                        profile->name, step->layers, step->templates,
                        step->predictedStepSeconds * 1e3);
    os << "peak device memory " << formatBytes(step->peakDeviceBytes) << " ("
       << step->peakBreakdown << ")\n";
    os << "h2d " << formatBytes(step->h2dBytesPerStep) << ", d2h "
       << formatBytes(step->d2hBytesPerStep) << llvm::formatv(", {0:e} model FLOP\n",
                                                              step->flopsPerStep);
    for (const char *stream : {"h2d", "compute", "d2h", "cpu"}) {
      os << stream << ":\n";
      for (const TimelineSlice &slice : step->timeline)
        if (slice.stream == stream)
          os << llvm::formatv("  {0,10:f4} - {1,10:f4} ms  {2}\n", slice.start * 1e3,
                              (slice.start + slice.seconds) * 1e3, slice.name);
    }
  }
};

} // namespace
