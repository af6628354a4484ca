// The summary of a compiled module.
#include "passes/StepSummary.h"

#include "ir/MtOps.h"
#include "ir/ShapeRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <map>

using namespace mlir;

namespace mt {

namespace {

/// Parameters, op counts and signature of the model's functions.
struct ModelSummary {
  int64_t parameterTensors = 0, parameters = 0, parameterBytes = 0;
  std::map<std::string, int64_t> opCounts;
  llvm::SmallVector<std::string> inputs, outputs;
};

/// What a setting of the last `count` of `layers` layers says: `every` where it covers them
/// all, `some` (its {0} the count) where fewer, nothing where none.
std::string lastLayers(int64_t count, int64_t layers, llvm::StringRef every, const char *some) {
  if (count <= 0)
    return "";
  return count >= layers ? every.str() : llvm::formatv(some, count).str();
}

ModelSummary summarize(ModuleOp module) {
  ModelSummary s;
  auto typeString = [](Type type) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << type;
    return text;
  };
  module.walk([&](Operation *op) {
    if (auto parameter = llvm::dyn_cast<ParameterOp>(op)) {
      ++s.parameterTensors;
      RankedTensorType type = parameter.getTensorType();
      s.parameters += numElements(type.getShape());
      s.parameterBytes += numElements(type.getShape()) * type.getElementTypeBitWidth() / 8;
    } else if (auto function = llvm::dyn_cast<func::FuncOp>(op); function && function.isPublic()) {
      for (auto [i, type] : llvm::enumerate(function.getArgumentTypes())) {
        auto name = function.getArgAttrOfType<StringAttr>(i, "mt.name");
        s.inputs.push_back((name ? name.str() + ": " : "") + typeString(type));
      }
      for (Type type : function.getResultTypes())
        s.outputs.push_back(typeString(type));
    } else if (op->getDialect() && op->getDialect()->getNamespace() == "mt") {
      ++s.opCounts[op->getName().getStringRef().str()];
    }
  });
  return s;
}

} // namespace

