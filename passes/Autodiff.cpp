// mt-autodiff: reverse-mode differentiation of the forward function into a training step.
//
//   func.func @forward(%ids: tensor<2x16xi64>) -> tensor<2x16x96xf32>
// becomes
//   func.func @train_step(%ids: tensor<2x16xi64>, %targets: tensor<2x16xi64>)
//       -> (tensor<f32>, tensor<96x32xf32> {mt.gradient_of = @wte}, ...)
// with the loss (mt.cross_entropy) appended and every op's gradient rule applied backwards.
#include "ir/ShapeRules.h"
#include "passes/BufferLiveness.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

#define DEBUG_TYPE "mt-autodiff"

namespace mt {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// The most logits a fused loss makes at once (128 MiB of fp32, twice that for its gradient,
/// in the device's kernel scratch beside the whole step), and the fewest chunks it takes. A
/// chunk of rows is the M of the loss's products: at 4M logits (131 rows of a 32000-token
/// vocabulary) cuBLASLt ran them at 184 TFLOP/s on the H200, a quarter of its large products.
constexpr int64_t kLossChunkElements = int64_t(1) << 25;
constexpr int64_t kLossChunks = 4;

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

bool isFloatTensor(Value value) {
  return llvm::isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

/// A layer that keeps its activations for its backward instead of recomputing them: its
/// forward template returns, after its output, the results of its products and attentions
/// that the backward reads; the backward, (inputs..., dy, saved...) -> gradients, reads them
/// where the recomputing one makes them again.
struct SavingTemplates {
  func::FuncOp forward, backward;
};

/// Ops whose results a saving layer keeps: the products and attentions, a layer's FLOPs.
bool isSavedKind(Operation *op) { return llvm::isa<LinearOp, MatmulOp, AttentionOp>(op); }

/// Builds the backward ops of one op at a time; `gradients` maps each value to the sum of
/// the gradients flowing into it so far. Layer calls at `firstSavingLayer` or later keep
/// their activations.
class Differentiator {
public:
  Differentiator(OpBuilder &b, ModuleOp module,
                 int64_t firstSavingLayer = std::numeric_limits<int64_t>::max())
      : b(b), module(module), firstSavingLayer(firstSavingLayer) {}

  /// Applies `op`'s gradient rule given the gradients of its results.
  LogicalResult differentiate(Operation *op);
  void seed(Value value, Value gradient) { gradients[value] = gradient; }
  Value gradientOf(Value value) { return gradients.lookup(value); }

private:
  void accumulate(Value value, Value gradient) {
    if (!gradient || !isFloatTensor(value))
      return;
    Value &sum = gradients[value];
    sum = sum ? b.create<AddOp>(gradient.getLoc(), sum.getType(), sum, gradient).getResult()
              : gradient;
  }
  /// A scalar constant of `like`'s element type, for use with broadcasting ops.
  Value scalar(Location loc, Value like, double value) {
    auto type = RankedTensorType::get({}, getElementTypeOrSelf(like.getType()));
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), value)));
  }
  Value mul(Location loc, Value x, Value y) {
    return b.create<MulOp>(loc, broadcastType(x, y), x, y);
  }
  Value div(Location loc, Value x, Value y) {
    return b.create<DivOp>(loc, broadcastType(x, y), x, y);
  }
  Type broadcastType(Value x, Value y) {
    return RankedTensorType::get(*broadcastShape(shapeOf(x), shapeOf(y), [] {
      return InFlightDiagnostic();
    }), getElementTypeOrSelf(x.getType()));
  }
  Value matmul(Location loc, Value x, Value y, bool tx, bool ty) {
    Shape shape = *matmulShape(shapeOf(x), shapeOf(y), tx, ty, [] { return InFlightDiagnostic(); });
    return b.create<MatmulOp>(loc, RankedTensorType::get(shape, getElementTypeOrSelf(x.getType())),
                              x, y, Value(), tx, ty);
  }
  Value reshape(Location loc, Value x, llvm::ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    return b.create<ReshapeOp>(loc, RankedTensorType::get(shape, getElementTypeOrSelf(x.getType())), x);
  }
  /// Sums a broadcast gradient back to the shape of the operand it came from.
  Value reduceTo(Location loc, Value gradient, Value operand) {
    llvm::ArrayRef<int64_t> from = shapeOf(gradient), to = shapeOf(operand);
    if (from == to)
      return gradient;
    size_t lead = from.size() - to.size();
    llvm::SmallVector<int64_t> axes;
    for (size_t d = 0; d < from.size(); ++d)
      if (d < lead || (to[d - lead] == 1 && from[d] != 1))
        axes.push_back(d);
    Shape kept(from);
    for (int64_t axis : axes)
      kept[axis] = 1;
    Value sum = b.create<ReduceSumOp>(
        loc, RankedTensorType::get(kept, getElementTypeOrSelf(gradient.getType())), gradient,
        b.getDenseI64ArrayAttr(axes), /*keepdims=*/true);
    return reshape(loc, sum, to);
  }
  /// The gradient of a reduction's input: the result gradient broadcast back over the axes.
  Value broadcastBack(Location loc, Value gradient, Value input, llvm::ArrayRef<int64_t> axes) {
    Shape kept(shapeOf(input));
    for (int64_t axis : axes)
      kept[axis] = 1;
    Value shaped = reshape(loc, gradient, kept);
    if (kept == Shape(shapeOf(input)))
      return shaped;
    return b.create<ExpandOp>(loc, input.getType(), shaped);
  }
  /// concat(-x[..., D/2:], x[..., :D/2]) on the last axis, as mt.rope defines it.
  Value rotateHalf(Location loc, Value x) {
    llvm::ArrayRef<int64_t> shape = shapeOf(x);
    int64_t last = shape.size() - 1, half = shape[last] / 2;
    auto halfOf = [&](int64_t start) {
      Shape starts(shape.size(), 0), limits(shape), strides(shape.size(), 1), result(shape);
      starts[last] = start;
      limits[last] = start + half;
      result[last] = half;
      return b.create<SliceOp>(loc, RankedTensorType::get(result, getElementTypeOrSelf(x.getType())),
                               x, b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(limits),
                               b.getDenseI64ArrayAttr(strides));
    };
    Value upper = b.create<NegOp>(loc, halfOf(half));
    return b.create<ConcatOp>(loc, x.getType(), ValueRange{upper, halfOf(0)}, last);
  }
  Value activationGrad(Location loc, StringRef activation, Value x, Value g) {
    return b.create<ActivationGradOp>(loc, b.getStringAttr(activation), x, g);
  }

  /// The backward template of a layer template: (inputs..., dy) -> one gradient per float
  /// input. It recomputes the layer's forward from its inputs, so the step keeps only each
  /// layer's input (recompute every layer).
  func::FuncOp backwardOf(func::FuncOp forward);
  /// The templates of a layer that keeps its activations (see SavingTemplates).
  SavingTemplates savingTemplatesOf(func::FuncOp forward);
  /// `call` replaced by a call of `saving`, its saving template, which it returns.
  func::CallOp callSaving(func::CallOp call, func::FuncOp saving) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(call);
    auto replacement = b.create<func::CallOp>(call.getLoc(), saving, call.getOperands());
    replacement->setDiscardableAttrs(call->getDiscardableAttrDictionary());
    call.getResult(0).replaceAllUsesWith(replacement.getResult(0));
    gradients.erase(call.getResult(0));
    call.erase();
    return replacement;
  }
  /// `attention` with its log-sum-exp as a second result, for its gradient to read: a new op
  /// in its place that takes over its uses (the caller erases the old one), or itself.
  AttentionOp withLse(AttentionOp attention) {
    if (attention.getLse())
      return attention;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(attention);
    auto query = llvm::cast<RankedTensorType>(attention.getQuery().getType());
    llvm::ArrayRef<int64_t> q = query.getShape(); // [B, H, T, D], or [B, T, H, D]
    Shape rows = attention.getSequenceMajor() ? Shape{q[0], q[2], q[1]} : Shape(q.drop_back());
    auto lse = RankedTensorType::get(rows, query.getElementType());
    auto both = b.create<AttentionOp>(
        attention.getLoc(), attention.getResult().getType(), lse, attention.getQuery(),
        attention.getKey(), attention.getValue(), attention.getKeySpan(), attention.getScaleAttr(),
        attention.getCausalAttr(), attention.getWindowAttr(), attention.getSoftcapAttr(),
        attention.getSequenceMajorAttr());
    both->setDiscardableAttrs(attention->getDiscardableAttrDictionary());
    attention.getResult().replaceAllUsesWith(both.getResult());
    return both;
  }

  Value zeros(Location loc, Type type) {
    auto tensor = llvm::cast<RankedTensorType>(type);
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(tensor, b.getFloatAttr(tensor.getElementType(), 0.0)));
  }

  /// The backward ops of `forward` (a template's body) in `backward`'s entry block, seeded
  /// with its last argument; `origins` receives each copy of a forward op with that op.
  LogicalResult buildBackward(func::FuncOp forward, func::FuncOp backward,
                              DenseMap<Operation *, Operation *> &origins);

  OpBuilder &b;
  ModuleOp module;
  DenseMap<Value, Value> gradients;
  int64_t firstSavingLayer;
};

