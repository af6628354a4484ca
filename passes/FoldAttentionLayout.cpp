// mt-fold-attention-layout: attention reads and writes the projections' rows [B, T, H, D], so
// the transposes into heads [B, H, T, D] and back (each a copy of the activations) go.
//
//   %q = mt.transpose %x permutation = [0, 2, 1, 3]
//   %o = mt.attention %q, %k, %v scale = s causal
//   %y = mt.transpose %o permutation = [0, 2, 1, 3]
// becomes
//   %y = mt.attention %x, %kx, %vx scale = s causal sequence_major
// Row-wise ops between a transpose and attention (rope, a norm of each head, partial rotary's
// slices and concatenation) run on the rows instead.
#include "passes/Passes.h"
#include "passes/PatternMatchers.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#define DEBUG_TYPE "mt-fold-attention-layout"

namespace mt {
#define GEN_PASS_DEF_FOLDATTENTIONLAYOUTPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// The permutation between [B, H, T, D] and [B, T, H, D], its own inverse.
constexpr int64_t kSwap[] = {0, 2, 1, 3};

bool swapsSequenceAndHeads(Operation *op) {
  auto transpose = llvm::dyn_cast_or_null<TransposeOp>(op);
  return transpose && transpose.getPermutation() == llvm::ArrayRef<int64_t>(kSwap);
}

/// `value` (rank 4, or a rope table broadcast to rank 4 from the right) with axes 1 and 2
/// swapped: a view when one of them has size 1, else a transpose.
Value swapped(PatternRewriter &rewriter, Location loc, Value value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  Shape shape(type.getShape());
  while (shape.size() < 4) // a table's missing leading axes broadcast as 1
    shape.insert(shape.begin(), 1);
  Shape out{shape[0], shape[2], shape[1], shape[3]};
  if (shape[1] == 1 || shape[2] == 1)
    return rewriter.create<ReshapeOp>(loc, type.clone(out), value);
  if (static_cast<int64_t>(shape.size()) != type.getRank())
    value = rewriter.create<ReshapeOp>(loc, type.clone(shape), value);
  return rewriter.create<TransposeOp>(loc, type.clone(out), value, kSwap);
}

/// Whether `op` acts on each row of the last axis alone, so that it commutes with moving the
/// other axes: the rope (against its tables moved too), norms over the last axis with weights
/// of that axis only, slices and concatenations along it.
bool actsOnRows(Operation *op) {
  auto rank1 = [](Value v) {
    return !v || llvm::cast<RankedTensorType>(v.getType()).getRank() == 1;
  };
  auto lastAxisOnly = [](SliceOp slice) {
    llvm::ArrayRef<int64_t> shape = slice.getInput().getType().getShape();
    for (size_t d = 0; d + 1 < shape.size(); ++d)
      if (slice.getStarts()[d] != 0 || slice.getLimits()[d] != shape[d] ||
          slice.getStrides()[d] != 1)
        return false;
    return true;
  };
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case<RopeOp>([](RopeOp r) {
        return llvm::cast<RankedTensorType>(r.getCos().getType()).getRank() <= 4 &&
               llvm::cast<RankedTensorType>(r.getSin().getType()).getRank() <= 4;
      })
      .Case<RmsNormOp>([&](RmsNormOp n) { return rank1(n.getWeight()); })
      .Case<LayerNormOp>([&](LayerNormOp n) { return rank1(n.getWeight()) && rank1(n.getBias()); })
      .Case<SliceOp>(lastAxisOnly)
      .Case<ConcatOp>([](ConcatOp c) { return c.getAxis() == 3; })
      .Default([](Operation *) { return false; });
}

/// The ops between an attention operand [B, H, T, D] and the [B, T, H, D] rows it was
/// transposed from: row-wise ops down to `transpose [0, 2, 1, 3]` leaves. False (and `chain`
/// as far as it got) when some path ends anywhere else.
bool collectChain(Value value, llvm::SetVector<Operation *> &chain) {
  Operation *op = value.getDefiningOp();
  if (!op || llvm::cast<RankedTensorType>(value.getType()).getRank() != 4)
    return false;
  if (chain.contains(op))
    return true;
  if (swapsSequenceAndHeads(op)) {
    chain.insert(op);
    return true;
  }
  if (!actsOnRows(op))
    return false;
  chain.insert(op);
  // A rope's and a norm's other operands are its tables and weights, not rows.
  if (llvm::isa<RopeOp, RmsNormOp, LayerNormOp>(op))
    return collectChain(op->getOperand(0), chain);
  return llvm::all_of(op->getOperands(), [&](Value v) { return collectChain(v, chain); });
}

/// Rebuilds an operand's chain on the rows: each op again with the heads' and sequence's axes
/// swapped (the rope's tables swapped to match).
Value rowsOf(Value value, PatternRewriter &rewriter, llvm::DenseMap<Value, Value> &built) {
  if (Value done = built.lookup(value))
    return done;
  Operation *op = value.getDefiningOp();
  if (swapsSequenceAndHeads(op))
    return built[value] = op->getOperand(0);
  llvm::SmallVector<Value> inputs;
  for (Value operand : op->getOperands())
    inputs.push_back(operand);
  auto type = llvm::cast<RankedTensorType>(value.getType());
  llvm::ArrayRef<int64_t> h = type.getShape();
  RankedTensorType rowsType = type.clone(Shape{h[0], h[2], h[1], h[3]});
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  Location loc = op->getLoc();
  auto rows = [&](Value v) { return rowsOf(v, rewriter, built); };
  Value result =
      llvm::TypeSwitch<Operation *, Value>(op)
          .Case<RopeOp>([&](RopeOp r) -> Value {
            return rewriter.create<RopeOp>(loc, rowsType, rows(r.getInput()),
                                           swapped(rewriter, loc, r.getCos()),
                                           swapped(rewriter, loc, r.getSin()));
          })
          .Case<RmsNormOp>([&](RmsNormOp n) -> Value {
            return rewriter.create<RmsNormOp>(loc, rowsType, rows(n.getInput()), n.getWeight(),
                                              n.getEpsilonAttr());
          })
          .Case<LayerNormOp>([&](LayerNormOp n) -> Value {
            return rewriter.create<LayerNormOp>(loc, rowsType, rows(n.getInput()), n.getWeight(),
                                                n.getBias(), n.getEpsilonAttr());
          })
          .Case<SliceOp>([&](SliceOp s) -> Value {
            auto swap = [](llvm::ArrayRef<int64_t> a) {
              return llvm::SmallVector<int64_t>{a[0], a[2], a[1], a[3]};
            };
            return rewriter.create<SliceOp>(loc, rowsType, rows(s.getInput()), swap(s.getStarts()),
                                            swap(s.getLimits()), swap(s.getStrides()));
          })
          .Case<ConcatOp>([&](ConcatOp c) -> Value {
            llvm::SmallVector<Value> parts;
            for (Value part : c.getInputs())
              parts.push_back(rows(part));
            return rewriter.create<ConcatOp>(loc, rowsType, parts, c.getAxisAttr());
          });
  return built[value] = result;
}

struct SequenceMajorAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp attention, PatternRewriter &rewriter) const override {
    if (attention.getSequenceMajor())
      return rewriter.notifyMatchFailure(attention, "already sequence-major");
    Value operands[] = {attention.getQuery(), attention.getKey(), attention.getValue()};
    // Each operand's chain back to its rows, if it has one; every op of them must serve only
    // these chains (and attention), so that the transposes and the old chains die.
    llvm::SetVector<Operation *> chain;
    bool fromRows[3];
    int copiesSaved = 0, copiesAdded = 0;
    for (int i = 0; i < 3; ++i) {
      llvm::SetVector<Operation *> own;
      fromRows[i] = collectChain(operands[i], own);
      if (fromRows[i])
        chain.insert(own.begin(), own.end());
      (fromRows[i] ? copiesSaved : copiesAdded) += 1;
    }
    for (Operation *op : chain)
      for (Operation *user : op->getUsers())
        if (user != attention.getOperation() && !chain.contains(user))
          return rewriter.notifyMatchFailure(attention, "the heads are read elsewhere too");
    bool resultFolds = llvm::all_of(attention.getResult().getUsers(), swapsSequenceAndHeads);
    (resultFolds ? copiesSaved : copiesAdded) += 1;
    // Each operand's and the result's copy is the same size (one layer's activations).
    if (copiesSaved <= copiesAdded)
      return rewriter.notifyMatchFailure(attention, "fewer transposes would go than come");

