// The mtc driver: input (ONNX binary or text, or graph-level MLIR), the raising pipeline,
// and the outputs: IR at a chosen stage, or a summary for people or for scripts.
#include "tools/mtc/Compiler.h"

#include "frontend/InlineWeights.h"
#include "frontend/OnnxImporter.h"
#include "ir/MtOps.h"
#include "ir/ShapeRules.h"
#include "passes/Passes.h"
#include "plan/PlanEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <map>

using namespace mlir;

namespace mt {

namespace {

llvm::cl::OptionCategory category("mtc options");

llvm::cl::opt<std::string> inputPath(llvm::cl::Positional, llvm::cl::desc("<model.onnx|.onnxtxt|.mlir>"),
                                     llvm::cl::init("-"), llvm::cl::cat(category));
llvm::cl::opt<std::string> outputPath("o", llvm::cl::desc("Output file ('-' for stdout)"),
                                      llvm::cl::value_desc("file"), llvm::cl::init("-"),
                                      llvm::cl::cat(category));

enum class Stage { Import, Graph, Segments, Train, Plan };
llvm::cl::opt<Stage> emit(
    "emit",
    llvm::cl::desc("The stage to write (default: plan when -o names a .mtp file, else graph)"),
    llvm::cl::values(clEnumValN(Stage::Import, "import", "the graph as imported, before raising"),
                     clEnumValN(Stage::Graph, "graph", "the graph after raising to fused ops"),
                     clEnumValN(Stage::Segments, "segments",
                                "the forward cut into layers that call shared templates"),
                     clEnumValN(Stage::Train, "train", "the training step: loss and backward"),
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

/// Parameters, op counts and signature of the model's functions.
struct ModelSummary {
  int64_t parameterTensors = 0, parameters = 0, parameterBytes = 0;
  std::map<std::string, int64_t> opCounts;
  llvm::SmallVector<std::string> inputs, outputs;
};

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
    } else if (auto function = llvm::dyn_cast<func::FuncOp>(op)) {
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

void printSummary(ModuleOp module, llvm::raw_ostream &os) {
  ModelSummary s = summarize(module);
  auto source = module->getAttrOfType<StringAttr>("mt.source");
  if (summary == Summary::Json) {
    llvm::json::Object ops;
    for (auto &[name, count] : s.opCounts)
      ops[name] = count;
    llvm::json::Object object{
        {"source", source ? source.str() : inputPath.getValue()},
        {"params", s.parameters},
        {"parameter_tensors", s.parameterTensors},
        {"parameter_bytes", s.parameterBytes},
        {"inputs", llvm::json::Array(s.inputs)},
        {"outputs", llvm::json::Array(s.outputs)},
        {"ops", std::move(ops)},
    };
    os << llvm::json::Value(std::move(object)) << "\n";
    return;
  }
  os << llvm::formatv("model       {0}\n", source ? source.str() : inputPath.getValue());
  os << llvm::formatv("inputs      {0}\n", llvm::join(s.inputs, ", "));
  os << llvm::formatv("outputs     {0}\n", llvm::join(s.outputs, ", "));
  os << llvm::formatv("parameters  {0} values in {1} tensors ({2:f1} MiB)\n", s.parameters,
                      s.parameterTensors, s.parameterBytes / 1048576.0);
  os << "ops        ";
  for (auto &[name, count] : s.opCounts)
    os << " " << name << " x" << count;
  os << "\n";
}

/// Writes the plan to -o, and the bytes of inline parameters to a weights file beside it.
bool writePlan(ModuleOp module) {
  if (outputPath == "-") {
    llvm::errs() << "mtc: a plan is binary; name its file with -o model.mtp\n";
    return false;
  }
  if (failed(writeInlineWeights(module, outputPath + ".weights")))
    return false;
  plan::Plan plan;
  if (failed(emitPlan(module, llvm::sys::path::parent_path(outputPath), plan)))
    return false;
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "mtc: " << error << "\n";
    return false;
  }
  output->os() << plan.SerializeAsString();
  output->keep();
  return true;
}

} // namespace

int compilerMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  llvm::cl::HideUnrelatedOptions(category);
  llvm::cl::ParseCommandLineOptions(argc, argv, "mt compiler: ONNX model -> mt IR\n");

  MLIRContext context;
  context.loadDialect<MTDialect, func::FuncDialect>();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = loadModel(context, sourceMgr);
  if (!module)
    return 1;

  Stage stage = emit.getNumOccurrences()                         ? emit.getValue()
                 : llvm::StringRef(outputPath).ends_with(".mtp") ? Stage::Plan
                                                                  : Stage::Graph;
  if (stage != Stage::Import) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return 1;
    buildRaisePassPipeline(pm);
    if (stage == Stage::Segments)
      pm.addPass(createSegmentLayersPass());
    if (stage >= Stage::Train) {
      TrainPipelineOptions train;
      train.segmentLayers = segmentLayers.getValue();
      buildTrainPassPipeline(pm, train);
    }
    if (failed(pm.run(*module)))
      return 1;
  }
  if (stage == Stage::Plan && summary == Summary::None)
    return writePlan(*module) ? 0 : 1;

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "mtc: " << error << "\n";
    return 1;
  }
  if (summary != Summary::None)
    printSummary(*module, output->os());
  else
    module->print(output->os());
  output->keep();
  return 0;
}

} // namespace mt