/// Erases the ops of `body` that nothing reads, last first, so that their operands' makers
/// may follow.
void eraseDeadOps(Block &body) {
  llvm::SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();
}

/// A template of `type`, named `name`, right after `after`.
func::FuncOp createTemplate(OpBuilder &b, func::FuncOp after, llvm::StringRef name,
                            FunctionType type) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(after);
  auto function = b.create<func::FuncOp>(after.getLoc(), name, type);
  function.setPrivate();
  function.addEntryBlock();
  return function;
}

/// The backward's arguments: the forward's, then the gradient of each of its results.
FunctionType backwardType(OpBuilder &b, func::FuncOp forward) {
  llvm::SmallVector<Type> inputs(forward.getArgumentTypes());
  inputs.append(forward.getResultTypes().begin(), forward.getResultTypes().end());
  llvm::SmallVector<Type> results;
  for (Type type : forward.getArgumentTypes())
    if (llvm::isa<FloatType>(getElementTypeOrSelf(type)))
      results.push_back(type);
  return b.getFunctionType(inputs, results);
}

LogicalResult Differentiator::buildBackward(func::FuncOp forward, func::FuncOp backward,
                                            DenseMap<Operation *, Operation *> &origins) {
  backward->setAttr("mt.backward_of", FlatSymbolRefAttr::get(forward.getSymNameAttr()));
  Block *body = &backward.getBody().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  IRMapping mapping;
  for (auto [argument, clone] : llvm::zip(forward.getArguments(), body->getArguments()))
    mapping.map(argument, clone);
  llvm::SmallVector<Operation *> recomputed;
  Value output;
  for (Operation &op : forward.getBody().front()) {
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
      output = mapping.lookup(ret.getOperand(0));
      continue;
    }
    recomputed.push_back(b.clone(op, mapping));
    origins[recomputed.back()] = &op;
  }
  Differentiator inner(b, module);
  inner.seed(output, body->getArgument(forward.getNumArguments()));
  for (Operation *op : llvm::reverse(recomputed))
    if (failed(inner.differentiate(op)))
      return failure();
  llvm::SmallVector<Value> grads;
  for (BlockArgument argument : body->getArguments().take_front(forward.getNumArguments())) {
    if (!llvm::isa<FloatType>(getElementTypeOrSelf(argument.getType())))
      continue;
    Value gradient = inner.gradientOf(argument);
    grads.push_back(gradient ? gradient : inner.zeros(forward.getLoc(), argument.getType()));
  }
  b.create<func::ReturnOp>(forward.getLoc(), grads);
  return success();
}

