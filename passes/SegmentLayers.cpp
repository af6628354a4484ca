// mt-segment-layers: the forward cut at the residual stream into layers, each a call of a
// stateless template whose weights are arguments.
//
//   %h = mt.add %x, %attn ; %y = mt.add %h, %mlp     (layer i, reading @w_i...)
// becomes
//   %y = func.call @layer_0(%x, %w_i...) {mt.layer = i}
//   func.func private @layer_0(%x, %w...) { ...the layer's ops... }
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "mt-segment-layers"

namespace mt {
#define GEN_PASS_DEF_SEGMENTLAYERSPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// One residual sub-block: the add that closes it and the ops computing its branch.
struct SubBlock {
  AddOp add;
  Value stream; // the add's operand that the branch is computed from
  llvm::SetVector<Operation *> ops;
};

/// A layer: consecutive sub-blocks, with the values it reads from outside and its template.
struct Layer {
  Value input, output;
  llvm::SmallVector<Operation *> ops; // in block order
  llvm::SmallVector<Value> weights;   // mt.param results, in order of first use
  llvm::SmallVector<Value> sides;     // other values from outside, in order of first use
  std::string signature;
};

class Segmenter {
public:
  explicit Segmenter(func::FuncOp forward) : forward(forward) {
    for (auto [i, op] : llvm::enumerate(forward.getBody().front()))
      position[&op] = i;
  }

  /// The residual sub-blocks in order, or empty when the adds do not form one chain.
  llvm::SmallVector<SubBlock> residualChain() {
    llvm::SmallVector<SubBlock> chain;
    forward.walk([&](AddOp add) {
      if (add.getLhs().getType() != add.getType() || add.getRhs().getType() != add.getType())
        return;
      for (auto [stream, branch] : {std::make_pair(add.getLhs(), add.getRhs()),
                                    std::make_pair(add.getRhs(), add.getLhs())}) {
        llvm::SetVector<Operation *> ops;
        if (collectBranch(branch, stream, ops)) {
          chain.push_back({add, stream, std::move(ops)});
          return;
        }
      }
    });
    for (size_t k = 1; k < chain.size(); ++k)
      if (chain[k].stream != chain[k - 1].add.getResult())
        return {};
    return chain;
  }

  /// Groups sub-blocks into layers by the shortest period of their kinds (attention or
  /// not), so that a layer is an attention block and what follows it up to the next one,
  /// whatever its MLP; layers of different structure then get different templates.
  llvm::SmallVector<Layer> layers(llvm::MutableArrayRef<SubBlock> chain) {
    llvm::SmallVector<bool> attends;
    for (const SubBlock &block : chain)
      attends.push_back(llvm::any_of(block.ops, [](Operation *op) {
        return llvm::isa<AttentionOp>(op);
      }));
    size_t n = chain.size(), period = n;
    for (size_t p = 1; p < n; ++p) {
      if (n % p != 0)
        continue;
      bool repeats = true;
      for (size_t k = p; k < n && repeats; ++k)
        repeats = attends[k] == attends[k - p];
      if (repeats) {
        period = p;
        break;
      }
    }
    llvm::SmallVector<Layer> result;
    for (size_t first = 0; first < n; first += period) {
      llvm::SetVector<Operation *> ops;
      for (size_t k = first; k < first + period; ++k) {
        ops.insert(chain[k].ops.begin(), chain[k].ops.end());
        ops.insert(chain[k].add);
      }
      llvm::SmallVector<Operation *> ordered(ops.begin(), ops.end());
      llvm::sort(ordered, [&](Operation *a, Operation *b) { return position[a] < position[b]; });
      Layer layer = describe(chain[first].stream, ordered);
      layer.output = chain[first + period - 1].add.getResult();
      result.push_back(std::move(layer));
    }
    return result;
  }

private:
  /// Adds the ops computing `value` from `stream` to `ops`; true when `stream` is among its
  /// inputs. Values defined before the stream (parameters, constants, position tables) are
  /// inputs, not part of the branch.
  bool collectBranch(Value value, Value stream, llvm::SetVector<Operation *> &ops) {
    if (value == stream)
      return true;
    Operation *op = value.getDefiningOp();
    if (!op || isBefore(op, stream))
      return false;
    if (ops.contains(op))
      return true;
    bool reaches = false;
    for (Value operand : op->getOperands())
      reaches |= collectBranch(operand, stream, ops);
    if (reaches)
      ops.insert(op);
    return reaches;
  }

  bool isBefore(Operation *op, Value stream) {
    Operation *start = stream.getDefiningOp();
    return !start ? false : position[op] <= position[start];
  }

