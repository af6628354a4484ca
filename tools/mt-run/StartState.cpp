// Where an mt-run starts: its host state, its data and its header.
#include "tools/mt-run/StartState.h"

#include "runtime/AdamW.h"

#include <algorithm>
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

void printRunStart(const Options &options, const plan::Plan &plan, const HostState &state,
                   const StepInputs &stepInputs, const TokenData &data,
                   const std::string &backend) {
  int64_t parameters = 0;
  for (const ParameterState &p : state.parameters)
    parameters += p.count;
  std::printf("mt-run | %s | %lld parameters | batch %lld x %lld x %lld micro-batches | %s "
              "backend | data %s (%lld tokens, %s)\n",
              options.plan.c_str(), static_cast<long long>(parameters),
              static_cast<long long>(stepInputs.batch()),
              static_cast<long long>(stepInputs.length()),
              static_cast<long long>(std::max<int64_t>(1, plan.micro_batches())), backend.c_str(),
              options.data.c_str(), static_cast<long long>(data.size()), data.format().c_str());
  std::printf("host state | %.1f MiB in %zu layer blocks | %.1f bytes per parameter | AdamW "
              "on %s\n",
              state.bytes() / 1048576.0, state.blocks.size(),
              parameters ? static_cast<double>(state.bytes()) / parameters : 0.0,
              adamwVectorUnit());
}

} // namespace mt