func::FuncOp Differentiator::backwardOf(func::FuncOp forward) {
  std::string name = (forward.getSymName() + "_bwd").str();
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  func::FuncOp backward = createTemplate(b, forward, name, backwardType(b, forward));
  DenseMap<Operation *, Operation *> origins;
  if (failed(buildBackward(forward, backward, origins)))
    return nullptr;
  return backward;
}

SavingTemplates Differentiator::savingTemplatesOf(func::FuncOp forward) {
  std::string name = (forward.getSymName() + "_saving").str();
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return {existing, module.lookupSymbol<func::FuncOp>(name + "_bwd")};
  // The forward as the recomputing backward would see it: attentions with their
  // log-sum-exp, which their gradients read.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(forward);
  auto saving = llvm::cast<func::FuncOp>(b.clone(*forward));
  saving.setSymName(name);
  // The mark tells mt-recompute not to run the layer again (its output is kept instead).
  saving->setAttr("mt.saves_activations", b.getUnitAttr());
  for (AttentionOp attention : llvm::to_vector(saving.getOps<AttentionOp>()))
    if (AttentionOp both = withLse(attention); both != attention)
      attention.erase();
  func::FuncOp backward = createTemplate(b, saving, name + "_bwd", backwardType(b, saving));
  DenseMap<Operation *, Operation *> origins;
  if (failed(buildBackward(saving, backward, origins)))
    return {};
  // What the gradients still read of the recomputed products and attentions becomes an
  // argument, and the forward returns it.
  Block &body = backward.getBody().front();
  eraseDeadOps(body);
  auto ret = llvm::cast<func::ReturnOp>(saving.getBody().front().getTerminator());
  llvm::SmallVector<Value> returned(ret.getOperands());
  llvm::SmallVector<bool> lseArguments;
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    Operation *origin = origins.lookup(&op);
    if (!origin || !isSavedKind(&op))
      continue;
    for (auto [result, kept] : llvm::zip(op.getResults(), origin->getResults()))
      if (!result.use_empty()) {
        result.replaceAllUsesWith(body.addArgument(result.getType(), result.getLoc()));
        returned.push_back(kept);
        lseArguments.push_back(llvm::isa<AttentionOp>(op) && result == op.getResult(1));
      }
    op.erase();
  }
  eraseDeadOps(body);
  ret->setOperands(returned);
  saving.setFunctionType(
      b.getFunctionType(saving.getArgumentTypes(), ValueRange(returned).getTypes()));
  backward.setFunctionType(
      b.getFunctionType(body.getArgumentTypes(), backward.getFunctionType().getResults()));
  unsigned first = body.getNumArguments() - lseArguments.size();
  for (auto [i, lse] : llvm::enumerate(lseArguments))
    if (lse)
      backward.setArgAttr(first + i, kLogSumExpArgument, b.getUnitAttr());
  return {saving, backward};
}

