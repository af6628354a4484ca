// mt-run's command line: the options and their usage text.
#ifndef MT_TOOLS_MT_RUN_OPTIONS_H
#define MT_TOOLS_MT_RUN_OPTIONS_H

#include "plan/plan.pb.h"
#include "runtime/train/StepBackend.h"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mt {

extern const char *const kUsage;

/// A command-line mistake: reported with the usage text.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An AdamW flag: sets one field of the plan's optimizer settings.
using OptimizerFlag = void (*)(plan::AdamW &, const std::string &);

struct Options {
  std::string plan, data, dataDtype = "u16", backend = "auto", init = "model", metrics, saveWeights,
                          saveOnnx, calibrate, weights, weightsMap, checkpointDir, resume;
  bool dump = false, checkGradients = false, checkSchedule = false, checkAgainstHost = false,
       checkKernels = false, serialize = false, profile = false;
  /// --attention: the kernels of fused attention on the device.
  AttentionKernels attention = AttentionKernels::Cudnn;
  /// --device-updates[=N]: the persistent weights' AdamW on the device, of N layers spread
  /// over the step (and what it reads before them); 0: none; -1 (not given): the plan's.
  int deviceUpdateLayers = -1;
  /// --device-update-state: resident (true) or streamed.
  bool residentUpdateState = true;
  std::string trace;
  /// --profile-into: the device profile (JSON) that the last step's kernel rates go into.
  std::string profileInto;
  int ignoredEvent = -1;
  double checkTolerance = -1; // each check's own default when not given
  int64_t steps = 1;
  /// --checkpoint-every: steps between checkpoints (0: only at the end and on a signal).
  int64_t checkpointEvery = 0;
  int keepCheckpoints = 3;
  /// --checkpoint-memory, in bytes (-1: the trainer's default).
  int64_t checkpointMemory = -1;
  /// --on-nonfinite: a step whose loss or gradient is not finite applies no update; "stop"
  /// then writes a checkpoint and exits nonzero, "skip" counts it and goes on.
  std::string onNonFinite = "stop";
  /// --grad-clip-memory: "held" (each gradient waits on the host for the global norm) or
  /// "recompute" (a measuring pass first, no gradient held).
  std::string gradClipMemory = "held";
  int ranks = 1;
  /// --nproc-per-node: processes (GPUs) of this host; in a child, its rank and NCCL group.
  int processes = 0, processRank = -1;
  const void *group = nullptr;
  uint64_t seed = 0;
  int64_t padTokenId = -1; // none: every position counts
  /// AdamW flags in command-line order, applied over the plan's defaults.
  std::vector<std::pair<OptimizerFlag, std::string>> optimizer;
};

/// Reads argv; throws UsageError (or runtime_error for bad values) naming the option.
Options parseOptions(int argc, char **argv);

} // namespace mt

#endif // MT_TOOLS_MT_RUN_OPTIONS_H
