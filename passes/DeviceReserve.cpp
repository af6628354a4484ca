// The device memory a step needs beside its arena. The scratch formulas are the kernels' own
// (plan/KernelScratch.h): a kernel that asks for more than its op's bound fails there.
#include "passes/DeviceReserve.h"

#include "ir/MtOps.h"
#include "ir/ShapeRules.h"
#include "passes/BufferLiveness.h"
#include "plan/DeviceLayout.h"
#include "plan/KernelScratch.h"

#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>

using namespace mlir;

namespace mt {

namespace {

/// Requests of one command rounded up to the alignment.
constexpr int64_t kRoundingSlack = 4 * kDeviceAlignment;


int64_t elements(Value value) {
  return numElements(llvm::cast<RankedTensorType>(value.getType()).getShape());
}

int64_t lastDim(Value value) {
  auto shape = llvm::cast<RankedTensorType>(value.getType()).getShape();
  return shape.empty() ? 1 : shape.back();
}

/// Whether `value` is an fp32 tensor on the device: four bytes an element, or a constant
/// (the runtime keeps every real constant in fp32).
bool fp32OnDevice(Value value) {
  if (!llvm::isa<FloatType>(llvm::cast<RankedTensorType>(value.getType()).getElementType()))
    return false;
  return value.getDefiningOp<ConstantOp>() || deviceBytes(value) == 4 * elements(value);
}

/// The logits one chunk of a fused loss (operands input, head, targets) makes at once.
int64_t chunkLogits(Operation *op) {
  int64_t rows = elements(op->getOperand(2));
  int64_t vocabulary =
      elements(op->getOperand(1)) / std::max<int64_t>(lastDim(op->getOperand(0)), 1);
  return std::min(rows, op->getAttrOfType<IntegerAttr>("chunk").getInt()) * vocabulary;
}

/// Bytes of `value`'s elements as device constants: reals in fp32, integers at their width.
int64_t constantBytes(Value value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  int64_t width = constantElementBytes(llvm::isa<FloatType>(type.getElementType()),
                                       type.getElementTypeBitWidth());
  return alignToDevice(numElements(type.getShape()) * width);
}

} // namespace

int64_t kernelScratchBytes(Operation *op) {
  llvm::StringRef name = op->getName().getStringRef();
  int64_t floats = 0;
  if (name == "mt.reduce_sum" || name == "mt.reduce_mean" || name == "mt.reduce_max") {
    floats = scratch::reductionPartials(elements(op->getOperand(0)), elements(op->getResult(0)));
  } else if (name == "mt.reduce_max_grad") {
    floats = scratch::reduceMaxGradFloats(elements(op->getOperand(0)), elements(op->getOperand(1)));
  } else if (name == "mt.rms_norm_grad" || name == "mt.layer_norm_grad") {
    Value x = op->getOperand(0);
    int64_t d = std::max<int64_t>(lastDim(x), 1);
    floats = scratch::normGradFloats(elements(x) / d, d, name == "mt.layer_norm_grad");
  } else if (name == "mt.cross_entropy") {
    floats = scratch::crossEntropyFloats(elements(op->getOperand(1)));
  } else if (name == "mt.cross_entropy_grad") {
    floats = 1;
  } else if (name == "mt.linear_cross_entropy" || name == "mt.linear_cross_entropy_grad") {
    // The products run in fp32 when both operands are; otherwise an fp32 one is copied to
    // bf16 first.
    bool input = fp32OnDevice(op->getOperand(0)), head = fp32OnDevice(op->getOperand(1));
    int64_t bytes =
        name == "mt.linear_cross_entropy_grad"
            ? scratch::LinearLossGradScratch(chunkLogits(op), !(input && head)).bytes
            : 4 * scratch::linearLossFloats(chunkLogits(op), elements(op->getOperand(2)));
    if (input != head)
      bytes += scratch::bf16CopyBytes(elements(op->getOperand(input ? 0 : 1)));
    return bytes + kRoundingSlack;
  } else if (name == "mt.attention") {
    Value query = op->getOperand(0);
    floats = scratch::attentionFloats(elements(query) / std::max<int64_t>(lastDim(query), 1),
                                      op->getNumResults() > 1);
  } else if (name == "mt.attention_grad") {
    Value query = op->getOperand(0);
    int64_t depth = std::max<int64_t>(lastDim(query), 1);
    floats = scratch::attentionGradFloats(elements(query) / depth, depth);
  } else if (name == "mt.scatter_add") {
    if (!fp32OnDevice(op->getResult(0)))
      floats = scratch::scatterAddFloats(elements(op->getResult(0)));
  } else if (name == "mt.matmul" || name == "mt.linear") {
    // A product of two fp32 operands runs in fp32; otherwise fp32 operands are copied to bf16.
    bool lhs = fp32OnDevice(op->getOperand(0)), rhs = fp32OnDevice(op->getOperand(1));
    if (lhs != rhs)
      return scratch::bf16CopyBytes(elements(op->getOperand(lhs ? 0 : 1))) + kRoundingSlack;
  }
  return floats ? floats * 4 + kRoundingSlack : 0;
}

DeviceReserve deviceReserve(ModuleOp module) {
  DeviceReserve reserve;
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return reserve;
  for (BlockArgument input : step.getArguments())
    reserve.inputs += alignToDevice(elements(input) * kTokenBytes);
  llvm::SmallPtrSet<Operation *, 8> functions{step};
  step.walk([&](func::CallOp call) {
    if (auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee()))
      functions.insert(callee);
  });
  int64_t largestProduct = 0;
  for (Operation *function : functions)
    function->walk([&](Operation *op) {
      if (llvm::isa<ConstantOp>(op))
        reserve.constants += constantBytes(op->getResult(0));
      else
        reserve.scratch = std::max(reserve.scratch, kernelScratchBytes(op));
      if (llvm::isa<MatmulOp, LinearOp>(op))
        largestProduct = std::max(largestProduct, elements(op->getResult(0)) * 4);
      if (llvm::isa<LinearCrossEntropyOp, LinearCrossEntropyGradOp>(op))
        largestProduct = std::max(largestProduct, chunkLogits(op) * 4);
    });
  reserve.blasWorkspace = std::clamp<int64_t>(largestProduct, 1 << 20, 32 << 20);
  if (auto masters = module->getAttrOfType<BoolAttr>(kStreamMasters); masters && masters.getValue())
    step.walk([&](PrefetchOp prefetch) {
      for (auto [operand, slot] : llvm::zip(prefetch.getHostValues(), prefetch.getDeviceValues()))
        if (operand.getDefiningOp<ParamOp>() && deviceBytes(slot) == 2 * elements(slot))
          reserve.staging = std::max(
              reserve.staging, alignToDevice(std::min(elements(slot) * 4, kMostStagingBytes)));
    });
  return reserve;
}

int64_t peakDeviceBytes(ModuleOp module) {
  return module.lookupSymbol<func::FuncOp>("train_step")
             ->getAttrOfType<IntegerAttr>("mt.arena_bytes")
             .getInt() +
         deviceReserve(module).total();
}

} // namespace mt
