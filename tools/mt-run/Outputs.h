// What an mt-run ends with: the exit code of a run stopped early, the trained weights
// written as safetensors and ONNX, and a device profile calibrated by the last step.
#ifndef MT_TOOLS_MTRUN_OUTPUTS_H
#define MT_TOOLS_MTRUN_OUTPUTS_H

#include "tools/mt-run/Options.h"

#include "plan/DeviceProfile.h"
#include "runtime/HostState.h"
#include "runtime/PretrainedWeights.h"
#include "runtime/TrainedOnnx.h"
#include "runtime/train/StepBackend.h"
#include "runtime/train/Trainer.h"

#include <csignal>
#include <optional>
#include <vector>

namespace mt {

/// The exit code of a run that stopped on a non-finite value or a signal (saying why), or -1
/// where it ran through.
int stopCode(const Trainer::Outcome &outcome, std::sig_atomic_t stopSignal, const Options &options,
             bool checkpointed);

/// The device profile --profile-into names, read and checked before any work (empty when
/// not given); throws naming the file and what is wrong.
std::optional<DeviceProfile> profileToCalibrate(const Options &options);

/// Writes the last step's kernel rates into that profile (through a temporary file and a
/// rename), and says which.
void writeCalibratedProfile(const Options &options, DeviceProfile profile,
                            const Trainer::Outcome &outcome);

/// Writes --save-weights (PyTorch's names and layouts) and --save-onnx from the masters (whole:
/// HostState::joinMasters first), gathered from the ranks first where a rank holds only its
/// shards.
void writeOutputs(const Options &options, const plan::Plan &plan, const HostState &state,
                  StepBackend *backend, const std::vector<WeightsMap::Source> &sources,
                  TrainedOnnx *trainedOnnx);

} // namespace mt

#endif // MT_TOOLS_MTRUN_OUTPUTS_H
