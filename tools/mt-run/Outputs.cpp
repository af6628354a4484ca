// What an mt-run ends with: early stops' exit codes and the trained weights written.
#include "tools/mt-run/Outputs.h"

#include "runtime/Safetensors.h"

#include <cstdio>

namespace mt {

int stopCode(const Trainer::Outcome &outcome, std::sig_atomic_t stopSignal, const Options &options,
             bool checkpointed) {
  if (!outcome.nonFinite.empty()) {
    std::fprintf(stderr, "mt-run: %s%s\n", outcome.nonFinite.c_str(),
                 checkpointed ? "; the last checkpoint holds the state it left" : "");
    return 3;
  }
  if (stopSignal && outcome.ranThrough < options.steps) {
    std::fprintf(stderr, "mt-run: stopped by %s after step %lld%s\n",
                 stopSignal == SIGINT ? "SIGINT" : "SIGTERM",
                 static_cast<long long>(outcome.ranThrough),
                 checkpointed ? ", checkpoint written" : " (no --checkpoint-dir: nothing kept)");
    return 128 + stopSignal;
  }
  return -1;
}

void writeOutputs(const Options &options, const plan::Plan &plan, const HostState &state,
                  StepBackend *backend, const std::vector<WeightsMap::Source> &sources,
                  TrainedOnnx *trainedOnnx) {
  if (options.saveWeights.empty() && options.saveOnnx.empty())
    return;
  std::vector<const float *> finalWeights;
  for (const ParameterState &parameter : state.parameters)
    finalWeights.push_back(parameter.master);
  // A rank over processes holds its shards of the masters: rank 0 gets them gathered.
  std::vector<std::vector<float>> gathered =
      backend ? backend->gatherMasters() : std::vector<std::vector<float>>{};
  if (!gathered.empty() && options.processRank <= 0)
    for (size_t p = 0; p < gathered.size(); ++p)
      finalWeights[p] = gathered[p].data();
  if (options.processRank <= 0) {
    if (!options.saveWeights.empty()) {
      std::vector<std::vector<float>> converted;
      writeSafetensors(options.saveWeights, pytorchWeights(plan, sources, finalWeights, converted));
    }
    if (trainedOnnx)
      trainedOnnx->write(options.saveOnnx, finalWeights);
  }
}

} // namespace mt
