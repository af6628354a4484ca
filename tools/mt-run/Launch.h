// How mt-run runs: the backend it takes, this process as ranks over processes, and the
// backend started for the plan.
#ifndef MT_TOOLS_MTRUN_LAUNCH_H
#define MT_TOOLS_MTRUN_LAUNCH_H

#include "tools/mt-run/Options.h"

#include "runtime/HostState.h"
#include "runtime/train/StepBackend.h"

#include <functional>
#include <memory>

namespace mt {

/// The backend a run takes: --backend's (auto: the available one that prefers itself most,
/// the host's for thread ranks); the host's for --check-schedule.
const BackendKind &chooseBackend(const Options &options, bool deviceCheck);

/// This process as the ranks of a run over processes (--nproc-per-node, or a launcher's
/// variables): returns the exit code, or -1 where it trains alone or is one such rank.
int launchAsRanks(const Options &options, const std::function<int(const Options &)> &train);

/// The backend made for the plan and the host state, its start-up printed after the host
/// state's (`stateSeconds`).
std::unique_ptr<StepBackend> startBackend(const BackendKind &kind, const Options &options,
                                          const plan::Plan &plan, HostState &state, bool layerMajor,
                                          double stateSeconds);

} // namespace mt

#endif // MT_TOOLS_MTRUN_LAUNCH_H
