// The mtc driver: input (ONNX binary or text, or graph-level MLIR), its flags as one pass
// pipeline, and the outputs: IR at a chosen stage, a plan, or a summary.
#include "tools/mtc/Compiler.h"

#include "tools/mtc/Options.h"

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
using namespace mt::mtc;

namespace mt {

namespace {

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
  auto onDevice = module->getAttrOfType<BoolAttr>("mt.checkpoints_on_device");
  options.checkpointsOnDevice = onDevice ? onDevice.getValue() : checkpoints == "device";
  options.recomputeInterval = module->getAttrOfType<IntegerAttr>("mt.recompute_interval").getInt();
  if (auto ring = module->getAttrOfType<IntegerAttr>("mt.gradient_ring_layers"))
    options.gradientRingLayers = ring.getInt();
  auto pull = module->getAttrOfType<BoolAttr>("mt.pull_gradients");
  options.pullGradients = pull && pull.getValue();
  if (auto room = module->getAttrOfType<IntegerAttr>("mt.device_room_bytes"))
    options.deviceRoomBytes = room.getInt();
  if (auto resident = module->getAttrOfType<IntegerAttr>("mt.resident_layers"))
    options.residentLayers = resident.getInt();
  if (auto persistent = module->getAttrOfType<IntegerAttr>("mt.persistent_layers"))
    options.persistentLayers = persistent.getInt();
  if (auto updates = module->getAttrOfType<IntegerAttr>("mt.device_update_layers"))
    options.deviceUpdateLayers = updates.getInt();
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
  if (stage != Stage::Import) {
    RaisePipelineOptions raise;
    raise.foldAttentionLayout = foldAttentionLayout.getValue();
    buildRaisePassPipeline(pm, raise);
  }
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
    fit.residentLayers = residentLayers;
    fit.persistentLayers = persistentLayers;
    // Options checked the count; auto leaves it to the pass.
    fit.fitSavedLayers = savedLayers == "auto";
    if (!fit.fitSavedLayers)
      llvm::StringRef(savedLayers).getAsInteger(10, fit.savedLayers);
    fit.gradientRing = gradientRing;
    fit.deviceUpdates = deviceUpdates;
    // Where the step waits on the host's memory, the compiler may place checkpoints and
    // weights on the device, unless either was asked for.
    fit.lightenHost = checkpoints == "auto" && residentLayers.getNumOccurrences() == 0 &&
                      persistentLayers.getNumOccurrences() == 0;
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
