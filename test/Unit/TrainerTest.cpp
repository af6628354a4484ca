// Unit test of the training loop (runtime/train/Trainer) on backends of its own: updates
// handed over after the step or overlapping it give the same bits; sample-major micro-batches
// average; a non-finite step stops or is skipped; clipping by a measuring pass gives the bits
// of held gradients; checkpoints resume to the same bits; a stop
// asked for mid-step ends after it with a checkpoint; and the backend registry.
#include "runtime/train/Trainer.h"
#include "runtime/MasterHalves.h"
#include "test/Unit/Expect.h"
#include "test/Unit/StateBits.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using mt::test::bitsOf;
using mt::test::check;
using mt::test::failures;
using mt::test::same;

constexpr int64_t kBatch = 2, kLength = 4;

/// Three parameters (one of the prologue, two of layer 0) and a language model's inputs.
mt::plan::Plan planOf(int64_t microBatches) {
  mt::plan::Plan plan;
  plan.set_vocabulary(100);
  plan.set_micro_batches(microBatches);
  int64_t sizes[] = {6, 10, 4}, layers[] = {-1, 0, 0};
  for (int p = 0; p < 3; ++p) {
    mt::plan::Parameter *parameter = plan.add_parameters();
    parameter->set_name("w" + std::to_string(p));
    parameter->set_layer(layers[p]);
    parameter->mutable_type()->set_dtype(mt::plan::F32);
    parameter->mutable_type()->add_shape(sizes[p]);
  }
  for (const char *name : {"input_ids", "targets"}) {
    mt::plan::Input *input = plan.mutable_step()->add_inputs();
    input->set_name(name);
    input->set_value(plan.step().values_size());
    mt::plan::TensorType *type = plan.mutable_step()->add_values()->mutable_type();
    type->set_dtype(mt::plan::I64);
    type->add_shape(kBatch);
    type->add_shape(kLength);
  }
  mt::plan::AdamW *adamw = plan.mutable_optimizer();
  adamw->set_lr(0.05);
  adamw->set_beta1(0.9);
  adamw->set_beta2(0.99);
  adamw->set_eps(1e-8);
  adamw->set_weight_decay(0.01);
  adamw->set_schedule("constant");
  return plan;
}

/// A step of a model whose gradients depend on the weights and the batch: gradient element
/// i of p is master * 0.5 + (the batch's mean token) / 100 + p - i / 10, and the loss is the
/// batch's mean token. `overlapping`: as the CUDA backend, the step waits for each
/// parameter's last update before it reads it, and hands each gradient over as it is
/// computed, last-read first, into buffers the trainer reads every step.
class ModelBackend : public mt::StepBackend {
public:
  ModelBackend(mt::HostState &state, bool overlapping, bool ring = false)
      : state(state), overlapping(overlapping), ring(ring) {
    for (const mt::ParameterState &parameter : state.parameters)
      gradients.emplace_back(parameter.count);
  }

