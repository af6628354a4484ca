// mt-run's options: parsing, checking and the usage text.
#include "tools/mt-run/Options.h"

#include "runtime/AdamW.h"

#include <algorithm>
#include <cmath>

#include <cstdlib>
#include <limits>

namespace mt {

const char *const kUsage = R"(usage: mt-run PLAN [options]
       mt-run --calibrate OUT.json
  --calibrate OUT.json      measure this machine (its GPU with --backend=auto|cuda, else the
                            host backend) and write the device profile that
                            mtc --target=OUT.json predicts steps with
  --dump                    print the plan and exit
  --check-gradients         compare the backward with finite differences (fp64) and exit
  --check-tolerance X       the largest error --check-gradients accepts (default 1e-5)
  --check-schedule          run each step as the plan's streams might interleave (a random
                            order per step that keeps only stream order and events), poison
                            released buffers, and fail on any dependency the plan misses
  --ignore-event N          with --check-schedule: drop event N (tests that the check fails)
  --data FILE               training tokens (nanoGPT uint16, llm.c headered, or --data-dtype=u32)
  --data-dtype u16|u32      element type of a raw token file (default u16)
  --steps N                 optimizer steps (default 1)
  --backend auto|host|cuda  where the step runs (default auto: cuda when built and present)
  --check-against-host      run one step on the device and on the host backend from the same
                            weights and data, print the loss and gradient errors, and exit
                            (fails above --check-tolerance, default 3e-2 here)
  --check-kernels           run one step on the device, serialized, then each of its kernels
                            on the host backend from the operands the device read; print
                            each op's worst error and exit (fails above --check-tolerance,
                            default 1e-2 here)
  --ranks N                 data-parallel over N ranks as threads of this process on the
                            host backend: each rank its own batches, gradients averaged and
                            AdamW state sharded over the ranks (the math of N GPUs)
  --nproc-per-node N        data-parallel over N GPUs of this host, one process each, joined
                            by NCCL (loaded from libnccl.so.2); the same math as --ranks
  --serialize               cuda debug: every command on one stream, no buffer reuse
  --attention cudnn|cudnn-deterministic|cudnn-forward|own
                            cuda: cudnn (the default): cuDNN 9's flash-attention engines for
                            the forward and backward where cuDNN loads and serves the shape
                            (bf16, no padding, window or cap), the backward summing dq with
                            atomics (runs differ in the last bits), mt's kernels elsewhere;
                            cudnn-deterministic: dq from one product (the same bits each
                            run, a larger workspace); cudnn-forward: cuDNN's forward only;
                            own: mt's kernels
  --device-updates[=N]      cuda: AdamW of the weights the plan keeps on the device across
                            steps (mtc --persistent-layers) runs on the device, from gradients
                            that wait there (mtc --gradient-ring=device), the same bits as the
                            host's AdamW: their low halves and moments stay in device memory
                            where it holds them (see --device-update-state), else cross in and
                            back, 20 bytes a parameter through the host's memory where the
                            host's AdamW, the gradient and the weight move 34. =N: those of N
                            layers spread over the step and the embedding (the device's updates
                            then run beside the host's from the backward's first landings), the
                            host updating the rest; =0: none. Default: the plan's count (mtc
                            --device-updates)
  --device-update-state resident|streamed
                            cuda: resident (the default): the device's updates keep their low
                            halves and moments in device memory, as many as fit leaving 2 GiB
                            free, crossing them only for checkpoints and the run's end;
                            streamed: they cross in and back at every update
  --trace OUT.json          cuda: the last step's measured streams, in the trace-event format
                            of mtc --emit=timeline
  --profile                 time every kernel: each step's time by op family (products,
                            attention, norms, rope, elementwise, loss, waits, copies, AdamW)
                            in the metrics, and the last step's as a table
  --profile-into PROFILE.json   with --profile: the last step's kernel rates (products,
                            attention, memory-bound kernels) written into that device
                            profile (from --calibrate), so that mtc --target=PROFILE.json
                            predicts steps from what the kernels achieve
  --init model|random       initial weights from the plan's files or drawn (default model)
  --weights PATH            pretrained weights: a .safetensors file, or a folder of shards
                            with model.safetensors.index.json, by PyTorch parameter name
  --weights-map FILE        JSON: plan parameter -> PyTorch name, or -> {"name": N,
                            "transposed": true, "offset": C}, where the plan lacks the names
                            (legacy export; "offset": the parameter holds the tensor plus C)
  --seed S                  seed of --init=random (default 0)
  --pad-token-id ID         the padding token: a model's attention_mask is 0 there and the
                            loss leaves out targets that are padding
  --metrics OUT.jsonl       one JSON object per step
  --checkpoint-dir DIR      checkpoints (host state, step, data position) in DIR/step-N, at
                            the end, on SIGINT/SIGTERM (after the step running), and every
                            --checkpoint-every N steps; the newest --keep-checkpoints K kept
                            (default 3); each is written while the next steps train
  --checkpoint-memory GIB   host memory a checkpoint may copy the state into while it is
                            written, so that the updates need not wait for the disk
                            (default: 3/4 of what is available; 0: they wait)
  --on-nonfinite stop|skip  a step whose loss or a gradient is not finite applies no update:
                            stop (the default) writes a checkpoint and exits 3 naming the
                            step and the loss or first parameter; skip counts it and goes on
  --resume DIR              go on from a checkpoint (DIR/step-N, or the newest in DIR) to
                            --steps, which counts from the start of training
  --save-weights OUT.safetensors   the trained weights under PyTorch's names and layouts
  --save-onnx OUT.onnx      the source model with the trained weights (OUT.onnx.data)
  --lr --beta1 --beta2 --eps --weight-decay X   AdamW (defaults from the plan)
  --no-decay REGEX          parameter names without weight decay
  --grad-clip X             clip the global gradient norm to X
  --grad-clip-memory held|recompute
                            held (the default): each gradient waits in host memory until
                            the global norm is known (4 bytes a parameter); recompute: each
                            step runs twice on its batch, the first only measuring the norm,
                            the second updating as gradients land: no gradient held, twice
                            the device work (one process, layer-major or one micro-batch)
  --warmup STEPS  --schedule constant|cosine  --min-lr X
)";

