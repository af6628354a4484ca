// mtc's flags and their checks.
#include "tools/mtc/Options.h"

#include "passes/DeviceProfile.h"

#include <optional>

using namespace mlir;

namespace mt::mtc {

llvm::cl::OptionCategory category("mtc options");

llvm::cl::opt<std::string> inputPath(llvm::cl::Positional,
                                     llvm::cl::desc("<model.onnx|.onnxtxt|.mlir>"),
                                     llvm::cl::init("-"), llvm::cl::cat(category));
llvm::cl::opt<std::string> outputPath("o", llvm::cl::desc("Output file ('-' for stdout)"),
                                      llvm::cl::value_desc("file"), llvm::cl::init("-"),
                                      llvm::cl::cat(category));

llvm::cl::opt<Stage> emit(
    "emit",
    llvm::cl::desc("The stage to write (default: plan when -o names a .mtp file, else graph)"),
    llvm::cl::values(clEnumValN(Stage::Import, "import", "the graph as imported, before raising"),
                     clEnumValN(Stage::Graph, "graph", "the graph after raising to fused ops"),
                     clEnumValN(Stage::Segments, "segments",
                                "the forward cut into layers that call shared templates"),
                     clEnumValN(Stage::Train, "train", "the training step: loss and backward"),
                     clEnumValN(Stage::Schedule, "schedule",
                                "the step with copies, device buffers, streams and events"),
                     clEnumValN(Stage::Timeline, "timeline",
                                "the predicted step as Chrome trace-event JSON (Perfetto)"),
                     clEnumValN(Stage::Plan, "plan", "the plan that mt-run executes (binary)")),
    llvm::cl::cat(category));

llvm::cl::opt<Summary>
    summary("summary", llvm::cl::desc("Print a summary of the model instead of IR"),
            llvm::cl::init(Summary::None), llvm::cl::ValueOptional,
            llvm::cl::values(clEnumValN(Summary::Text, "text", "for people (the default)"),
                             clEnumValN(Summary::Text, "", ""),
                             clEnumValN(Summary::Json, "json", "one JSON object, for scripts")),
            llvm::cl::cat(category));

llvm::cl::opt<bool> foldAttentionLayout(
    "fold-attention-layout",
    llvm::cl::desc("Attention reads and writes the projections' rows [B, T, H, D], without "
                   "transposes into heads and back (default on)"),
    llvm::cl::init(true), llvm::cl::cat(category));
llvm::cl::opt<bool> segmentLayers("segment-layers",
                                  llvm::cl::desc("Cut the model into layer templates (default on)"),
                                  llvm::cl::init(true), llvm::cl::cat(category));

llvm::cl::opt<std::string>
    target("target",
           llvm::cl::desc("Device profile: h200, h100 (an 80 GB H100), or a JSON profile from "
                          "mt-run --calibrate"),
           llvm::cl::init("h200"), llvm::cl::cat(category));
llvm::cl::opt<int64_t> microBatches("micro-batches",
                                    llvm::cl::desc("Micro-batches accumulated per step"),
                                    llvm::cl::init(1), llvm::cl::cat(category));
llvm::cl::opt<std::string> accumulation("accumulation",
                                        llvm::cl::desc("auto, layer-major or sample-major"),
                                        llvm::cl::init("auto"), llvm::cl::cat(category));
llvm::cl::opt<std::string>
    checkpoints("checkpoints",
                llvm::cl::desc("Where layer inputs wait for the backward: auto (the default: "
                               "host, unless the CPU's AdamW is behind and the device has room "
                               "for checkpoints and resident weights that make the step at "
                               "least 3% faster; host with --resident-layers), host or device"),
                llvm::cl::init("auto"), llvm::cl::cat(category));
llvm::cl::opt<std::string> gradientRing(
    "gradient-ring",
    llvm::cl::desc("Where the ring of gradients is, where each update starts as its gradient "
                   "lands: host (the default: each gradient lands in pinned host memory), "
                   "device (each update pulls its gradient from device memory into the CPU's "
                   "cache just before it runs; not yet measured on a GPU) or auto (device "
                   "where the cost model predicts a step at least 2% faster and the ring fits "
                   "beside the plan)"),
    llvm::cl::init("host"), llvm::cl::cat(category));
llvm::cl::opt<std::string> devicePrecision(
    "device-precision",
    llvm::cl::desc("How the device stores weights and activations: bf16 (the default; "
                   "fp32 accumulation) or fp32 (twice the bytes, exact to fp32)"),
    llvm::cl::init("bf16"), llvm::cl::cat(category));
llvm::cl::opt<std::string> streamWeights(
    "stream-weights",
    llvm::cl::desc("Where streamed weights come from: auto (bf16, unless the device's "
                   "weights are fp32), bf16 (the split masters' high halves: the host holds "
                   "12 bytes a parameter either way) or fp32 (the masters, cast on the "
                   "device: twice the PCIe bytes)"),
    llvm::cl::init("auto"), llvm::cl::cat(category));
llvm::cl::opt<std::string>
    deviceMemory("device-memory",
                 llvm::cl::desc("Device memory the plan may use, e.g. 16GiB (default: the "
                                "target's)"),
                 llvm::cl::cat(category));

llvm::cl::opt<int64_t> recomputeInterval(
    "recompute-interval",
    llvm::cl::desc("Layers per checkpoint, K (default 0: the smallest K whose plan fits "
                   "the device memory)"),
    llvm::cl::init(0), llvm::cl::cat(category));

llvm::cl::opt<int64_t> residentLayers(
    "resident-layers",
    llvm::cl::desc("The last N layers keep their weights on the device from their forward to "
                   "their backward: one crossing a step instead of two, for N layers' weights "
                   "of device memory (default 0: none but the last layer's where its forward "
                   "and backward calls meet)"),
    llvm::cl::init(0), llvm::cl::cat(category));

llvm::cl::opt<std::string> savedLayers(
    "saved-layers",
    llvm::cl::desc("The last N layers keep the activations their backward reads (the results "
                   "of their products and attentions) on the device from their forward, "
                   "instead of recomputing the layer: no product runs twice, for those "
                   "activations' device memory (default auto: as many as the device memory "
                   "leaves room for, where the cost model predicts a step at least 3% faster; "
                   "0: every layer recomputes)"),
    llvm::cl::init("auto"), llvm::cl::cat(category));

llvm::cl::opt<std::string> deviceUpdates(
    "device-updates",
    llvm::cl::desc("N layers spread over the step, and the embedding, update "
                   "on the device by default (mt-run --device-updates): their low halves and "
                   "moments stay in device memory where it has room, else cross in and back "
                   "(20 bytes a parameter through the host's memory where the host's AdamW "
                   "moves 34), while the host updates the rest. Needs --persistent-layers at "
                   "least the layer count and --gradient-ring=device; auto (the default): the "
                   "count the cost model predicts the fastest step for, where at least 2% "
                   "faster than none (none where the step cannot); 0: none"),
    llvm::cl::init("auto"), llvm::cl::cat(category));

llvm::cl::opt<int64_t> persistentLayers(
    "persistent-layers",
    llvm::cl::desc("The last N layers keep their weights on the device across steps (N at "
                   "least the layer count: every parameter's): each update's bf16 copy goes "
                   "to the device a piece at a time as the update writes it, and the weights "
                   "cross in no step, for their bytes of device memory (default 0)"),
    llvm::cl::init(0), llvm::cl::cat(category));

llvm::cl::opt<bool>
    schedule("schedule",
             llvm::cl::desc("Schedule the step: copies, device buffers, streams (default on)"),
             llvm::cl::init(true), llvm::cl::cat(category));

llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("Static shape of a graph input with free dimensions, NAME:4x32 (repeatable)"),
    llvm::cl::value_desc("NAME:DxD..."), llvm::cl::cat(category));