  double run(const mt::TokenInputs &inputs, int64_t step, int64_t) override {
    ++runs;
    if (failAt == step)
      throw std::runtime_error("the device is lost");
    if (stopAt == step)
      *stop = SIGTERM; // as a signal would, while the step runs
    double mean = 0;
    for (int64_t token : inputs.at("input_ids"))
      mean += static_cast<double>(token) / (kBatch * kLength);
    int count = static_cast<int>(state.parameters.size());
    std::vector<std::vector<float>> masters;
    for (int p = 0; p < count; ++p) {
      if (overlapping)
        await(p);
      applyDeviceUpdates(p); // a device's readers of p wait for its update there
      masters.push_back(state.parameters[p].masters());
    }
    for (int p = count - 1; p >= 0; --p) {
      for (size_t i = 0; i < gradients[p].size(); ++i)
        gradients[p][i] =
            masters[p][i] * 0.5f + static_cast<float>(mean / 100) + p - static_cast<float>(i) / 10;
      if (step == nanAt && p == 1)
        gradients[p][3] = NAN;
      if (overlapping)
        landed(p);
    }
    return mean;
  }
  float *gradient(int p) override { return gradients[p].data(); }
  /// With `chunk` > 0, each gradient is read `chunk` elements at a time from a buffer of its
  /// own, as the CUDA backend hands over pulled gradients.
  void readGradient(int p, int64_t count, const GradientVisitor &visit) override {
    if (chunk <= 0)
      return StepBackend::readGradient(p, count, visit);
    for (int64_t first = 0; first < count; first += chunk) {
      int64_t n = std::min(chunk, count - first);
      std::vector<float> slot(gradients[p].begin() + first, gradients[p].begin() + first + n);
      visit(slot.data(), first, n);
    }
  }
  bool pullsGradient(int) const override { return chunk > 0; }
  /// As a device's updates (the CUDA backend's --device-updates): deviceParameter's update
  /// is taken from its constants and applied later, when the next run reads it or the
  /// trainer settles, from the gradient as it was.
  bool updatesOnDevice(int p) const override { return p == deviceParameter; }
  double updateOnDevice(int p, const mt::AdamWConstants &constants, bool guarded) override {
    std::lock_guard<std::mutex> lock(devicePending);
    enqueued.push_back({p, constants, gradients[p], guarded});
    return mt::squaredNorm(gradients[p].data(), static_cast<int64_t>(gradients[p].size()));
  }
  double gradientSquares(int p) override {
    ++measuredOnDevice;
    return mt::squaredNorm(gradients[p].data(), static_cast<int64_t>(gradients[p].size()));
  }
  void settleUpdates() override {
    ++settles;
    // Settling writes the state without release(): never while a checkpoint reads it.
    if (writer && writer->writing())
      ++settledWhileWriting;
    applyDeviceUpdates(-1);
  }
  bool overlapsUpdates() const override { return overlapping; }
  bool reusesGradientMemory() const override { return ring; }
  void onGradient(std::function<void(int)> listener) override { landed = std::move(listener); }
  void awaitParameter(std::function<void(int)> wait) override { await = std::move(wait); }

  int64_t runs = 0;
  int64_t nanAt = -1;  // the step whose gradient of w1 holds a NaN
  int64_t stopAt = -1; // the step during which `stop` is set
  int64_t failAt = -1; // the step whose run throws
  int64_t chunk = 0;   // elements of a gradient readGradient hands over at a time (0: whole)
  int deviceParameter = -1; // the parameter updated "on the device"
  int64_t settles = 0, measuredOnDevice = 0, settledWhileWriting = 0;
  mt::CheckpointWriter *writer = nullptr; // the run's checkpoints, where it writes them
  volatile std::sig_atomic_t *stop = nullptr;

private:
  /// The device's updates enqueued for p (-1: every parameter), in order.
  void applyDeviceUpdates(int p) {
    std::lock_guard<std::mutex> lock(devicePending);
    for (auto it = enqueued.begin(); it != enqueued.end();) {
      if (p >= 0 && it->parameter != p) {
        ++it;
        continue;
      }
      mt::ParameterState &parameter = state.parameters[it->parameter];
      mt::adamwUpdate(parameter.weightsAt(0), parameter.firstMoment, parameter.secondMoment,
                      it->gradient.data(), parameter.count, it->constants, it->guarded);
      it = enqueued.erase(it);
    }
  }

  mt::HostState &state;
  bool overlapping, ring; // ring: as the CUDA backend's gradient ring, reusing gradient memory
  struct Enqueued {
    int parameter;
    mt::AdamWConstants constants;
    std::vector<float> gradient;
    bool guarded;
  };
  std::mutex devicePending;
  std::vector<Enqueued> enqueued;
  std::vector<std::vector<float>> gradients;
  std::function<void(int)> landed, await;
};

/// A token file of 0, 1, 2, ... (mod 97).
std::string tokenFile(const std::string &path) {
  std::vector<uint16_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i % 97);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(tokens.data()), tokens.size() * 2);
  return path;
}

