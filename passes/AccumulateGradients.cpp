// mt-accumulate-gradients: a sum of gradients is made by the op that computes its last part,
// into the first part's buffer, instead of by an add of two buffers.
//
//   %a:3 = call @layer_0_bwd(%x0, ..., %g0)        %a:3 = call @layer_0_bwd(%x0, ..., %g0)
//   %b:3 = call @layer_0_bwd(%x1, ..., %g1)   ->   %b:3 = call @layer_0_bwd.accumulate.1(
//   %s = mt.add %a#1, %b#1                                  %x1, ..., %g1, %a#1)
// and in any function
//   %p = mt.matmul %dy, %x transpose_lhs   ->   %s = mt.matmul %dy, %x, %acc transpose_lhs
//   %s = mt.add %acc, %p
// and in a backward (the parts of an input's gradient, the recomputed residual)
//   %p = mt.linear %dy, %w                 ->   %s = mt.matmul %dy, %w, %acc
//   %s = mt.add %acc, %p
#include "passes/Passes.h"

#include "ir/MtOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include <map>
#include <string>

#define DEBUG_TYPE "mt-accumulate-gradients"

namespace mt {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTSPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// The other operand of `sum`, an add of `part` and a value of the sum's own type defined
/// before `before` (so that it can be passed to it), or null.
Value accumulator(AddOp sum, Value part, Operation *before) {
  Value other = sum.getLhs() == part ? sum.getRhs() : sum.getLhs();
  if (other == part || other.getType() != sum.getType() || part.getType() != sum.getType())
    return {};
  Operation *producer = other.getDefiningOp();
  if (producer ? producer->getBlock() != before->getBlock() || !producer->isBeforeInBlock(before)
               : other.getParentBlock() != before->getBlock())
    return {};
  return other;
}

/// The add that is `value`'s only use, or null.
AddOp onlyAdd(Value value) {
  if (!value.hasOneUse())
    return {};
  return llvm::dyn_cast<AddOp>(*value.getUsers().begin());
}

struct AccumulateGradientsPass
    : mt::impl::AccumulateGradientsPassBase<AccumulateGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (auto step = module.lookupSymbol<func::FuncOp>("train_step"))
      accumulateIntoCalls(module, step);
    module.walk([&](func::FuncOp function) { fuseProducts(function); });
  }

  /// Calls whose results are summed with earlier values become calls of a template that
  /// takes those values and returns the sums.
  void accumulateIntoCalls(ModuleOp module, func::FuncOp step) {
    std::map<std::string, func::FuncOp> clones;
    llvm::SmallVector<func::CallOp> calls;
    step.walk([&](func::CallOp call) { calls.push_back(call); });
    for (func::CallOp call : calls) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (!callee || callee.isExternal())
        continue;
      llvm::SmallVector<int64_t> summed;
      llvm::SmallVector<Value> accumulators;
      llvm::SmallVector<AddOp> sums;
      for (OpResult result : call->getResults()) {
        AddOp sum = onlyAdd(result);
        Value into = sum ? accumulator(sum, result, call) : Value();
        if (!into)
          continue;
        summed.push_back(result.getResultNumber());
        accumulators.push_back(into);
        sums.push_back(sum);
      }
      if (summed.empty())
        continue;
      std::string name = callee.getSymName().str() + ".accumulate";
      for (int64_t r : summed)
        name += "." + std::to_string(r);
      func::FuncOp &clone = clones[name];
      if (!clone)
        clone = accumulatingTemplate(module, callee, name, summed);
      OpBuilder b(call);
      llvm::SmallVector<Value> operands(call.getOperands());
      operands.append(accumulators.begin(), accumulators.end());
      auto replacement = b.create<func::CallOp>(call.getLoc(), clone, operands);
      for (NamedAttribute attribute : call->getDiscardableAttrs())
        replacement->setAttr(attribute.getName(), attribute.getValue());
      for (auto [r, sum] : llvm::zip(summed, sums)) {
        sum.getResult().replaceAllUsesWith(replacement.getResult(r));
        sum.erase();
      }
      call.replaceAllUsesWith(replacement.getResults());
      call.erase();
    }
  }

  /// A copy of `callee` that takes one more argument per result in `summed` and returns
  /// that result plus the argument; `mt.accumulators` lists those results, in order.
  func::FuncOp accumulatingTemplate(ModuleOp module, func::FuncOp callee, llvm::StringRef name,
                                    llvm::ArrayRef<int64_t> summed) {
    OpBuilder b(callee);
    b.setInsertionPointAfter(callee);
    auto clone = llvm::cast<func::FuncOp>(b.clone(*callee));
    clone.setSymName(name);
    Block &body = clone.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    for (int64_t r : summed) {
      Value part = ret.getOperand(r);
      // Through the function, which keeps its argument attributes in step.
      unsigned at = clone.getNumArguments();
      clone.insertArgument(at, part.getType(), DictionaryAttr(), part.getLoc());
      ret.setOperand(r, b.create<AddOp>(part.getLoc(), part.getType(), body.getArgument(at), part));
    }
    clone->setAttr("mt.accumulators", b.getDenseI64ArrayAttr(summed));
    return clone;
  }

  /// add(acc, matmul(x, y)) becomes matmul(x, y, acc): the product's epilogue adds. So does
  /// add(acc, linear(x, w)) without a bias in a backward template; a forward's projections
  /// stay linear, which the cost model counts as the model's work.
  void fuseProducts(func::FuncOp function) {
    const bool backward = function->hasAttr("mt.backward_of");
    llvm::SmallVector<AddOp> adds;
    function.walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp sum : adds)
      for (Value part : {sum.getRhs(), sum.getLhs()}) {
        auto matmul = part.getDefiningOp<MatmulOp>();
        auto linear = backward ? part.getDefiningOp<LinearOp>() : LinearOp();
        if ((!matmul || matmul.getAddend()) &&
            (!linear || linear.getBias() || linear.getInput().getType().getRank() < 2))
          continue;
        if (!part.hasOneUse())
          continue;
        Operation *product = part.getDefiningOp();
        Value lhs = product->getOperand(0), rhs = product->getOperand(1);
        // The product must not read its accumulator: the sum may be written over it.
        Value into = accumulator(sum, part, sum);
        if (!into || into == lhs || into == rhs)
          continue;
        OpBuilder b(sum);
        auto fused = matmul
                         ? b.create<MatmulOp>(product->getLoc(), sum.getType(), lhs, rhs, into,
                                              matmul.getTransposeLhs(), matmul.getTransposeRhs())
                         : b.create<MatmulOp>(product->getLoc(), sum.getType(), lhs, rhs, into,
                                              /*transpose_lhs=*/false, linear.getTransposeWeight());
        sum.getResult().replaceAllUsesWith(fused.getResult());
        sum.erase();
        product->erase();
        break;
      }
  }
};

} // namespace