  /// The layer's inputs and a structural signature: ops, attributes, types and where each
  /// operand comes from, with weights and side inputs by slot rather than by identity.
  Layer describe(Value input, llvm::ArrayRef<Operation *> ops) {
    Layer layer;
    layer.input = input;
    layer.ops.assign(ops.begin(), ops.end());
    llvm::DenseMap<Operation *, size_t> local;
    for (auto [i, op] : llvm::enumerate(ops))
      local[op] = i;
    std::string text;
    llvm::raw_string_ostream os(text);
    for (Operation *op : ops) {
      os << op->getName() << "(";
      for (Value operand : op->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (operand == input) {
          os << "x";
        } else if (producer && local.count(producer)) {
          os << "%" << local[producer] << "." << llvm::cast<OpResult>(operand).getResultNumber();
        } else if (producer && llvm::isa<ParamOp>(producer)) {
          os << "w" << slotOf(layer.weights, operand);
        } else if (auto constant = llvm::dyn_cast_or_null<ConstantOp>(producer)) {
          os << "c" << constant.getValue();
        } else {
          os << "s" << slotOf(layer.sides, operand);
        }
        os << ":" << operand.getType() << ",";
      }
      os << ")" << op->getAttrDictionary() << "->" << op->getResultTypes() << ";";
    }
    layer.signature = os.str();
    return layer;
  }

  static size_t slotOf(llvm::SmallVectorImpl<Value> &slots, Value value) {
    auto it = llvm::find(slots, value);
    if (it != slots.end())
      return it - slots.begin();
    slots.push_back(value);
    return slots.size() - 1;
  }

  func::FuncOp forward;
  llvm::DenseMap<Operation *, size_t> position;
};

/// The template of a layer: its ops cloned into a function of (x, sides..., weights...).
func::FuncOp buildTemplate(ModuleOp module, const Layer &layer, StringRef name, OpBuilder &b) {
  llvm::SmallVector<Type> inputs{layer.input.getType()};
  for (Value side : layer.sides)
    inputs.push_back(side.getType());
  for (Value weight : layer.weights)
    inputs.push_back(weight.getType());
  b.setInsertionPointToEnd(module.getBody());
  auto function = b.create<func::FuncOp>(layer.output.getLoc(), name,
                                         b.getFunctionType(inputs, layer.output.getType()));
  function.setPrivate();
  Block *body = function.addEntryBlock();
  IRMapping mapping;
  mapping.map(layer.input, body->getArgument(0));
  for (auto [i, side] : llvm::enumerate(layer.sides))
    mapping.map(side, body->getArgument(1 + i));
  for (auto [i, weight] : llvm::enumerate(layer.weights))
    mapping.map(weight, body->getArgument(1 + layer.sides.size() + i));
  b.setInsertionPointToStart(body);
  for (Operation *op : layer.ops) {
    for (Value operand : op->getOperands())
      if (auto constant = operand.getDefiningOp<ConstantOp>(); constant && !mapping.contains(operand))
        mapping.map(operand, b.clone(*constant)->getResult(0));
    b.clone(*op, mapping);
  }
  b.create<func::ReturnOp>(layer.output.getLoc(), mapping.lookup(layer.output));
  return function;
}

struct SegmentLayersPass : mt::impl::SegmentLayersPassBase<SegmentLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.getBlocks().size() != 1)
      return;
    Segmenter segmenter(forward);
    llvm::SmallVector<SubBlock> chain = segmenter.residualChain();
    if (chain.empty())
      return;
    llvm::SmallVector<Layer> layers = segmenter.layers(chain);
    LLVM_DEBUG(llvm::dbgs() << chain.size() << " sub-blocks in " << layers.size() << " layers\n");

    OpBuilder b(module.getContext());
    llvm::StringMap<func::FuncOp> templates;
    for (auto [index, layer] : llvm::enumerate(layers)) {
      func::FuncOp &callee = templates[layer.signature];
      if (!callee)
        callee = buildTemplate(module, layer,
                               "layer_" + std::to_string(templates.size() - 1), b);
      llvm::SmallVector<Value> operands{layer.input};
      operands.append(layer.sides.begin(), layer.sides.end());
      operands.append(layer.weights.begin(), layer.weights.end());
      b.setInsertionPointAfter(layer.output.getDefiningOp());
      auto call = b.create<func::CallOp>(layer.output.getLoc(), callee, operands);
      call->setAttr("mt.layer", b.getI64IntegerAttr(index));
      layer.output.replaceAllUsesWith(call.getResult(0));
      // The next layer's stream input is this layer's output, now the call's result.
      if (index + 1 < layers.size() && layers[index + 1].input == layer.output)
        layers[index + 1].input = call.getResult(0);
      for (Operation *op : llvm::reverse(layer.ops)) {
        if (!op->use_empty()) {
          op->emitError("mt-segment-layers: a value inside layer ")
              << index << " is used outside it";
          return signalPassFailure();
        }
        op->erase();
      }
    }
  }
};

} // namespace
