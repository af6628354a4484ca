// The mtc driver: input (ONNX binary or text, or graph-level MLIR), its flags as one pass
// pipeline, and the outputs: IR at a chosen stage, a plan, or a summary.
#include "tools/mtc/Compiler.h"

#include "frontend/OnnxImporter.h"
#include "ir/MtOps.h"
#include "passes/DeviceProfile.h"
#include "passes/DeviceReserve.h"
#include "passes/Passes.h"
#include "passes/StepCostModel.h"
#include "passes/StepSummary.h"
#include "plan/PlanWriter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

namespace mt {

namespace {

llvm::cl::OptionCategory category("mtc options");

llvm::cl::opt<std::string> inputPath(llvm::cl::Positional, llvm::cl::desc("<model.onnx|.onnxtxt|.mlir>"),
                                     llvm::cl::init("-"), llvm::cl::cat(category));
llvm::cl::opt<std::string> outputPath("o", llvm::cl::desc("Output file ('-' for stdout)"),
                                      llvm::cl::value_desc("file"), llvm::cl::init("-"),
                                      llvm::cl::cat(category));

enum class Stage { Import, Graph, Segments, Train, Schedule, Timeline, Plan };
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

enum class Summary { None, Text, Json };
llvm::cl::opt<Summary> summary(
    "summary", llvm::cl::desc("Print a summary of the model instead of IR"),
    llvm::cl::init(Summary::None), llvm::cl::ValueOptional,
    llvm::cl::values(clEnumValN(Summary::Text, "text", "for people (the default)"),
                     clEnumValN(Summary::Text, "", ""),
                     clEnumValN(Summary::Json, "json", "one JSON object, for scripts")),
    llvm::cl::cat(category));

llvm::cl::opt<bool> segmentLayers(
    "segment-layers", llvm::cl::desc("Cut the model into layer templates (default on)"),
    llvm::cl::init(true), llvm::cl::cat(category));

llvm::cl::opt<std::string> target(
    "target", llvm::cl::desc("Device profile: h200, or a JSON profile from mt-run --calibrate"),
    llvm::cl::init("h200"), llvm::cl::cat(category));
llvm::cl::opt<int64_t> microBatches("micro-batches",
                                    llvm::cl::desc("Micro-batches accumulated per step"),
                                    llvm::cl::init(1), llvm::cl::cat(category));
llvm::cl::opt<std::string> accumulation(
    "accumulation", llvm::cl::desc("auto, layer-major or sample-major"), llvm::cl::init("auto"),
    llvm::cl::cat(category));
llvm::cl::opt<std::string> checkpoints(
    "checkpoints", llvm::cl::desc("Where layer inputs wait for the backward: host or device"),
    llvm::cl::init("host"), llvm::cl::cat(category));
llvm::cl::opt<std::string> devicePrecision(
    "device-precision",
    llvm::cl::desc("How the device stores weights and activations: bf16 (the default; "
                   "fp32 accumulation) or fp32 (twice the bytes, exact to fp32)"),
    llvm::cl::init("bf16"), llvm::cl::cat(category));
llvm::cl::opt<std::string> streamWeights(
    "stream-weights",
    llvm::cl::desc("Where streamed weights come from: auto (the cost model's choice), bf16 "
                   "(copies on the host, 14 bytes a parameter) or fp32 (the masters, cast on "
                   "the device: 12 bytes a parameter, twice the PCIe bytes)"),
    llvm::cl::init("auto"), llvm::cl::cat(category));
llvm::cl::opt<std::string> deviceMemory(
    "device-memory", llvm::cl::desc("Device memory the plan may use, e.g. 16GiB (default: the "
                                    "target's)"),
    llvm::cl::cat(category));

llvm::cl::opt<int64_t> recomputeInterval(
    "recompute-interval",
    llvm::cl::desc("Layers per checkpoint, K (default 0: the smallest K whose plan fits "
                   "the device memory)"),
    llvm::cl::init(0), llvm::cl::cat(category));

llvm::cl::opt<bool> schedule(
    "schedule",
    llvm::cl::desc("Schedule the step: copies, device buffers, streams (default on)"),
    llvm::cl::init(true), llvm::cl::cat(category));

llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("Static shape of a graph input with free dimensions, NAME:4x32 (repeatable)"),
    llvm::cl::value_desc("NAME:DxD..."), llvm::cl::cat(category));

OwningOpRef<ModuleOp> loadModel(MLIRContext &context, llvm::SourceMgr &sourceMgr) {
  if (llvm::StringRef(inputPath).ends_with(".mlir")) {
    std::string error;
    std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(inputPath, &error);
    if (!file) {
      llvm::errs() << "mtc: " << error << "\n";
      return nullptr;
    }
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    return parseSourceFile<ModuleOp>(sourceMgr, &context);
  }
  ImportOptions options;
  for (const std::string &spec : inputShapes) {
    if (llvm::Error error = parseInputShape(spec, options)) {
      llvm::errs() << "mtc: " << llvm::toString(std::move(error)) << "\n";
      return nullptr;
    }
  }
  return importOnnxModel(inputPath, context, options);
}

/// "16GiB", "80GB", "512MiB" or plain bytes.
std::optional<double> parseBytes(llvm::StringRef text) {
  static const std::pair<const char *, double> units[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0},
      {"TB", 1e12},             {"GB", 1e9},           {"MB", 1e6},        {"KB", 1e3},
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

/// The schedule options' values, checked before any work.
LogicalResult checkScheduleOptions() {
  if (checkpoints != "host" && checkpoints != "device") {
    llvm::errs() << "mtc: --checkpoints must be host or device\n";
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

/// What the cost model predicts of the step mt-fit-step built, on the target.
FailureOr<StepEstimate> estimate(ModuleOp module) {
  std::string error;
  FailureOr<DeviceProfile> profile = loadDeviceProfile(target, error);
  if (failed(profile)) {
    llvm::errs() << "mtc: " << error << "\n";
    return failure();
  }
  ScheduleOptions options;
  options.microBatches = microBatches;
  options.accumulation = module->getAttrOfType<StringAttr>("mt.accumulation").str();
  options.checkpointsOnDevice = checkpoints == "device";
  options.recomputeInterval = module->getAttrOfType<IntegerAttr>("mt.recompute_interval").getInt();
  auto masters = module->getAttrOfType<BoolAttr>(kStreamMasters);
  options.streamMasters = masters && masters.getValue();
  return estimateStep(module, *profile, options);
}

} // namespace

int compilerMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions(); // --mlir-timing: each pass's time
  llvm::cl::HideUnrelatedOptions(category);
  llvm::cl::ParseCommandLineOptions(argc, argv, "mt compiler: ONNX model -> mt IR\n");

  if (failed(checkScheduleOptions()))
    return 1;
  MLIRContext context;
  context.loadDialect<MTDialect, func::FuncDialect>();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = loadModel(context, sourceMgr);
  if (!module)
    return 1;

  // A summary describes the scheduled step, so it compiles that far unless told otherwise.
  Stage stage = emit.getNumOccurrences()                         ? emit.getValue()
                 : llvm::StringRef(outputPath).ends_with(".mtp") ? Stage::Plan
                 : summary != Summary::None                      ? Stage::Schedule
                                                                  : Stage::Graph;
  if (stage == Stage::Plan && summary == Summary::None && outputPath == "-") {
    llvm::errs() << "mtc: a plan is binary; name its file with -o model.mtp\n";
    return 1;
  }
  FailureOr<int64_t> budget = deviceBudget();
  if (failed(budget))
    return 1;
  // The whole compile is one pipeline, the policy (accumulation, recompute interval, the
  // device budget) in mt-fit-step's options: its text, which the plan and the summary
  // carry, is what mt-opt --pass-pipeline runs to make the same module from the import.
  PassManager pm(&context, ModuleOp::getOperationName());
  if (stage != Stage::Import)
    buildRaisePassPipeline(pm);
  if (stage == Stage::Segments)
    pm.addPass(createSegmentLayersPass());
  if (stage >= Stage::Train) {
    DevicePrecisionPassOptions precision;
    precision.floatBytes = devicePrecision == "fp32" ? 4 : 2;
    pm.addPass(createDevicePrecisionPass(precision));
    FitStepPassOptions fit;
    fit.microBatches = microBatches;
    fit.accumulation = accumulation;
    fit.segmentLayers = segmentLayers;
    fit.schedule = stage >= Stage::Schedule && schedule;
    fit.recomputeInterval = recomputeInterval;
    fit.checkpointsOnDevice = checkpoints == "device";
    fit.deviceMemory = *budget;
    fit.target = target;
    fit.weightStream = streamWeights;
    pm.addPass(createFitStepPass(fit));
  }
  std::string pipeline;
  llvm::raw_string_ostream pipelineText(pipeline);
  pm.printAsTextualPipeline(pipelineText);
  applyDefaultTimingPassManagerCLOptions(pm);
  if (failed(applyPassManagerCLOptions(pm)) || failed(pm.run(*module)))
    return 1;
  if (stage == Stage::Plan && summary == Summary::None) {
    std::string error = writePlanFiles(*module, outputPath, pipeline);
    if (!error.empty() && error != "failed")
      llvm::errs() << "mtc: " << error << "\n";
    return error.empty() ? 0 : 1;
  }
  std::optional<StepEstimate> step;
  if (stage >= Stage::Train) {
    FailureOr<StepEstimate> estimated = estimate(*module);
    if (failed(estimated))
      return 1;
    step = *estimated;
    if (stage >= Stage::Schedule && schedule)
      step->peakDeviceBytes = peakDeviceBytes(*module);
  }
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "mtc: " << error << "\n";
    return 1;
  }
  if (summary != Summary::None)
    printSummary(*module, step ? &*step : nullptr,
                 {inputPath, target, pipeline, microBatches, summary == Summary::Json},
                 output->os());
  else if (stage == Stage::Timeline)
    output->os() << timelineJson(*step) << "\n";
  else
    module->print(output->os());
  output->keep();
  return 0;
}

} // namespace mt
