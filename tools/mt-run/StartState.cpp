// Where an mt-run's host state and data start.
#include "tools/mt-run/StartState.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace mt {

double fillHostState(HostState &state, const Options &options, const std::string &resumeFrom,
                     const std::string &planDir, const std::string &planHash,
                     SafetensorsArchive *pretrained,
                     const std::vector<WeightsMap::Source> &pretrainedSources,
                     CheckpointInfo &resumed) {
  double resumeSeconds = 0;
  if (!resumeFrom.empty()) {
    auto begin = std::chrono::steady_clock::now();
    resumed = readCheckpoint(resumeFrom, state, planHash);
    resumeSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    // A run stopped after its last step's checkpoint but before its outputs were written
    // resumes to write them.
    bool outputs = !options.saveWeights.empty() || !options.saveOnnx.empty();
    if (resumed.step > options.steps || (resumed.step == options.steps && !outputs))
      throw std::runtime_error("--resume " + resumeFrom + " is at step " +
                               std::to_string(resumed.step) + "; --steps " +
                               std::to_string(options.steps) +
                               " (counted from the start of training) leaves nothing to run");
  } else if (pretrained) {
    loadPretrainedWeights(state, *pretrained, pretrainedSources);
  } else if (options.init == "random") {
    state.initializeRandomly(options.seed);
  } else {
    state.loadInitialWeights(planDir);
  }
  return resumeSeconds;
}

void resumeData(TokenData &data, const CheckpointInfo &resumed, const std::string &resumeFrom,
                const Options &options, int64_t checkpointBytes, double resumeSeconds) {
  if (resumed.dataTokens != data.size())
    throw std::runtime_error("--resume " + resumeFrom + " was written reading " +
                             std::to_string(resumed.dataTokens) + " tokens; " + options.data +
                             " holds " + std::to_string(data.size()));
  data.seek(resumed.dataPosition);
  std::printf("resumed | %s | step %lld | data position %lld | %.1f MiB read and checked in "
              "%.2f s\n",
              resumeFrom.c_str(), static_cast<long long>(resumed.step),
              static_cast<long long>(resumed.dataPosition), checkpointBytes / 1048576.0,
              resumeSeconds);
  if (resumed.step == options.steps)
    std::printf("resumed | step %lld is the last: nothing left to train, the outputs are "
                "written from it\n",
                static_cast<long long>(resumed.step));
}

} // namespace mt