std::string slurp(const std::string &path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

struct Run {
  std::vector<float> bits;
  mt::Trainer::Outcome outcome;
  int64_t runs = 0;
  int64_t dataPosition = 0;
  bool copiesMatch = true; // split masters: each high half the master rounded to nearest
  int64_t settles = 0;     // the backend's settleUpdates calls
  int64_t settledWhileWriting = 0; // of those, while a checkpoint's write was in flight
  int64_t measuredOnDevice = 0; // gradients measured "on the device" (clipping)
};

/// Trains `plan` from a fixed start to step `settings.steps`, from `resumeFrom` when given.
Run train(const mt::plan::Plan &plan, const std::string &tokens, bool overlapping,
          mt::TrainerSettings settings, const std::string &metrics = "",
          const std::string &resumeFrom = "", int64_t nanAt = -1, int64_t stopAt = -1,
          int64_t failAt = -1, int64_t chunk = 0, bool streamCopy = false, bool ring = false,
          int deviceParameter = -1) {
  mt::HostState state(plan, streamCopy);
  state.initializeRandomly(7);
  mt::TokenData data(tokens, "u16");
  if (!resumeFrom.empty()) {
    settings.resumed = mt::readCheckpoint(resumeFrom, state, settings.planHash);
    data.seek(settings.resumed.dataPosition);
  }
  mt::StepInputs inputs(plan, -1);
  std::vector<float> centers(plan.parameters_size(), 0.0f);
  std::vector<mt::WeightDecay> decays = mt::weightDecays(plan, plan.optimizer(), centers);
  mt::TrainingLog log(metrics, settings.steps, false, settings.resumed.step);
  ModelBackend backend(state, overlapping, ring);
  backend.nanAt = nanAt;
  backend.stopAt = stopAt;
  backend.failAt = failAt;
  backend.chunk = chunk;
  backend.deviceParameter = deviceParameter;
  backend.writer = settings.checkpoints;
  volatile std::sig_atomic_t stop = 0;
  backend.stop = &stop;
  mt::Trainer trainer(plan, state, &backend, nullptr, data, inputs, decays, log, settings);
  Run run;
  run.outcome = trainer.run(stop);
  run.bits = bitsOf(state);
  for (const mt::ParameterState &parameter : state.parameters) {
    std::vector<float> masters = parameter.masters();
    for (int64_t i = 0; parameter.streamCopy && i < parameter.count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &masters[i], 4);
      run.copiesMatch &= parameter.streamCopy[i] == mt::highHalf(bits);
    }
  }
  run.runs = backend.runs;
  run.settles = backend.settles;
  run.settledWhileWriting = backend.settledWhileWriting;
  run.measuredOnDevice = backend.measuredOnDevice;
  run.dataPosition = data.position();
  return run;
}

} // namespace

