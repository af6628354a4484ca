// The mt-run driver: checks the options against the plan, loads the host state, picks the
// backend, runs the trainer, and writes the trained weights.
#include "tools/mt-run/Runner.h"

#include "tools/mt-run/Launch.h"
#include "tools/mt-run/Options.h"
#include "tools/mt-run/Outputs.h"
#include "tools/mt-run/StartState.h"

#include "runtime/AdamW.h"
#include "runtime/GradientCheck.h"
#include "runtime/HostState.h"
#include "runtime/PlanLoader.h"
#include "runtime/PretrainedWeights.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainedOnnx.h"
#include "runtime/parallel/ThreadRanks.h"
#include "runtime/train/CheckpointWriter.h"
#include "runtime/train/StepBackend.h"
#include "runtime/train/StepInputs.h"
#include "runtime/train/StopSignals.h"
#include "runtime/train/TokenData.h"
#include "runtime/train/Trainer.h"
#include "runtime/train/TrainingLog.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace mt {

namespace {
int train(const Options &options) {
  if (int code = launchAsRanks(options, train); code >= 0)
    return code;
  bool deviceCheck = options.checkAgainstHost || options.checkKernels;
  if (deviceCheck && options.ranks > 1)
    throw std::runtime_error("--check-against-host and --check-kernels check one GPU's step; "
                             "they do not run over ranks");
  if (!options.calibrate.empty()) {
    std::fputs(findBackend(options.backend).calibrate(options.calibrate).c_str(), stdout);
    return 0;
  }
  plan::Plan plan = loadPlan(options.plan);
  std::optional<DeviceProfile> calibrated = profileToCalibrate(options);
  if (options.dump) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(plan, &text);
    std::cout << text;
    return 0;
  }
  if (options.checkGradients) {
    GradientCheckResult check = checkGradients(plan, options.seed, /*samples=*/16);
    std::printf("gradient check: %lld elements, worst error %.3g at %s\n",
                static_cast<long long>(check.checked), check.worstError,
                check.worstElement.c_str());
    return check.worstError <= (options.checkTolerance < 0 ? 1e-5 : options.checkTolerance) ? 0
                                                                                          : 1;
  }
  if (options.checkSchedule && plan.step().commands_size() > 0 &&
      plan.step().commands(0).stream().empty())
    throw std::runtime_error("--check-schedule needs a scheduled plan (mtc -o PLAN.mtp)");
  const BackendKind &kind = chooseBackend(options, deviceCheck);
  // A plan without token inputs (a test graph of parameters only) can be checked without data.
  bool needsData = plan.step().inputs_size() > 0 || !deviceCheck;
  if (options.data.empty() && needsData)
    throw std::runtime_error("--data FILE is needed to train");
  for (const auto &[flag, value] : options.optimizer)
    flag(*plan.mutable_optimizer(), value);
  const plan::AdamW &adamw = plan.optimizer();
  if (std::string error = adamwSettingsError(adamw); !error.empty())
    throw std::runtime_error("AdamW of the plan with the flags given: " + error);