LogicalResult Differentiator::differentiate(Operation *op) {
  if (llvm::none_of(op->getResults(), [&](Value r) { return gradients.count(r); }))
    return success();
  Location loc = op->getLoc();
  // An attention's second result, its log-sum-exp, has no gradient of its own.
  Value g = op->getNumResults() == 1 || llvm::isa<AttentionOp>(op)
                ? gradients.lookup(op->getResult(0))
                : Value();
  auto binaryOperands = [&](Operation *binary) {
    return std::make_pair(binary->getOperand(0), binary->getOperand(1));
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ParamOp, ConstantOp>([](auto) { return success(); })
      .Case<func::CallOp>([&](func::CallOp call) {
        auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
        auto layer = call->getAttrOfType<IntegerAttr>("mt.layer");
        func::FuncOp backward;
        if (callee && layer && layer.getInt() >= firstSavingLayer) {
          SavingTemplates saving = savingTemplatesOf(callee);
          if (!saving.backward)
            return failure();
          call = callSaving(call, saving.forward);
          backward = saving.backward;
        } else if (callee) {
          backward = backwardOf(callee);
        }
        if (!backward)
          return failure();
        llvm::SmallVector<Value> operands(call.getOperands());
        operands.push_back(g);
        operands.append(call.result_begin() + 1, call.result_end());
        auto grads = b.create<func::CallOp>(loc, backward, operands);
        grads->setAttrs(call->getDiscardableAttrDictionary());
        unsigned next = 0;
        for (Value operand : call.getOperands())
          if (isFloatTensor(operand))
            accumulate(operand, grads.getResult(next++));
        return success();
      })
      .Case<AddOp>([&](AddOp add) {
        auto [x, y] = binaryOperands(add);
        accumulate(x, reduceTo(loc, g, x));
        accumulate(y, reduceTo(loc, g, y));
        return success();
      })
      .Case<SubOp>([&](SubOp sub) {
        auto [x, y] = binaryOperands(sub);
        accumulate(x, reduceTo(loc, g, x));
        accumulate(y, reduceTo(loc, b.create<NegOp>(loc, g), y));
        return success();
      })
      .Case<MulOp>([&](MulOp m) {
        auto [x, y] = binaryOperands(m);
        accumulate(x, reduceTo(loc, mul(loc, g, y), x));
        accumulate(y, reduceTo(loc, mul(loc, g, x), y));
        return success();
      })
      .Case<DivOp>([&](DivOp d) {
        auto [x, y] = binaryOperands(d);
        accumulate(x, reduceTo(loc, div(loc, g, y), x));
        // d(x / y)/dy = -(x / y) / y.
        Value dy = b.create<NegOp>(loc, div(loc, mul(loc, g, d.getResult()), y));
        accumulate(y, reduceTo(loc, dy, y));
        return success();
      })
      .Case<PowOp>([&](PowOp p) {
        auto [x, y] = binaryOperands(p);
        Value yMinusOne = b.create<SubOp>(loc, y.getType(), y, scalar(loc, y, 1.0));
        Value power = b.create<PowOp>(loc, broadcastType(x, yMinusOne), x, yMinusOne);
        accumulate(x, reduceTo(loc, mul(loc, mul(loc, g, y), power), x));
        if (!y.getDefiningOp<ConstantOp>()) {
          Value logX = b.create<LogOp>(loc, x);
          accumulate(y, reduceTo(loc, mul(loc, mul(loc, g, p.getResult()), logX), y));
        }
        return success();
      })
      .Case<NegOp>([&](NegOp n) {
        accumulate(n.getInput(), b.create<NegOp>(loc, g));
        return success();
      })
      .Case<SqrtOp>([&](SqrtOp s) {
        accumulate(s.getInput(), div(loc, mul(loc, g, scalar(loc, g, 0.5)), s.getResult()));
        return success();
      })
      .Case<RsqrtOp>([&](RsqrtOp r) {
        Value y = r.getResult();
        Value cube = mul(loc, y, mul(loc, y, y));
        accumulate(r.getInput(), mul(loc, mul(loc, g, scalar(loc, g, -0.5)), cube));
        return success();
      })
      .Case<ReciprocalOp>([&](ReciprocalOp r) {
        Value y = r.getResult();
        accumulate(r.getInput(), b.create<NegOp>(loc, mul(loc, g, mul(loc, y, y))));
        return success();
      })
      .Case<ExpOp>([&](ExpOp e) {
        accumulate(e.getInput(), mul(loc, g, e.getResult()));
        return success();
      })
      .Case<LogOp>([&](LogOp l) {
        accumulate(l.getInput(), div(loc, g, l.getInput()));
        return success();
      })
      .Case<CosOp>([&](CosOp c) {
        accumulate(c.getInput(), b.create<NegOp>(loc, mul(loc, g, b.create<SinOp>(loc, c.getInput()))));
        return success();
      })
      .Case<SinOp>([&](SinOp s) {
        accumulate(s.getInput(), mul(loc, g, b.create<CosOp>(loc, s.getInput())));
        return success();
      })
      .Case<TanhOp, SigmoidOp, ErfOp, ReluOp, SiluOp>([&](auto unary) {
        StringRef name = unary->getName().stripDialect();
        accumulate(unary.getInput(), activationGrad(loc, name, unary.getInput(), g));
        return success();
      })
      .Case<GluOp>([&](GluOp glu) {
        auto grad = b.create<GluGradOp>(loc, glu.getType(), glu.getType(), glu.getActivationAttr(),
                                        glu.getGate(), glu.getUp(), g);
        accumulate(glu.getGate(), grad.getGateGrad());
        accumulate(glu.getUp(), grad.getUpGrad());
        return success();
      })
      .Case<GeluOp>([&](GeluOp gelu) {
        StringRef name = gelu.getApproximate() == "tanh" ? "gelu_tanh" : "gelu";
        accumulate(gelu.getInput(), activationGrad(loc, name, gelu.getInput(), g));
        return success();
      })
      .Case<WhereOp>([&](WhereOp w) {
        Value zero = scalar(loc, g, 0.0);
        Value onTrue = b.create<WhereOp>(loc, g.getType(), w.getCondition(), g, zero);
        Value onFalse = b.create<WhereOp>(loc, g.getType(), w.getCondition(), zero, g);
        accumulate(w.getTrueValue(), reduceTo(loc, onTrue, w.getTrueValue()));
        accumulate(w.getFalseValue(), reduceTo(loc, onFalse, w.getFalseValue()));
        return success();
      })
      .Case<CastOp>([&](CastOp c) {
        if (isFloatTensor(c.getInput()))
          accumulate(c.getInput(), b.create<CastOp>(loc, c.getInput().getType(), g));
        return success();
      })
      .Case<ReduceSumOp, ReduceMeanOp>([&](auto reduce) {
        Value dx = broadcastBack(loc, g, reduce.getInput(), reduce.getAxes());
        if (std::is_same_v<decltype(reduce), ReduceMeanOp>) {
          int64_t count = 1;
          for (int64_t axis : reduce.getAxes())
            count *= shapeOf(reduce.getInput())[axis];
          dx = mul(loc, dx, scalar(loc, dx, 1.0 / count));
        }
        accumulate(reduce.getInput(), dx);
        return success();
      })
      .Case<ReduceMaxOp>([&](ReduceMaxOp m) {
        accumulate(m.getInput(),
                   b.create<ReduceMaxGradOp>(loc, m.getInput().getType(), m.getInput(), g,
                                             m.getAxesAttr(), m.getKeepdimsAttr()));
        return success();
      })
      .Case<SoftmaxOp>([&](SoftmaxOp s) {
        accumulate(s.getInput(), b.create<SoftmaxGradOp>(loc, s.getResult(), g, s.getAxis()));
        return success();
      })
      .Case<RmsNormOp>([&](RmsNormOp n) {
        auto grad = b.create<RmsNormGradOp>(loc, n.getInput().getType(), n.getWeight().getType(),
                                            n.getInput(), n.getWeight(), g, n.getEpsilonAttr());
        accumulate(n.getInput(), grad.getInputGrad());
        accumulate(n.getWeight(), grad.getWeightGrad());
        return success();
      })
      .Case<LayerNormOp>([&](LayerNormOp n) {
        Type vector = n.getWeight().getType();
        auto grad = b.create<LayerNormGradOp>(loc, n.getInput().getType(), vector, vector,
                                              n.getInput(), n.getWeight(), g, n.getEpsilonAttr());
        accumulate(n.getInput(), grad.getInputGrad());
        accumulate(n.getWeight(), grad.getWeightGrad());
        if (n.getBias())
          accumulate(n.getBias(), grad.getBiasGrad());
        return success();
      })
      .Case<MatmulOp>([&](MatmulOp m) {
        Value x = m.getLhs(), y = m.getRhs();
        bool tx = m.getTransposeLhs(), ty = m.getTransposeRhs();
        // C = op(X) op(Y): dop(X) = G op(Y)^T and dop(Y) = op(X)^T G, transposed back when
        // the operand itself was transposed.
        Value dx = tx ? matmul(loc, y, g, ty, true) : matmul(loc, g, y, false, !ty);
        Value dy = ty ? matmul(loc, g, x, true, tx) : matmul(loc, x, g, !tx, false);
        accumulate(x, reduceTo(loc, dx, x));
        accumulate(y, reduceTo(loc, dy, y));
        if (m.getAddend())
          accumulate(m.getAddend(), g);
        return success();
      })
      .Case<LinearOp>([&](LinearOp l) {
        Value x = l.getInput(), w = l.getWeight();
        bool tw = l.getTransposeWeight();
        int64_t k = shapeOf(x).back(), n = shapeOf(g).back();
        int64_t rows = numElements(shapeOf(x)) / std::max<int64_t>(k, 1);
        accumulate(x, b.create<LinearOp>(loc, x.getType(), g, w, Value(), !tw));
        Value x2 = reshape(loc, x, {rows, k}), g2 = reshape(loc, g, {rows, n});
        accumulate(w, tw ? matmul(loc, g2, x2, true, false) : matmul(loc, x2, g2, true, false));
        if (l.getBias())
          accumulate(l.getBias(),
                     b.create<ReduceSumOp>(loc, l.getBias().getType(), g2,
                                           b.getDenseI64ArrayAttr({0}), /*keepdims=*/false));
        return success();
      })
      .Case<EmbeddingOp>([&](EmbeddingOp e) {
        accumulate(e.getTable(), b.create<ScatterAddOp>(loc, e.getTable().getType(),
                                                        e.getIndices(), g, 0));
        return success();
      })
      .Case<GatherOp>([&](GatherOp gather) {
        if (isFloatTensor(gather.getInput()))
          accumulate(gather.getInput(),
                     b.create<ScatterAddOp>(loc, gather.getInput().getType(), gather.getIndices(),
                                            g, gather.getAxis()));
        return success();
      })
      .Case<RopeOp>([&](RopeOp r) {
        Value x = r.getInput();
        accumulate(x, b.create<RopeGradOp>(loc, x.getType(), g, r.getCos(), r.getSin()));
        // Position tables are constants in exported models; computed ones get their rule too:
        // d/dcos = g * x and d/dsin = g * rotate_half(x), summed over broadcast axes.
        if (!r.getCos().getDefiningOp<ConstantOp>())
          accumulate(r.getCos(), reduceTo(loc, mul(loc, g, x), r.getCos()));
        if (!r.getSin().getDefiningOp<ConstantOp>())
          accumulate(r.getSin(), reduceTo(loc, mul(loc, g, rotateHalf(loc, x)), r.getSin()));
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp a) {
        AttentionOp forward = withLse(a);
        auto grad = b.create<AttentionGradOp>(
            loc, a.getQuery().getType(), a.getKey().getType(), a.getValue().getType(), a.getQuery(),
            a.getKey(), a.getValue(), g, forward.getResult(), forward.getLse(), a.getKeySpan(),
            a.getScaleAttr(), a.getCausalAttr(), a.getWindowAttr(), a.getSoftcapAttr(),
            a.getSequenceMajorAttr());
        Value query = a.getQuery(), key = a.getKey(), value = a.getValue();
        if (forward != a) { // the op is gone: its operands were read before
          gradients.erase(a.getResult());
          a.erase();
        }
        accumulate(query, grad.getQueryGrad());
        accumulate(key, grad.getKeyGrad());
        accumulate(value, grad.getValueGrad());
        return success();
      })
      .Case<LinearCrossEntropyOp>([&](LinearCrossEntropyOp c) {
        auto grad = b.create<LinearCrossEntropyGradOp>(
            loc, c.getInput().getType(), c.getWeight().getType(), c.getInput(), c.getWeight(),
            c.getTargets(), g, c.getTransposeWeightAttr(), c.getChunkAttr());
        accumulate(c.getInput(), grad.getInputGrad());
        accumulate(c.getWeight(), grad.getWeightGrad());
        return success();
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp c) {
        accumulate(c.getLogits(), b.create<CrossEntropyGradOp>(loc, c.getLogits().getType(),
                                                               c.getLogits(), c.getTargets(), g));
        return success();
      })
      .Case<ReshapeOp>([&](ReshapeOp r) {
        if (isFloatTensor(r.getInput()))
          accumulate(r.getInput(), reshape(loc, g, shapeOf(r.getInput())));
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp t) {
        llvm::SmallVector<int64_t> inverse(t.getPermutation().size());
        for (auto [i, p] : llvm::enumerate(t.getPermutation()))
          inverse[p] = i;
        if (isFloatTensor(t.getInput()))
          accumulate(t.getInput(), b.create<TransposeOp>(loc, t.getInput().getType(), g,
                                                         b.getDenseI64ArrayAttr(inverse)));
        return success();
      })
      .Case<SliceOp>([&](SliceOp s) {
        if (isFloatTensor(s.getInput()))
          accumulate(s.getInput(), b.create<PadOp>(loc, s.getInput().getType(), g,
                                                   s.getStartsAttr(), s.getLimitsAttr(),
                                                   s.getStridesAttr()));
        return success();
      })
      .Case<ConcatOp>([&](ConcatOp c) {
        int64_t axis = c.getAxis(), offset = 0;
        for (Value input : c.getInputs()) {
          Shape starts(shapeOf(g).size(), 0), limits(shapeOf(g)), strides(shapeOf(g).size(), 1);
          starts[axis] = offset;
          offset += shapeOf(input)[axis];
          limits[axis] = offset;
          if (isFloatTensor(input))
            accumulate(input, b.create<SliceOp>(loc, input.getType(), g,
                                                b.getDenseI64ArrayAttr(starts),
                                                b.getDenseI64ArrayAttr(limits),
                                                b.getDenseI64ArrayAttr(strides)));
        }
        return success();
      })
      .Case<ExpandOp>([&](ExpandOp e) {
        if (isFloatTensor(e.getInput()))
          accumulate(e.getInput(), reduceTo(loc, g, e.getInput()));
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("has no gradient rule, but the loss depends on it");
      });
}

struct AutodiffPass : mt::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(functionName);
    if (!forward || forward.getBlocks().size() != 1) {
      module.emitError("mt-autodiff: no single-block function @") << functionName;
      return signalPassFailure();
    }
    auto ret = llvm::cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    if (ret.getNumOperands() == 0) {
      ret.emitOpError("mt-autodiff needs a model with an output (logits or a loss)");
      return signalPassFailure();
    }
    OpBuilder b(ret);
    FailureOr<Value> loss = appendLoss(forward, ret, b);
    if (failed(loss))
      return signalPassFailure();

    // Reverse sweep over everything before the return (the loss included).
    // The last `savedLayers` layers keep their activations (layer calls carry their index).
    if (savedLayers < 0) {
      module.emitError("mt-autodiff: saved-layers must be at least 0, got ")
          << savedLayers.getValue();
      return signalPassFailure();
    }
    int64_t firstSavingLayer = std::numeric_limits<int64_t>::max();
    if (savedLayers > 0) {
      int64_t layers = 0;
      forward.walk([&](func::CallOp call) {
        if (auto layer = call->getAttrOfType<IntegerAttr>("mt.layer"))
          layers = std::max(layers, layer.getInt() + 1);
      });
      firstSavingLayer = std::max<int64_t>(layers - savedLayers, 0);
    }
    Differentiator differentiator(b, module, firstSavingLayer);
    Location loc = ret.getLoc();
    auto lossType = llvm::cast<RankedTensorType>(loss->getType());
    differentiator.seed(*loss, b.create<ConstantOp>(
                                   loc, DenseElementsAttr::get(
                                            lossType, b.getFloatAttr(lossType.getElementType(), 1.0))));
    llvm::SmallVector<Operation *> ops;
    for (Operation &op : forward.getBody().front().without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (failed(differentiator.differentiate(op)))
        return signalPassFailure();

    // One gradient per declared parameter, zeros for one the loss does not depend on.
    llvm::SmallVector<Value> results{*loss};
    llvm::SmallVector<Attribute> resultAttrs{b.getDictionaryAttr({})};
    llvm::StringMap<Value> reads;
    forward.walk([&](ParamOp read) { reads[read.getName()] = read.getResult(); });
    for (ParameterOp parameter : module.getOps<ParameterOp>()) {
      Value read = reads.lookup(parameter.getSymName());
      Value gradient = read ? differentiator.gradientOf(read) : Value();
      if (!gradient) {
        RankedTensorType type = parameter.getTensorType();
        gradient = b.create<ConstantOp>(
            loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
      }
      results.push_back(gradient);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr("mt.gradient_of", FlatSymbolRefAttr::get(parameter.getSymNameAttr()))));
    }
    b.create<func::ReturnOp>(loc, results);
    ret.erase();
    forward.setFunctionType(b.getFunctionType(forward.getArgumentTypes(),
                                              ValueRange(results).getTypes()));
    forward.setAllResultAttrs(resultAttrs);
    forward.setSymName("train_step");
  }

  /// The loss: the model's scalar output, or the mean cross-entropy of its logits against a
  /// new `targets` argument shaped like the token input. A model split into micro-batches
  /// returns logits for each (the k-th over the k-th token input, "input_ids.k"): its loss is
  /// the mean of their losses, against "targets.k".
  FailureOr<Value> appendLoss(func::FuncOp forward, func::ReturnOp ret, OpBuilder &b) {
    Value first = ret.getOperand(0);
    auto type = llvm::cast<RankedTensorType>(first.getType());
    if (ret.getNumOperands() == 1 && type.getRank() == 0 &&
        llvm::isa<FloatType>(type.getElementType()))
      return first;
    llvm::SmallVector<BlockArgument> tokens;
    llvm::SmallVector<LinearOp> heads;
    for (BlockArgument argument : forward.getArguments())
      if (llvm::isa<IntegerType>(getElementTypeOrSelf(argument.getType())))
        tokens.push_back(argument);
    Value sum;
    for (auto [k, output] : llvm::enumerate(ret.getOperands())) {
      auto logits = llvm::cast<RankedTensorType>(output.getType());
      BlockArgument input = k < tokens.size() ? tokens[k] : BlockArgument();
      auto inputType = input ? llvm::cast<RankedTensorType>(input.getType()) : RankedTensorType();
      if (!input || logits.getRank() < 1 || inputType.getShape() != logits.getShape().drop_back())
        return emitError(output.getLoc(), "mt-autodiff: the model output ")
               << logits << " is neither a scalar loss nor logits [..., vocabulary] over a token "
               << "input";
      auto name = forward.getArgAttrOfType<StringAttr>(input.getArgNumber(), "mt.name");
      llvm::StringRef suffix = name ? name.getValue().drop_front(
                                          std::min(name.getValue().rfind('.'), name.size()))
                                    : llvm::StringRef();
      unsigned index = forward.getNumArguments();
      forward.insertArgument(index, inputType,
                             b.getDictionaryAttr(b.getNamedAttr(
                                 "mt.name", b.getStringAttr("targets" + suffix.str()))),
                             input.getLoc());
      Value targets = forward.getArgument(index);
      auto scalar = RankedTensorType::get({}, logits.getElementType());
      Value loss;
      // Logits of a bias-free projection that only the loss reads (a language-model head)
      // are made and consumed a chunk of rows at a time, never all at once.
      auto head = output.getDefiningOp<LinearOp>();
      if (head && !head.getBias() && output.hasOneUse()) {
        int64_t vocabulary = std::max<int64_t>(logits.getShape().back(), 1);
        int64_t rows = std::max<int64_t>(logits.getNumElements() / vocabulary, 1);
        int64_t chunk = std::clamp<int64_t>(
            std::min(kLossChunkElements, rows * vocabulary / kLossChunks) / vocabulary, 1, rows);
        loss = b.create<LinearCrossEntropyOp>(
            output.getLoc(), scalar, head.getInput(), head.getWeight(), targets,
            head.getTransposeWeightAttr(), b.getI64IntegerAttr(chunk));
        heads.push_back(head);
      } else {
        loss = b.create<CrossEntropyOp>(output.getLoc(), scalar, output, targets);
      }
      sum = sum ? b.create<AddOp>(output.getLoc(), loss.getType(), sum, loss).getResult() : loss;
    }
    if (ret.getNumOperands() > 1) {
      auto scalar = llvm::cast<RankedTensorType>(sum.getType());
      Value scale = b.create<ConstantOp>(
          ret.getLoc(), DenseElementsAttr::get(scalar, b.getFloatAttr(scalar.getElementType(),
                                                                      1.0 / ret.getNumOperands())));
      sum = b.create<MulOp>(ret.getLoc(), scalar, sum, scale).getResult();
    }
    // The fused heads' logits are no longer made (the return is rebuilt from the loss).
    ret->setOperands({});
    for (LinearOp head : heads)
      if (head->use_empty())
        head.erase();
    return sum;
  }
};

} // namespace