int main(int argc, char **argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  std::string tokens = tokenFile(dir + "/tokens.u16");
  mt::plan::Plan plan = planOf(1);
  mt::TrainerSettings settings;
  settings.steps = 6;

  Run after = train(plan, tokens, /*overlapping=*/false, settings, dir + "/after.jsonl");
  Run overlapped = train(plan, tokens, /*overlapping=*/true, settings, dir + "/overlapped.jsonl");
  check(after.outcome.ranThrough == 6 && after.runs == 6, "six steps, one run each");
  check(same(after.bits, overlapped.bits), "overlapped updates give other bits");
  check(slurp(dir + "/after.jsonl").find("\"step\":6") != std::string::npos,
        "the metrics hold step 6");
  std::printf("updates after the step and overlapping it: the same bits\n");
  // Each gradient read three elements at a time (the update of each chunk where its split
  // master, moments and gradient lie): the same elementwise AdamW as on whole masters, every
  // high half (the device's bf16 copy) the master's rounding.
  Run chunked = train(plan, tokens, /*overlapping=*/true, settings, "", "", -1, -1, -1,
                      /*chunk=*/3, /*streamCopy=*/true);
  check(same(after.bits, chunked.bits), "gradients read in chunks give other bits");
  check(chunked.copiesMatch, "a high half is not its master's rounding after chunked updates");
  std::printf("gradients read a chunk at a time (pulled): the same bits\n");
  // w1 updated "on the device" (enqueued with its constants, applied when the next step
  // reads it or the trainer settles): the same bits, the run's end settled; checkpointed
  // every 2 steps (each after settling) and resumed from step 4, the same bits too.
  Run onDevice = train(plan, tokens, /*overlapping=*/true, settings, "", "", -1, -1, -1, 0,
                       /*streamCopy=*/true, false, /*deviceParameter=*/1);
  check(same(after.bits, onDevice.bits), "an update on the device gives other bits");
  check(onDevice.copiesMatch, "a high half is not its master's rounding after device updates");
  {
    mt::CheckpointWriter writer(dir + "/device-updates", 2);
    mt::TrainerSettings checkpointed = settings;
    checkpointed.checkpoints = &writer;
    checkpointed.checkpointEvery = 2;
    checkpointed.planHash = "test-plan";
    Run written = train(plan, tokens, true, checkpointed, "", "", -1, -1, -1, 0, true, false, 1);
    check(same(after.bits, written.bits), "checkpointing device updates changes the bits");
    // Settled before each of the three checkpoints' copies of the state, and at the end.
    check(written.settles == 4, std::to_string(written.settles) + " settles");
    check(written.settledWhileWriting == 0,
          std::to_string(written.settledWhileWriting) + " settles while a checkpoint was written");
    mt::TrainerSettings rest = settings;
    rest.planHash = "test-plan";
    Run resumed = train(plan, tokens, true, rest, "", dir + "/device-updates/step-00000004", -1, -1,
                        -1, 0, true, false, 1);
    check(resumed.runs == 2 && same(resumed.bits, after.bits),
          "a checkpoint of device updates resumes to other bits");
  }
  std::printf("updates on the device: the same bits, settled for checkpoints and the end\n");
  // --profile counts the host-memory bytes AdamW moves a parameter: on split masters, 28
  // where the gradient landed there, 24 where it was pulled into the cache.
  mt::TrainerSettings profiled = settings;
  profiled.profile = true;
  double parameters = 0;
  for (const mt::plan::Parameter &parameter : plan.parameters()) {
    double elements = 1;
    for (int64_t d : parameter.type().shape())
      elements *= static_cast<double>(d);
    parameters += elements;
  }
  auto profileOf = [&](int64_t chunk) {
    return train(plan, tokens, /*overlapping=*/true, profiled, "", "", -1, -1, -1, chunk,
                 /*streamCopy=*/true)
        .outcome.profile;
  };
  mt::StepProfile landedProfile = profileOf(0), pulledProfile = profileOf(3);
  double landed = landedProfile[mt::OpFamily::AdamW].bytes / parameters,
         pulled = pulledProfile[mt::OpFamily::AdamW].bytes / parameters;
  check(landed == 28 && pulled == 24,
        "AdamW's profiled bytes a parameter: " + std::to_string(landed) + " landed, " +
            std::to_string(pulled) + " pulled");
  // --profile-into: a landed step's AdamW rate is the profile's rate alone; a pulled one's
  // holds its pulls' waits, and leaves both rates as they were.
  mt::DeviceProfile fromLanded, fromPulled;
  fromPulled.hostAdamParamsPerSecond = 1;
  fromPulled.hostAdamPulledParamsPerSecond = 2;
  landedProfile.calibrate(fromLanded);
  pulledProfile.calibrate(fromPulled);
  check(fromLanded.hostAdamParamsPerSecond > 0 && fromLanded.hostAdamPulledParamsPerSecond == 0 &&
            fromPulled.hostAdamParamsPerSecond == 1 &&
            fromPulled.hostAdamPulledParamsPerSecond == 2,
        "--profile-into's AdamW rates: a landed step's went elsewhere, or a pulled one's was "
        "written");
  std::printf("the profile's AdamW bytes: 28 a parameter landed, 24 pulled; a landed step's "
              "rate into the profile\n");

  // Two sample-major micro-batches: two runs a step, two batches of the stream, and the loss
  // their mean: each sequence's window is 4 inputs and the next token, so the inputs are
  // 0-3 and 5-8 (mean 4), then 10-13 and 15-18 (mean 14).
  mt::plan::Plan twice = planOf(2);
  mt::TrainerSettings one = settings;
  one.steps = 1;
  Run micro = train(twice, tokens, false, one, dir + "/micro.jsonl");
  check(micro.runs == 2 && micro.dataPosition == 2 * kBatch * (kLength + 1),
        "two micro-batches, two runs, " + std::to_string(micro.dataPosition) + " tokens read");
  check(slurp(dir + "/micro.jsonl").find("\"loss\":9,") != std::string::npos,
        "the mean loss of two micro-batches: " + slurp(dir + "/micro.jsonl"));
  std::printf("sample-major micro-batches: a run each, the loss their mean\n");

  // A NaN in w1's gradient at step 3: stop leaves the state of step 2; skip goes on and
  // counts it.
  mt::TrainerSettings two = settings;
  two.steps = 2;
  Run clean2 = train(plan, tokens, false, two);
  for (bool overlapping : {false, true}) {
    Run stopped = train(plan, tokens, overlapping, settings, "", "", /*nanAt=*/3);
    // Overlapped, a step's gradients are judged as its updates finish, during the next
    // step, whose updates the halt then keeps out.
    check(overlapping ? stopped.outcome.ranThrough >= 3 && stopped.outcome.ranThrough <= 4
                      : stopped.outcome.ranThrough == 3,
          "stopped after step " + std::to_string(stopped.outcome.ranThrough));
    // Gated, which update meets the NaN first (w1's own, or the norm once every gradient has
    // landed) is the worker's timing; after the backward, it is always w1.
    check(overlapping ? stopped.outcome.nonFinite.find("step 3: the gradient") == 0 &&
                            stopped.outcome.nonFinite.find("is not finite") != std::string::npos
                      : stopped.outcome.nonFinite.find("step 3: the gradient of w1 is not "
                                                       "finite") == 0,
          "the reason: " + stopped.outcome.nonFinite);
    if (!overlapping)
      check(same(stopped.bits, clean2.bits), "a stopped step left no update");
    else // gated: the updates of the gradients that landed before it ran or not, as the
         // worker went (how many landed first is the landing threads' timing)
      check(stopped.outcome.nonFinite.find("; its update was not applied") != std::string::npos ||
                stopped.outcome.nonFinite.find(" parameters whose gradients landed before it "
                                               "were applied") != std::string::npos,
            "gated: " + stopped.outcome.nonFinite);
  }
  mt::TrainerSettings skip = settings;
  skip.stopOnNonFinite = false;
  Run skipped = train(plan, tokens, false, skip, dir + "/skip.jsonl", "", 3);
  check(skipped.outcome.ranThrough == 6 && skipped.outcome.nonFinite.empty(), "skip goes on");
  check(slurp(dir + "/skip.jsonl").find("\"skipped_steps\":1") != std::string::npos,
        "one skipped step counted");
  std::printf("non-finite: stop names the step and parameter and applies nothing, skip counts "
              "it\n");

  // Clipping by a measuring pass (each step runs twice on its batch: its gradients measured
  // as they land, then updated as they land) gives the bits of clipping with every gradient
  // held, overlapped or not; a NaN in a measuring run keeps its step from a second run and
  // from any update.
  mt::plan::Plan clipped = planOf(1);
  clipped.mutable_optimizer()->set_grad_clip(0.5);
  Run held = train(clipped, tokens, false, settings);
  Run heldTwo = train(clipped, tokens, false, two);
  mt::TrainerSettings measuring = settings;
  measuring.clipByMeasuringPass = true;
  for (bool overlapping : {false, true}) {
    Run twice = train(clipped, tokens, overlapping, measuring, dir + "/measured.jsonl");
    check(twice.runs == 12 && twice.dataPosition == held.dataPosition,
          std::to_string(twice.runs) + " runs for six measured steps");
    check(same(twice.bits, held.bits), "a measuring pass gives other bits than held gradients");
    check(slurp(dir + "/measured.jsonl").find("\"step_runs\":2") != std::string::npos,
          "the metrics count two runs a step");
    Run stopped = train(clipped, tokens, overlapping, measuring, "", "", /*nanAt=*/3);
    check(stopped.outcome.nonFinite.find("step 3: the gradient of w1 is not finite; its update "
                                         "was not applied") == 0,
          "the reason: " + stopped.outcome.nonFinite);
    if (!overlapping)
      check(stopped.runs == 5 && same(stopped.bits, heldTwo.bits),
            "a NaN in the measuring run: " + std::to_string(stopped.runs) + " runs");
  }
  check(same(held.bits, train(clipped, tokens, true, settings).bits),
        "held clipping overlapped gives other bits");
  // w1 updated "on the device", its gradient measured there for the norm: the same bits.
  Run measuredThere = train(clipped, tokens, true, measuring, "", "", -1, -1, -1, 0,
                            /*streamCopy=*/true, false, /*deviceParameter=*/1);
  check(same(measuredThere.bits, held.bits) && measuredThere.measuredOnDevice == 6,
        "a measuring pass with w1 on the device: " +
            std::to_string(measuredThere.measuredOnDevice) + " measures there, other bits");
  std::printf("clipping by a measuring pass: two runs a step, the held gradients' bits\n");

  // A backend whose ring lands later gradients over earlier ones takes clipping by a
  // measuring pass (each update queued as its gradient lands), and refuses clipping that
  // measures every gradient first, before any step.
  check(same(held.bits, train(clipped, tokens, true, measuring, "", "", -1, -1, -1, 0, false,
                              /*ring=*/true)
                            .bits),
        "a measuring pass over a gradient ring gives other bits");
  std::string refused;
  try {
    train(clipped, tokens, true, settings, "", "", -1, -1, -1, 0, false, /*ring=*/true);
  } catch (const std::logic_error &error) {
    refused = error.what();
  }
  check(refused.find("lands gradients in a ring") != std::string::npos,
        "held clipping over a gradient ring: '" + refused + "'");
  std::printf("a gradient ring: measured clipping runs, held clipping refused\n");

  // Checkpoints every 2 steps; a run resumed from step 4 ends with the uninterrupted bits.
  mt::CheckpointWriter writer(dir + "/checkpoints", 2);
  mt::TrainerSettings checkpointed = settings;
  checkpointed.checkpoints = &writer;
  checkpointed.checkpointEvery = 2;
  checkpointed.planHash = "test-plan";
  // A state of split masters (a device's) writes the whole masters' file: it resumes into
  // either kind of state.
  for (auto [overlapping, split] : {std::pair{false, false}, {true, false}, {true, true}}) {
    Run whole = train(plan, tokens, overlapping, checkpointed, "", "", -1, -1, -1, 0, split);
    check(same(whole.bits, after.bits), "checkpointing changes the bits");
    mt::TrainerSettings rest = settings;
    rest.planHash = "test-plan";
    for (bool into : {false, true}) {
      Run resumed = train(plan, tokens, overlapping, rest, "", dir + "/checkpoints/step-00000004",
                          -1, -1, -1, 0, into);
      check(resumed.runs == 2 && same(resumed.bits, after.bits),
            std::string("a resumed run gives other bits") + (split ? " from split masters" : "") +
                (into ? " into split masters" : ""));
    }
  }
  std::printf("checkpoints: resumed from step 4, the uninterrupted run's bits, from and into "
              "split masters too\n");

  // A stop asked for during step 3 finishes it and checkpoints it.
  mt::CheckpointWriter stops(dir + "/stops", 1);
  mt::TrainerSettings stoppable = checkpointed;
  stoppable.checkpoints = &stops;
  stoppable.checkpointEvery = 0;
  Run halted = train(plan, tokens, true, stoppable, "", "", -1, /*stopAt=*/3);
  check(halted.outcome.ranThrough == 3 && halted.runs == 3, "stopped after step 3");
  check(mt::findCheckpoint(dir + "/stops").find("step-00000003") != std::string::npos,
        "the stop's checkpoint");
  std::printf("a stop: the step running finishes and is checkpointed\n");

  // A backend that fails during step 3: the error names the step, the checkpoint of step 2
  // is whole, and a run resumed from it ends with the uninterrupted run's bits.
  mt::CheckpointWriter failing(dir + "/failing", 2);
  mt::TrainerSettings everyStep = checkpointed;
  everyStep.checkpoints = &failing;
  everyStep.checkpointEvery = 1;
  std::string failure;
  try {
    train(plan, tokens, true, everyStep, "", "", -1, -1, /*failAt=*/3);
  } catch (const std::exception &error) {
    failure = error.what();
  }
  check(failure == "step 3: the device is lost", "the failure: " + failure);
  std::string lastWhole = mt::findCheckpoint(dir + "/failing");
  check(lastWhole.find("step-00000002") != std::string::npos, "the last checkpoint " + lastWhole);
  mt::TrainerSettings rest = settings;
  rest.planHash = "test-plan";
  Run recovered = train(plan, tokens, true, rest, "", lastWhole);
  check(recovered.runs == 4 && same(recovered.bits, after.bits),
        "a run resumed after the failure gives other bits");
  std::printf("a failed step: named, the last checkpoint whole, resumed to the same bits\n");

  // The registry: the host backend registers itself; an unknown one is named.
  check(mt::findBackend("host").name == "host", "the host backend");
  std::string unknown;
  try {
    mt::findBackend("tpu");
  } catch (const std::exception &error) {
    unknown = error.what();
  }
  check(unknown.find("--backend must be auto or one of host") == 0, "unknown: " + unknown);
  check(mt::findBackend("auto").available(), "auto is available");
  std::printf("backends: host registered, auto available, an unknown one named\n");
  return failures ? 1 : 0;
}
