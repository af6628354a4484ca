// Plan emission: values numbered in program order, one command per op, parameters with the
// files their initial bytes are in, and torch.optim.AdamW's defaults.
#include "plan/PlanEmitter.h"

#include "ir/MtOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/DeviceReserve.h"
#include "passes/StepCostModel.h"
#include "plan/PlanFormat.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;

namespace mt {

namespace {

plan::DType dtypeOf(Type type) {
  if (type.isF32())
    return plan::F32;
  if (type.isF64())
    return plan::F64;
  if (type.isF16())
    return plan::F16;
  if (type.isBF16())
    return plan::BF16;
  if (type.isInteger(64))
    return plan::I64;
  if (type.isInteger(32))
    return plan::I32;
  if (type.isInteger(8))
    return plan::I8;
  if (type.isInteger(1))
    return plan::BOOL;
  return plan::DTYPE_UNSPECIFIED;
}

void setType(Type type, plan::TensorType &out) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  for (int64_t d : tensor.getShape())
    out.add_shape(d);
  out.set_dtype(dtypeOf(tensor.getElementType()));
}

/// Little-endian row-major bytes of a constant; booleans one byte each.
std::string constantBytes(DenseElementsAttr attr) {
  std::string bytes;
  Type element = attr.getElementType();
  auto append = [&](const auto &value) {
    bytes.append(reinterpret_cast<const char *>(&value), sizeof(value));
  };
  if (auto floatType = llvm::dyn_cast<FloatType>(element)) {
    for (const APFloat &value : attr.getValues<APFloat>()) {
      APInt bits = value.bitcastToAPInt();
      for (unsigned byte = 0; byte < floatType.getWidth() / 8; ++byte)
        bytes.push_back(static_cast<char>(bits.extractBitsAsZExtValue(8, byte * 8)));
    }
    return bytes;
  }
  unsigned width = element.getIntOrFloatBitWidth();
  for (const APInt &value : attr.getValues<APInt>()) {
    if (width == 1)
      bytes.push_back(static_cast<char>(value.getBoolValue()));
    else
      for (unsigned byte = 0; byte < width / 8; ++byte)
        bytes.push_back(static_cast<char>(value.extractBitsAsZExtValue(8, byte * 8)));
  }
  return bytes;
}

LogicalResult setAttribute(Operation *op, NamedAttribute named, plan::Command &command) {
  plan::Attribute out;
  Attribute value = named.getValue();
  if (auto integer = llvm::dyn_cast<IntegerAttr>(value))
    out.set_i(integer.getInt());
  else if (auto real = llvm::dyn_cast<FloatAttr>(value))
    out.set_f(real.getValueAsDouble());
  else if (auto text = llvm::dyn_cast<StringAttr>(value))
    out.set_s(text.str());
  else if (auto ints = llvm::dyn_cast<DenseI64ArrayAttr>(value))
    for (int64_t i : ints.asArrayRef())
      out.mutable_ints()->add_values(i);
  else if (llvm::isa<UnitAttr>(value))
    out.set_flag(true);
  else
    return op->emitOpError("attribute '") << named.getName().strref()
                                          << "' has no form in the plan";
  (*command.mutable_attributes())[named.getName().str()] = out;
  return success();
}

/// Where the plan says a parameter file is: relative to the plan's folder when inside it.
std::string planPath(llvm::StringRef file, llvm::StringRef modelDir, llvm::StringRef planDir) {
  llvm::SmallString<256> path(file);
  if (llvm::sys::path::is_relative(path)) {
    path = modelDir;
    llvm::sys::path::append(path, file);
  }
  llvm::sys::fs::make_absolute(path);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  llvm::SmallString<256> dir(planDir);
  llvm::sys::fs::make_absolute(dir);
  llvm::sys::path::remove_dots(dir, true);
  if (llvm::sys::path::parent_path(path) == dir)
    return llvm::sys::path::filename(path).str();
  return path.str().str();
}

/// Numbers one function's values and writes its ops as commands of `program`.
class ProgramEmitter {
public:
  ProgramEmitter(const llvm::StringMap<int> &parameterIndex,
                 const llvm::StringMap<int> &templateIndex, plan::Plan &plan)
      : parameterIndex(parameterIndex), templateIndex(templateIndex), plan(plan) {}