namespace {

/// "16GiB", "80GB", "512MiB" or plain bytes.
std::optional<double> parseBytes(llvm::StringRef text) {
  static const std::pair<const char *, double> units[] = {{"TiB", 1099511627776.0},
                                                          {"GiB", 1073741824.0},
                                                          {"MiB", 1048576.0},
                                                          {"KiB", 1024.0},
                                                          {"TB", 1e12},
                                                          {"GB", 1e9},
                                                          {"MB", 1e6},
                                                          {"KB", 1e3},
                                                          {"B", 1.0}};
  double scale = 1;
  for (auto [suffix, factor] : units)
    if (text.consume_back(suffix)) {
      scale = factor;
      break;
    }
  double value;
  if (text.trim().getAsDouble(value) || value <= 0)
    return std::nullopt;
  return value * scale;
}

} // namespace

/// The schedule options' values, checked before any work.
LogicalResult checkScheduleOptions() {
  if (checkpoints != "auto" && checkpoints != "host" && checkpoints != "device") {
    llvm::errs() << "mtc: --checkpoints must be auto, host or device\n";
    return failure();
  }
  if (gradientRing != "auto" && gradientRing != "host" && gradientRing != "device") {
    llvm::errs() << "mtc: --gradient-ring must be auto, host or device\n";
    return failure();
  }
  if (devicePrecision != "bf16" && devicePrecision != "fp32") {
    llvm::errs() << "mtc: --device-precision must be bf16 or fp32\n";
    return failure();
  }
  if (streamWeights != "auto" && streamWeights != "bf16" && streamWeights != "fp32") {
    llvm::errs() << "mtc: --stream-weights must be auto, bf16 or fp32\n";
    return failure();
  }
  if (accumulation != "auto" && accumulation != "layer-major" && accumulation != "sample-major") {
    llvm::errs() << "mtc: --accumulation must be auto, layer-major or sample-major\n";
    return failure();
  }
  if (microBatches < 1) {
    llvm::errs() << "mtc: --micro-batches must be at least 1\n";
    return failure();
  }
  if (residentLayers < 0) {
    llvm::errs() << "mtc: --resident-layers must be at least 0, got " << residentLayers << "\n";
    return failure();
  }
  if (int64_t count; savedLayers != "auto" &&
                     (llvm::StringRef(savedLayers).getAsInteger(10, count) || count < 0)) {
    llvm::errs() << "mtc: --saved-layers must be auto or at least 0, got " << savedLayers << "\n";
    return failure();
  }
  if (persistentLayers < 0) {
    llvm::errs() << "mtc: --persistent-layers must be at least 0, got " << persistentLayers << "\n";
    return failure();
  }
  if (int64_t count; deviceUpdates != "auto" &&
                     (llvm::StringRef(deviceUpdates).getAsInteger(10, count) || count < 0)) {
    llvm::errs() << "mtc: --device-updates must be auto or at least 0, got " << deviceUpdates
                 << "\n";
    return failure();
  }
  std::string error;
  if (failed(loadDeviceProfile(target, error))) {
    llvm::errs() << "mtc: " << error << "\n";
    return failure();
  }
  return success();
}

/// The device memory a plan may use, in bytes: --device-memory, or 0 for the target's.
FailureOr<int64_t> deviceBudget() {
  if (deviceMemory.empty())
    return 0;
  std::optional<double> bytes = parseBytes(deviceMemory);
  if (!bytes) {
    llvm::errs() << "mtc: --device-memory '" << deviceMemory << "' is not a size like 16GiB\n";
    return failure();
  }
  return static_cast<int64_t>(*bytes);
}

} // namespace mt::mtc
