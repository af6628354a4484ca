// Where an mt-run starts: its host state from a checkpoint, pretrained weights, a random draw
// or the plan's initial weights; the token data where a resumed run left it; the run's header.
#ifndef MT_TOOLS_MTRUN_STARTSTATE_H
#define MT_TOOLS_MTRUN_STARTSTATE_H

#include "tools/mt-run/Options.h"

#include "runtime/HostState.h"
#include "runtime/PretrainedWeights.h"
#include "runtime/Safetensors.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/StepInputs.h"
#include "runtime/train/TokenData.h"

#include <string>
#include <vector>

namespace mt {

/// Fills `state` from the checkpoint `resumeFrom` (its step and data position into
/// `resumed`; refused where --steps leaves nothing to run), else from `pretrained`, else as
/// --init says. Returns the seconds the checkpoint took to read (0 otherwise).
double fillHostState(HostState &state, const Options &options, const std::string &resumeFrom,
                     const std::string &planDir, const std::string &planHash,
                     SafetensorsArchive *pretrained,
                     const std::vector<WeightsMap::Source> &pretrainedSources,
                     CheckpointInfo &resumed);

/// Moves `data` to where the resumed run left it, checking it is the data it was reading,
/// and says so.
void resumeData(TokenData &data, const CheckpointInfo &resumed, const std::string &resumeFrom,
                const Options &options, int64_t checkpointBytes, double resumeSeconds);

/// Prints what the run starts from: the plan, its batch, the backend, the data and the host
/// state.
void printRunStart(const Options &options, const plan::Plan &plan, const HostState &state,
                   const StepInputs &stepInputs, const TokenData &data, const std::string &backend);

} // namespace mt

#endif // MT_TOOLS_MTRUN_STARTSTATE_H