  /// Emits `function`; `returned` receives the value ids of what it returns.
  LogicalResult emit(func::FuncOp function, plan::Program &program,
                     llvm::SmallVectorImpl<int> &returned) {
    DenseMap<Value, int> ids;
    auto define = [&](Value value) {
      ids[value] = program.values_size();
      plan::Value *out = program.add_values();
      setType(value.getType(), *out->mutable_type());
      return out;
    };
    for (BlockArgument argument : function.getArguments()) {
      define(argument)->set_input(argument.getArgNumber());
      auto name = function.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "mt.name");
      plan::Input *input = program.add_inputs();
      input->set_name(name ? name.str() : "arg" + std::to_string(argument.getArgNumber()));
      input->set_value(ids[argument]);
      input->set_token_span(function.getArgAttr(argument.getArgNumber(), "mt.token_span") !=
                            nullptr);
    }
    for (Operation &op : function.getBody().front()) {
      if (auto read = llvm::dyn_cast<ParamOp>(op)) {
        define(read.getResult())->set_parameter(parameterIndex.lookup(read.getName()));
        continue;
      }
      if (auto constant = llvm::dyn_cast<ConstantOp>(op)) {
        auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!dense)
          return constant.emitOpError("holds a constant the plan cannot store");
        define(constant.getResult())->set_constant(constantBytes(dense));
        continue;
      }
      if (auto await = llvm::dyn_cast<AwaitOp>(op)) {
        // No command: the stream of each reader waits for the copy's event, and the values
        // are the copy's.
        for (auto [value, awaited] : llvm::zip(await.getValues(), await.getResults()))
          ids[awaited] = ids.lookup(value);
        continue;
      }
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        for (Value value : ret.getOperands())
          returned.push_back(ids.lookup(value));
        continue;
      }
      plan::Command &command = *program.add_commands();
      if (auto name = llvm::dyn_cast<NameLoc>(op.getLoc()))
        command.set_location(name.getName().str());
      for (Value operand : op.getOperands())
        command.add_operands(ids.lookup(operand));
      // Tokens are not values: streams and events carry what they order.
      for (Value result : op.getResults()) {
        if (!llvm::isa<RankedTensorType>(result.getType()))
          continue;
        define(result);
        command.add_results(ids.lookup(result));
      }
      if (auto stream = scheduleAttrs(&op).getStreamAttrHelper().getAttr(&op)) {
        command.set_stream(stream.str());
        command.set_record(-1);
        if (auto record = scheduleAttrs(&op).getRecordAttrHelper().getAttr(&op))
          command.set_record(record.getInt());
        if (auto waits = scheduleAttrs(&op).getWaitAttrHelper().getAttr(&op))
          for (int64_t id : waits.asArrayRef())
            command.add_waits(id);
      }
      // Device placement: the step's arena, or a call's workspace inside a template.
      auto offsets = scheduleAttrs(&op).getOffsetsAttrHelper().getAttr(&op);
      auto sizes = scheduleAttrs(&op).getSizesAttrHelper().getAttr(&op);
      if (offsets && sizes)
        for (auto [result, offset, size] :
             llvm::zip(op.getResults(), offsets.asArrayRef(), sizes.asArrayRef()))
          if (llvm::isa<RankedTensorType>(result.getType())) {
            command.add_offsets(offset);
            command.add_result_bytes(size);
          }
      if (auto workspace = scheduleAttrs(&op).getWorkspaceAttrHelper().getAttr(&op)) {
        command.set_workspace_offset(workspace[0]);
        command.set_workspace_bytes(workspace[1]);
      }
      if (auto call = llvm::dyn_cast<func::CallOp>(op)) {
        command.set_op("mt.call");
        plan::Attribute callee;
        callee.set_i(templateIndex.lookup(call.getCallee()));
        (*command.mutable_attributes())["template"] = callee;
        continue;
      }
      command.set_op(op.getName().getStringRef().str());
      if (!llvm::isa<PrefetchOp, OffloadOp>(op)) {
        KernelWork work = kernelWork(&op);
        command.set_flops(work.flops);
        command.set_bytes(work.bytes);
      }
      for (NamedAttribute attribute : op.getAttrs())
        if (!attribute.getName().strref().starts_with("mt.") &&
            failed(setAttribute(&op, attribute, command)))
          return failure();
      if (auto loss = llvm::dyn_cast<CrossEntropyOp>(op))
        plan.set_vocabulary(loss.getLogits().getType().getShape().back());
      if (auto loss = llvm::dyn_cast<LinearCrossEntropyOp>(op))
        plan.set_vocabulary(
            loss.getWeight().getType().getShape()[loss.getTransposeWeight() ? 0 : 1]);
    }
    return success();
  }

private:
  const llvm::StringMap<int> &parameterIndex;
  const llvm::StringMap<int> &templateIndex;
  plan::Plan &plan;
};

} // namespace

