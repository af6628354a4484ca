// How mt-run runs: the backend, ranks over processes, and the backend's start.
#include "tools/mt-run/Launch.h"

#include "runtime/parallel/Rendezvous.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace mt {

const BackendKind &chooseBackend(const Options &options, bool deviceCheck) {
  if (options.ranks > 1 &&
      (options.checkSchedule || (options.backend != "auto" && options.backend != "host")))
    throw std::runtime_error("--ranks runs on the host backend, without --check-schedule");
  bool hostOnly = options.checkSchedule || options.ranks > 1;
  if (hostOnly && options.backend != "auto" && options.backend != "host")
    throw std::runtime_error("--check-schedule runs on the host backend; add --backend=host");
  const BackendKind &kind = findBackend(hostOnly ? "host" : options.backend);
  if (deviceCheck && !kind.check)
    throw std::runtime_error(
        std::string(options.checkKernels ? "--check-kernels" : "--check-against-host") +
        " checks a device's step, and the " + kind.name +
        " backend has no device (--backend=cuda needs an mt-run built with "
        "the CUDA toolkit, and a GPU)");
  if (options.deviceUpdateLayers > 0 && !kind.check)
    throw std::runtime_error("--device-updates updates on a device, and the " + kind.name +
                             " backend has none (--backend=cuda)");
  return kind;
}

int launchAsRanks(const Options &options, const std::function<int(const Options &)> &train) {
  LaunchEnvironment launched = launchEnvironment();
  bool fromLauncher = launched.worldSize > 1 && options.processes == 0;
  if ((!fromLauncher && options.processes == 0) || options.processRank >= 0)
    return -1;
  if ((options.checkAgainstHost || options.checkKernels) && (fromLauncher || options.processes))
    throw std::runtime_error("--check-against-host and --check-kernels check one GPU's step; "
                             "they do not run over ranks");
  const BackendKind *kind = findLauncher();
  if (!kind)
    throw std::runtime_error(
        (fromLauncher ? "this process is rank " + std::to_string(launched.rank) + " of " +
                            std::to_string(launched.worldSize) + " (WORLD_SIZE), which"
                      : std::string("--nproc-per-node")) +
        " needs an mt-run built with the CUDA toolkit (a backend that runs over processes)");
  return kind->launch(options.processes, [&](int rank, int processes, const void *group) {
    // Rank 0 reports; the others keep only their errors.
    Options own = options;
    own.processes = processes;
    own.processRank = rank;
    own.group = group;
    own.backend = kind->name;
    if (rank > 0 && !std::freopen("/dev/null", "w", stdout))
      throw std::runtime_error("cannot quiet rank " + std::to_string(rank));
    return train(own);
  });
}

std::unique_ptr<StepBackend> startBackend(const BackendKind &kind, const Options &options,
                                          const plan::Plan &plan, HostState &state, bool layerMajor,
                                          double stateSeconds) {
  BackendSettings settings;
  settings.serialize = options.serialize;
  settings.profile = options.profile;
  settings.attention = options.attention;
  // The plan's count unless the flag gives one; the host backend runs such a plan on the host.
  settings.deviceUpdateLayers = options.deviceUpdateLayers >= 0
                                    ? options.deviceUpdateLayers
                                    : static_cast<int>(plan.device_update_layers());
  settings.residentUpdateState = options.residentUpdateState;
  settings.interleave = options.checkSchedule;
  settings.seed = options.seed;
  settings.ignoredEvent = options.ignoredEvent;
  settings.processes = options.processes;
  settings.processRank = options.processRank;
  settings.group = options.group;
  settings.gradientsConsumedOnLanding =
      (plan.optimizer().grad_clip() <= 0 || options.gradClipMemory == "recompute") &&
      options.processes == 0 && (layerMajor || plan.micro_batches() <= 1);
  auto made = std::chrono::steady_clock::now();
  std::unique_ptr<StepBackend> backend = kind.make(plan, state, settings);
  int64_t parameters = 0;
  for (const ParameterState &p : state.parameters)
    parameters += p.count;
  backend->printStartup(parameters);
  std::printf("start-up | host state %.1f s (allocated, filled%s) | %s backend %.1f s\n",
              stateSeconds, state.parameters.front().streamCopy ? ", masters split" : "",
              kind.name.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - made).count());
  return backend;
}

} // namespace mt