    Location loc = attention.getLoc();
    llvm::DenseMap<Value, Value> built;
    Value rows[3];
    for (int i = 0; i < 3; ++i)
      rows[i] =
          fromRows[i] ? rowsOf(operands[i], rewriter, built) : swapped(rewriter, loc, operands[i]);
    auto resultType = llvm::cast<RankedTensorType>(attention.getResult().getType());
    llvm::ArrayRef<int64_t> o = resultType.getShape();
    auto folded = rewriter.create<AttentionOp>(
        loc, resultType.clone(Shape{o[0], o[2], o[1], o[3]}),
        attention.getLse() ? attention.getLse().getType() : Type(), rows[0], rows[1], rows[2],
        attention.getKeySpan(), attention.getScaleAttr(), attention.getCausalAttr(),
        attention.getWindowAttr(), attention.getSoftcapAttr(), rewriter.getUnitAttr());
    folded->setDiscardableAttrs(attention->getDiscardableAttrDictionary());
    if (attention.getLse())
      rewriter.replaceAllUsesWith(attention.getLse(), folded.getLse());
    if (resultFolds) {
      for (Operation *user : llvm::make_early_inc_range(attention.getResult().getUsers()))
        rewriter.replaceOp(user, folded.getResult());
    } else {
      rewriter.replaceAllUsesWith(attention.getResult(),
                                  swapped(rewriter, loc, folded.getResult()));
    }
    rewriter.eraseOp(attention);
    return success();
  }
};

struct FoldAttentionLayoutPass : mt::impl::FoldAttentionLayoutPassBase<FoldAttentionLayoutPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<SequenceMajorAttention>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
