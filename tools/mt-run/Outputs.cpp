// What an mt-run ends with: early stops' exit codes, the trained weights written, and a
// device profile calibrated by the last step.
#include "tools/mt-run/Outputs.h"

#include "runtime/Safetensors.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

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
  for (const ParameterState &parameter : state.parameters) {
    if (!parameter.master)
      throw std::logic_error("weights are written from whole masters (HostState::joinMasters)");
    finalWeights.push_back(parameter.master);
  }
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

std::optional<DeviceProfile> profileToCalibrate(const Options &options) {
  if (options.profileInto.empty())
    return std::nullopt;
  std::ifstream in(options.profileInto);
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  std::optional<DeviceProfile> profile = in ? parseDeviceProfile(text.str(), error) : std::nullopt;
  if (!profile)
    throw std::runtime_error("--profile-into " + options.profileInto + ": " +
                             (in ? error : "cannot read it (mt-run --calibrate writes one)"));
  return profile;
}

void writeCalibratedProfile(const Options &options, DeviceProfile profile,
                            const Trainer::Outcome &outcome) {
  std::string rates = outcome.profile.calibrate(profile);
  if (rates.empty())
    throw std::runtime_error("--profile-into " + options.profileInto +
                             ": the last step timed no kernel with work to rate");
  std::string temporary = options.profileInto + ".tmp";
  {
    std::ofstream out(temporary);
    out << deviceProfileJson(profile);
    out.close(); // the bytes reach the file here: a full disk fails now, not after the rename
    if (!out)
      throw std::runtime_error("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), options.profileInto.c_str()) != 0)
    throw std::runtime_error("cannot rename " + temporary + " to " + options.profileInto);
  std::printf("profile | step %lld's kernel rates into %s: %s\n",
              static_cast<long long>(outcome.ranThrough), options.profileInto.c_str(),
              rates.c_str());
}

} // namespace mt