namespace {

double numberOf(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  double number = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0')
    throw UsageError(flag + " needs a number, got '" + value + "'");
  if (!std::isfinite(number))
    throw UsageError(flag + " needs a finite number, got '" + value + "'");
  return number;
}

/// A count: a whole number of at least `low` (steps, seeds, ranks), refused when it is not
/// one rather than cut to one.
int64_t countOf(const std::string &flag, const std::string &value, int64_t low) {
  double number = numberOf(flag, value);
  if (number != std::floor(number) || number < static_cast<double>(low) || number > 9e15)
    throw UsageError(flag + " needs a whole number >= " + std::to_string(low) + ", got '" + value +
                     "'");
  return static_cast<int64_t>(number);
}

/// The AdamW flags, each setting one field of the plan's optimizer settings.
const std::map<std::string, OptimizerFlag> &optimizerFlags() {
  static const std::map<std::string, OptimizerFlag> flags = {
      {"--lr", [](plan::AdamW &a, const std::string &v) { a.set_lr(numberOf("--lr", v)); }},
      {"--beta1",
       [](plan::AdamW &a, const std::string &v) { a.set_beta1(numberOf("--beta1", v)); }},
      {"--beta2",
       [](plan::AdamW &a, const std::string &v) { a.set_beta2(numberOf("--beta2", v)); }},
      {"--eps", [](plan::AdamW &a, const std::string &v) { a.set_eps(numberOf("--eps", v)); }},
      {"--weight-decay",
       [](plan::AdamW &a, const std::string &v) {
         a.set_weight_decay(numberOf("--weight-decay", v));
       }},
      {"--grad-clip",
       [](plan::AdamW &a, const std::string &v) { a.set_grad_clip(numberOf("--grad-clip", v)); }},
      {"--warmup",
       [](plan::AdamW &a, const std::string &v) { a.set_warmup(countOf("--warmup", v, 0)); }},
      {"--min-lr",
       [](plan::AdamW &a, const std::string &v) { a.set_min_lr(numberOf("--min-lr", v)); }},
      {"--no-decay", [](plan::AdamW &a, const std::string &v) { a.set_no_decay(v); }},
      {"--schedule",
       [](plan::AdamW &a, const std::string &v) {
         if (v != "constant" && v != "cosine")
           throw UsageError("--schedule must be constant or cosine, got " + v);
         a.set_schedule(v);
       }},
  };
  return flags;
}

} // namespace

Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg.rfind("--", 0) != 0) {
      if (!options.plan.empty())
        throw UsageError("more than one plan given: " + options.plan + " and " + arg);
      options.plan = arg;
      continue;
    }
    size_t equals = arg.find('=');
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
      arg = arg.substr(0, equals);
    }
    auto take = [&]() {
      if (equals != std::string::npos)
        return value;
      if (i + 1 >= argc)
        throw UsageError(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--dump")
      options.dump = true;
    else if (arg == "--check-gradients")
      options.checkGradients = true;
    else if (arg == "--calibrate")
      options.calibrate = take();
    else if (arg == "--check-against-host")
      options.checkAgainstHost = true;
    else if (arg == "--check-kernels")
      options.checkKernels = true;
    else if (arg == "--nproc-per-node")
      options.processes = static_cast<int>(countOf(arg, take(), 1));
    else if (arg == "--ranks")
      options.ranks = static_cast<int>(countOf(arg, take(), 1));
    else if (arg == "--serialize")
      options.serialize = true;
    else if (arg == "--device-updates")
      options.deviceUpdateLayers =
          equals == std::string::npos
              ? std::numeric_limits<int>::max()
              : static_cast<int>(
                    std::min<int64_t>(countOf(arg, value, 0), std::numeric_limits<int>::max()));
    else if (arg == "--device-update-state") {
      std::string where = take();
      if (where != "resident" && where != "streamed")
        throw UsageError("--device-update-state takes resident or streamed, not '" + where + "'");
      options.residentUpdateState = where == "resident";
    } else if (arg == "--attention") {
      std::string kernels = take();
      if (kernels != "cudnn" && kernels != "cudnn-deterministic" && kernels != "cudnn-forward" &&
          kernels != "own")
        throw UsageError(
            "--attention takes cudnn, cudnn-deterministic, cudnn-forward or own, not '" + kernels +
            "'");
      options.attention = kernels == "cudnn"                 ? AttentionKernels::Cudnn
                          : kernels == "cudnn-deterministic" ? AttentionKernels::CudnnDeterministic
                          : kernels == "cudnn-forward"       ? AttentionKernels::CudnnForward
                                                             : AttentionKernels::Own;
    } else if (arg == "--trace")
      options.trace = take();
    else if (arg == "--profile")
      options.profile = true;
    else if (arg == "--profile-into")
      options.profileInto = take();
    else if (arg == "--check-schedule")
      options.checkSchedule = true;
    else if (arg == "--ignore-event")
      options.ignoredEvent = static_cast<int>(countOf(arg, take(), 0));
    else if (arg == "--check-tolerance")
      options.checkTolerance = numberOf(arg, take());
    else if (arg == "--help")
      throw UsageError("");
    else if (arg == "--data")
      options.data = take();
    else if (arg == "--data-dtype")
      options.dataDtype = take();
    else if (arg == "--steps")
      options.steps = countOf(arg, take(), 1);
    else if (arg == "--backend")
      options.backend = take();
    else if (arg == "--init")
      options.init = take();
    else if (arg == "--pad-token-id") {
      double id = numberOf(arg, take());
      if (id < 0 || id != static_cast<double>(static_cast<int64_t>(id)))
        throw std::runtime_error("--pad-token-id must be a token id (an integer >= 0)");
      options.padTokenId = static_cast<int64_t>(id);
    } else if (arg == "--seed")
      options.seed = static_cast<uint64_t>(countOf(arg, take(), 0));
    else if (arg == "--metrics")
      options.metrics = take();
    else if (arg == "--save-weights")
      options.saveWeights = take();
    else if (arg == "--save-onnx")
      options.saveOnnx = take();
    else if (arg == "--weights")
      options.weights = take();
    else if (arg == "--weights-map")
      options.weightsMap = take();
    else if (arg == "--checkpoint-dir")
      options.checkpointDir = take();
    else if (arg == "--checkpoint-every")
      options.checkpointEvery = countOf(arg, take(), 1);
    else if (arg == "--checkpoint-memory") {
      double gib = numberOf(arg, take());
      if (!(gib >= 0 && gib < 1e9))
        throw std::runtime_error("--checkpoint-memory must be a size in GiB >= 0");
      options.checkpointMemory = static_cast<int64_t>(gib * 1073741824.0);
    } else if (arg == "--keep-checkpoints")
      options.keepCheckpoints = static_cast<int>(countOf(arg, take(), 1));
    else if (arg == "--resume")
      options.resume = take();
    else if (arg == "--on-nonfinite") {
      options.onNonFinite = take();
      if (options.onNonFinite != "stop" && options.onNonFinite != "skip")
        throw UsageError("--on-nonfinite must be stop or skip, got '" + options.onNonFinite + "'");
    } else if (arg == "--grad-clip-memory") {
      options.gradClipMemory = take();
      if (options.gradClipMemory != "held" && options.gradClipMemory != "recompute")
        throw UsageError("--grad-clip-memory takes held or recompute, not '" +
                         options.gradClipMemory + "'");
    } else if (auto flag = optimizerFlags().find(arg); flag != optimizerFlags().end()) {
      std::string value = take();
      // A bad value is a usage error now, not after loading the plan: the one setting checked
      // over torch's defaults.
      plan::AdamW check;
      check.set_lr(1e-3);
      check.set_beta1(0.9);
      check.set_beta2(0.999);
      check.set_eps(1e-8);
      flag->second(check, value);
      if (std::string error = adamwSettingsError(check); !error.empty())
        throw UsageError(error);
      options.optimizer.emplace_back(flag->second, value);
    } else
      throw UsageError("unknown option " + arg);
  }
  if (options.plan.empty() && options.calibrate.empty())
    throw UsageError("no plan given");
  if (options.ranks > 1 && options.processes > 0)
    throw std::runtime_error("--ranks (threads) and --nproc-per-node (processes) exclude each "
                             "other");
  if (options.init != "model" && options.init != "random")
    throw std::runtime_error("--init must be model or random, got " + options.init);
  if (!options.weights.empty() && options.init == "random")
    throw std::runtime_error("--weights and --init=random exclude each other");
  if (!options.weightsMap.empty() && options.weights.empty() && options.saveWeights.empty())
    throw std::runtime_error("--weights-map names where --weights or --save-weights go; "
                             "give one of them");
  if (options.checkpointEvery > 0 && options.checkpointDir.empty())
    throw std::runtime_error("--checkpoint-every needs --checkpoint-dir");
  if (!options.profileInto.empty() && !options.profile)
    throw std::runtime_error("--profile-into writes what --profile measures; give --profile");
  if (options.checkpointMemory >= 0 && options.checkpointDir.empty())
    throw std::runtime_error("--checkpoint-memory needs --checkpoint-dir");
  if ((!options.checkpointDir.empty() || !options.resume.empty()) && options.processes > 0)
    throw std::runtime_error("checkpoints and --resume hold one process's whole state; they do "
                             "not run with --nproc-per-node yet");
  if (!options.resume.empty() && (!options.weights.empty() || options.init == "random"))
    throw std::runtime_error("--resume takes the weights from the checkpoint; it excludes "
                             "--weights and --init=random");
  return options;
}

} // namespace mt