  std::string planDir = options.plan.find('/') == std::string::npos
                            ? "."
                            : options.plan.substr(0, options.plan.rfind('/'));
  for (auto [flag, path] : {std::pair{"--save-weights", options.saveWeights},
                            {"--save-onnx", options.saveOnnx},
                            {"--save-onnx", options.saveOnnx.empty() ? "" : options.saveOnnx + ".data"},
                            {"--metrics", options.metrics}})
    checkOutputPath(flag, path, plan, options.plan);
  // The source model is read and checked now, so that a run never fails over it at its end.
  std::unique_ptr<TrainedOnnx> trainedOnnx;
  if (!options.saveOnnx.empty() && options.processRank <= 0)
    trainedOnnx = std::make_unique<TrainedOnnx>(plan, planDir);
  // Pretrained weights are matched to the plan before any memory is taken for it.
  WeightsMap weightsMap;
  if (!options.weightsMap.empty())
    weightsMap = WeightsMap::read(options.weightsMap);
  // Each parameter's PyTorch source: where its weights come from and go, and the point its
  // weight decay pulls toward (a parameter that holds `1 + weight` decays toward 1).
  const std::vector<WeightsMap::Source> sources = pytorchSources(plan, weightsMap);
  std::vector<float> decayCenters;
  for (const WeightsMap::Source &source : sources)
    decayCenters.push_back(static_cast<float>(source.offset));
  const std::vector<WeightDecay> decays = weightDecays(plan, adamw, decayCenters);
  // A plan the backend's machine cannot hold is refused before any memory is taken.
  if (kind.admit)
    kind.admit(plan);
  // Checkpoints name the plan by its bytes' hash; their folder is checked before any work.
  TrainerSettings settings;
  if (!options.checkpointDir.empty() || !options.resume.empty())
    settings.planHash = fileHash(options.plan);
  std::unique_ptr<CheckpointWriter> checkpoints;
  if (!options.checkpointDir.empty())
    checkpoints =
        std::make_unique<CheckpointWriter>(options.checkpointDir, options.keepCheckpoints);
  std::string resumeFrom = options.resume.empty() ? "" : findCheckpoint(options.resume);
  std::unique_ptr<SafetensorsArchive> pretrained;
  std::vector<WeightsMap::Source> pretrainedSources;
  if (!options.weights.empty()) {
    pretrained = std::make_unique<SafetensorsArchive>(options.weights);
    pretrainedSources = matchPretrainedWeights(plan, *pretrained, weightsMap);
  }
  // The token file is opened and every id checked against the vocabulary before any memory
  // is taken for the state (a plan without inputs, checked on the device, reads none).
  std::optional<TokenData> tokens;
  std::optional<StepInputs> inputs;
  if (needsData) {
    tokens.emplace(options.data, options.dataDtype);
    inputs.emplace(plan, options.padTokenId);
    inputs->checkData(*tokens);
  }
  auto startup = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point begin) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  // Only a backend that streams bf16 needs the streaming copies (the split masters' high
  // halves), and only for a plan that streams them rather than the whole masters. A rank over
  // processes holds its shards alone: the device gathers the rest of the weights.
  HostState state(plan, kind.streamCopies && !plan.stream_masters(),
                  std::max(0, options.processRank), std::max(1, options.processes),
                  HostState::Masters::Sharded);
  CheckpointInfo &resumed = settings.resumed;
  double resumeSeconds = fillHostState(state, options, resumeFrom, planDir, settings.planHash,
                                       pretrained.get(), pretrainedSources, resumed);
  pretrained.reset();
  double stateSeconds = since(startup);
  DeviceCheck check = options.checkKernels ? DeviceCheck::Kernels : DeviceCheck::AgainstHost;
  double tolerance = options.checkTolerance >= 0     ? options.checkTolerance
                     : check == DeviceCheck::Kernels ? 1e-2
                                                     : 3e-2;
  BackendSettings checkSettings;
  checkSettings.attention = options.attention;
  if (deviceCheck && !needsData)
    return kind.check(plan, state, {}, check, tolerance, checkSettings) <= tolerance ? 0 : 1;
  TokenData &data = *tokens;
  StepInputs &stepInputs = *inputs;
  if (!resumeFrom.empty())
    resumeData(data, resumed, resumeFrom, options, checkpointBytes(state), resumeSeconds);
  printRunStart(options, plan, state, stepInputs, data, kind.name);
  TrainingLog log(options.processRank <= 0 ? options.metrics : "", options.steps,
                  isatty(fileno(stdout)), resumed.step);
  if (deviceCheck)
    return kind.check(plan, state, stepInputs.next(data), check, tolerance, checkSettings) <=
                   tolerance
               ? 0
               : 1;
  if (options.processes > 0 && !stepInputs.layerMajor() && plan.micro_batches() > 1)
    throw std::runtime_error("--nproc-per-node takes layer-major micro-batches only");

  std::unique_ptr<StepBackend> backend;
  std::unique_ptr<ThreadRanks> ranks;
  if (options.ranks > 1) {
    ranks = std::make_unique<ThreadRanks>(plan, state, options.ranks);
    std::printf("data parallel | %d ranks | host state %.2f MiB on rank 0 (%.2f MiB on one "
                "rank)\n",
                options.ranks, ranks->rankBytes() / 1048576.0, state.bytes() / 1048576.0);
  } else {
    backend = startBackend(kind, options, plan, state, stepInputs.layerMajor(), stateSeconds);
  }
  settings.steps = options.steps;
  settings.stopOnNonFinite = options.onNonFinite == "stop";
  settings.clipByMeasuringPass = options.gradClipMemory == "recompute";
  settings.checkpointEvery = options.checkpointEvery;
  settings.checkpoints = checkpoints.get();
  settings.checkpointMemory = options.checkpointMemory;
  settings.trace = options.trace;
  settings.profile = options.profile;
  settings.processes = options.processes;
  settings.processRank = options.processRank;
  Trainer trainer(plan, state, backend.get(), ranks.get(), data, stepInputs, decays, log, settings);
  const volatile std::sig_atomic_t &stopSignal = catchStopSignals();
  Trainer::Outcome outcome = trainer.run(stopSignal);
  if (int code = stopCode(outcome, stopSignal, options, checkpoints != nullptr); code >= 0)
    return code;
  // Training is over: the split masters become whole in place, for the files to read.
  if (!options.saveWeights.empty() || !options.saveOnnx.empty())
    state.joinMasters();
  writeOutputs(options, plan, state, backend.get(), sources, trainedOnnx.get());
  if (calibrated)
    writeCalibratedProfile(options, *calibrated, outcome);
  return 0;
}

} // namespace

int runnerMain(int argc, char **argv) {
  try {
    return train(parseOptions(argc, argv));
  } catch (const UsageError &error) {
    if (*error.what())
      std::fprintf(stderr, "mt-run: %s\n", error.what());
    std::fputs(kUsage, *error.what() ? stderr : stdout);
    return *error.what() ? 2 : 0;
  } catch (const std::exception &error) {
    std::fprintf(stderr, "mt-run: %s\n", error.what());
    return 1;
  }
}

} // namespace mt