LogicalResult emitPlan(ModuleOp module, llvm::StringRef planDir, llvm::StringRef pipeline,
                       plan::Plan &plan) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step || step.getBlocks().size() != 1)
    return module.emitError("no single-block @train_step to emit; run mt-autodiff first");
  auto source = module->getAttrOfType<StringAttr>("mt.source");
  plan.set_format_version(kPlanFormatVersion);
  plan.set_model(source ? source.str() : "");
  llvm::StringRef modelDir = source ? llvm::sys::path::parent_path(source.getValue()) : "";

  llvm::StringMap<int> parameterIndex;
  for (ParameterOp parameter : module.getOps<ParameterOp>()) {
    parameterIndex[parameter.getSymName()] = plan.parameters_size();
    plan::Parameter *out = plan.add_parameters();
    out->set_name(parameter.getSymName().str());
    out->set_source_name(parameter.getSourceName().value_or(parameter.getSymName()).str());
    out->set_source_transposed(parameter.getSourceTransposed());
    if (FloatAttr offset = parameter.getSourceOffsetAttr())
      out->set_source_offset(offset.getValueAsDouble());
    if (std::optional<ArrayAttr> tied = parameter.getTiedNames())
      for (auto name : tied->getAsValueRange<StringAttr>())
        out->add_tied_names(name.str());
    if (std::optional<ArrayAttr> copies = parameter.getTransposedCopies())
      for (auto name : copies->getAsValueRange<StringAttr>())
        out->add_transposed_copies(name.str());
    out->set_layer(parameter.getLayer().value_or(-1));
    setType(parameter.getTensorType(), *out->mutable_type());
    if (std::optional<StringRef> file = parameter.getExternalFile()) {
      out->set_file(planPath(*file, modelDir, planDir));
      out->set_offset(*parameter.getOffset());
      out->set_length(*parameter.getLength());
    }
  }

  // Templates are the functions the step calls, numbered in order of first call.
  llvm::StringMap<int> templateIndex;
  llvm::SmallVector<func::FuncOp> templates;
  step.walk([&](func::CallOp call) {
    if (templateIndex.count(call.getCallee()))
      return;
    templateIndex[call.getCallee()] = templates.size();
    templates.push_back(module.lookupSymbol<func::FuncOp>(call.getCallee()));
  });
  ProgramEmitter emitter(parameterIndex, templateIndex, plan);
  for (func::FuncOp function : templates) {
    if (!function || function.getBlocks().size() != 1)
      return step.emitOpError("calls a function that is not a single-block template");
    plan::Template &out = *plan.add_templates();
    out.set_name(function.getSymName().str());
    llvm::SmallVector<int> results;
    if (failed(emitter.emit(function, *out.mutable_body(), results)))
      return failure();
    out.mutable_results()->Add(results.begin(), results.end());
    if (auto summed = function->getAttrOfType<DenseI64ArrayAttr>("mt.accumulators"))
      for (int64_t r : summed.asArrayRef())
        out.add_accumulators(static_cast<int>(r));
  }

  plan::Program &program = *plan.mutable_step();
  llvm::SmallVector<int> returned;
  if (failed(emitter.emit(step, program, returned)))
    return failure();
  if (auto arena = step->getAttrOfType<IntegerAttr>("mt.arena_bytes"))
    plan.set_arena_bytes(arena.getInt());
  if (auto events = scheduleAttrs(step).getEventsAttrHelper().getAttr(step))
    plan.set_events(events.getInt());
  program.set_loss(returned.front());
  for (int gradient : llvm::ArrayRef<int>(returned).drop_front())
    program.add_gradients(gradient);
  if (program.gradients_size() != plan.parameters_size())
    return step.emitOpError("returns ") << program.gradients_size() << " gradients for "
                                        << plan.parameters_size() << " parameters";

  // What mt-fit-step chose and predicted; the device memory beside the arena.
  auto integer = [&](llvm::StringRef name) -> int64_t {
    auto attr = module->getAttrOfType<IntegerAttr>(name);
    return attr ? attr.getInt() : 0;
  };
  auto real = [&](llvm::StringRef name) -> double {
    auto attr = module->getAttrOfType<FloatAttr>(name);
    return attr ? attr.getValueAsDouble() : 0;
  };
  auto accumulation = module->getAttrOfType<StringAttr>("mt.accumulation");
  plan.set_micro_batches(integer("mt.micro_batches"));
  plan.set_accumulation(accumulation ? accumulation.str() : "");
  plan.set_recompute_interval(integer("mt.recompute_interval"));
  plan.set_gradient_ring_layers(integer("mt.gradient_ring_layers"));
  plan.set_device_memory_budget(real("mt.device_memory_budget"));
  plan.set_model_flops(real("mt.model_flops"));
  plan.set_predicted_step_seconds(real("mt.predicted_step_seconds"));
  DeviceReserve reserve = deviceReserve(module);
  plan.set_scratch_bytes(reserve.scratch);
  plan.set_blas_workspace_bytes(reserve.blasWorkspace);
  plan.set_input_bytes(reserve.inputs);
  plan.set_constant_bytes(reserve.constants);
  auto masters = module->getAttrOfType<BoolAttr>(kStreamMasters);
  plan.set_stream_masters(masters && masters.getValue());
  plan.set_staging_bytes(reserve.staging);
  auto pull = module->getAttrOfType<BoolAttr>("mt.pull_gradients");
  plan.set_pull_gradients(pull && pull.getValue());
  plan.set_device_update_layers(integer("mt.device_update_layers"));
  plan.set_pipeline(pipeline.str());

  plan::AdamW &adamw = *plan.mutable_optimizer();
  adamw.set_lr(1e-3);
  adamw.set_beta1(0.9);
  adamw.set_beta2(0.999);
  adamw.set_eps(1e-8);
  adamw.set_weight_decay(0.01);
  adamw.set_schedule("constant");
  return success();
}

} // namespace mt