void printSummary(ModuleOp module, const StepEstimate *step, const SummaryContext &context,
                  llvm::raw_ostream &os) {
  ModelSummary s = summarize(module);
  auto source = module->getAttrOfType<StringAttr>("mt.source");
  auto weightStream = module->getAttrOfType<StringAttr>("mt.weight_stream");
  auto placement = module->getAttrOfType<StringAttr>("mt.placement");
  auto savedChoice = module->getAttrOfType<StringAttr>("mt.saved_layers_choice");
  auto gradientRing = module->getAttrOfType<StringAttr>("mt.gradient_ring");
  auto deviceUpdates = module->getAttrOfType<StringAttr>("mt.device_updates");
  if (context.json) {
    llvm::json::Object ops;
    for (auto &[name, count] : s.opCounts)
      ops[name] = count;
    llvm::json::Object object{
        {"source", source ? source.str() : context.input},
        {"params", s.parameters},
        {"parameter_tensors", s.parameterTensors},
        {"parameter_bytes", s.parameterBytes},
        {"inputs", llvm::json::Array(s.inputs)},
        {"outputs", llvm::json::Array(s.outputs)},
        {"ops", std::move(ops)},
    };
    if (step) {
      object["layers"] = step->layers;
      object["templates"] = step->templates;
      object["peak_device_bytes"] = step->peakDeviceBytes;
      object["host_bytes"] = step->hostBytes;
      object["host_bytes_per_param"] = step->hostBytesPerParam;
      object["stream_masters"] = step->streamMasters;
      if (weightStream)
        object["weight_stream"] = weightStream.str();
      if (placement)
        object["placement"] = placement.str();
      if (savedChoice)
        object["saved_layers_choice"] = savedChoice.str();
      object["h2d_bytes_per_step"] = step->h2dBytesPerStep;
      object["d2h_bytes_per_step"] = step->d2hBytesPerStep;
      object["flops_per_step"] = step->flopsPerStep;
      object["executed_flops_per_step"] = step->executedFlopsPerStep;
      object["predicted_step_seconds"] = step->predictedStepSeconds;
      llvm::json::Object busy;
      for (const auto &[stream, seconds] : step->busySeconds)
        busy[stream] = seconds;
      object["busy_seconds"] = std::move(busy);
      object["recompute_interval"] = step->recomputeInterval;
      object["gradient_ring_layers"] = step->gradientRingLayers;
      object["pull_gradients"] = step->pullGradients;
      object["gradient_ring_device_bytes"] = step->gradientRingDeviceBytes;
      if (gradientRing)
        object["gradient_ring"] = gradientRing.str();
      object["resident_layers"] = step->residentLayers;
      object["persistent_layers"] = step->persistentLayers;
      object["device_update_layers"] = step->deviceUpdateLayers;
      if (deviceUpdates)
        object["device_updates"] = deviceUpdates.str();
      object["saved_layers"] = step->savedLayers;
      object["saved_bytes"] = step->savedBytes;
      object["accumulation"] = step->accumulation;
      object["micro_batches"] = context.microBatches;
      object["checkpoints"] = step->checkpointsOnDevice ? "device" : "host";
      object["target"] = context.target;
      object["pipeline"] = context.pipeline;
    }
    os << llvm::json::Value(std::move(object)) << "\n";
    return;
  }
  os << llvm::formatv("model       {0}\n", source ? source.str() : context.input);
  os << llvm::formatv("inputs      {0}\n", llvm::join(s.inputs, ", "));
  // A training step returns one gradient per parameter: show the loss and count the rest.
  llvm::ArrayRef<std::string> outputs(s.outputs);
  os << llvm::formatv("outputs     {0}{1}\n", llvm::join(outputs.take_front(3), ", "),
                      outputs.size() > 3 ? llvm::formatv(" and {0} more", outputs.size() - 3).str()
                                         : std::string());
  os << llvm::formatv("parameters  {0} values in {1} tensors ({2:f1} MiB)\n", s.parameters,
                      s.parameterTensors, s.parameterBytes / 1048576.0);
  os << "ops        ";
  for (auto &[name, count] : s.opCounts)
    os << " " << name << " x" << count;
  os << "\n";
  if (!step)
    return;
  os << llvm::formatv(
      "layers      {0} in {1} template(s), recompute every {2}{7}, {3} "
      "accumulation, checkpoints on the {4}{5}{6}\n",
      step->layers, step->templates, step->recomputeInterval, step->accumulation,
      step->checkpointsOnDevice ? "device" : "host",
      step->residentLayers == 1  ? ", the last layer's weights resident from "
                                   "forward to backward"
      : step->residentLayers > 1 ? llvm::formatv(", the last {0} layers' weights resident from "
                                                 "forward to backward",
                                                 step->residentLayers)
                                       .str()
                                 : std::string(),
      lastLayers(step->persistentLayers, step->layers,
                 ", every weight persistent on the device across steps",
                 ", the last {0} layers' weights persistent on the device across steps"),
      lastLayers(step->savedLayers, step->layers,
                 " (but every layer keeps its activations for its backward)",
                 " (but the last {0} layers keep their activations for their backward)"));
  os << "device      peak " << formatBytes(step->peakDeviceBytes)
     << " (the plan's arena, kernel scratch, cuBLASLt workspace, inputs and constants; the "
        "cost model's largest phase: "
     << step->peakBreakdown << ")\n";
  if (step->pullGradients)
    os << "            beside it the gradients' ring of " << step->gradientRingLayers << " layers, "
       << formatBytes(step->gradientRingDeviceBytes) << "\n";
  os << llvm::formatv(
      "host        {0}, {1:f1} bytes per parameter (fp32 masters and moments{2}, fp32 "
      "gradients{3}, checkpoints)\n",
      formatBytes(step->hostBytes), step->hostBytesPerParam,
      step->streamMasters ? "" : ", masters split into bf16 copies and low halves",
      step->pullGradients ? std::string(" pulled through four pinned slots")
      : step->gradientRingLayers > 0
          ? llvm::formatv(" in a ring of {0} layers'", step->gradientRingLayers).str()
          : std::string(" and their sum"));
  if (gradientRing)
    os << "gradients   " << gradientRing.getValue() << "\n";
  if (deviceUpdates)
    os << "updates     " << deviceUpdates.getValue() << "\n";
  if (weightStream)
    os << "weights     " << weightStream.getValue() << "\n";
  if (placement)
    os << "placement   " << placement.getValue() << "\n";
  if (savedChoice)
    os << "saved       " << savedChoice.getValue() << "\n";
  os << llvm::formatv("per step    {0} h2d, {1} d2h, {2:e} model FLOP, predicted {3:e} s on {4}\n",
                      formatBytes(step->h2dBytesPerStep), formatBytes(step->d2hBytesPerStep),
                      step->flopsPerStep, step->predictedStepSeconds, context.target);
  os << "pipeline    " << context.pipeline << "\n";
}

} // namespace mt
