// mt-raise-rope: rotary position embedding in the rotate-half form becomes mt.rope.
//
//   %lo = mt.slice %x ... [0, D/2) ; %hi = mt.slice %x ... [D/2, D)
//   %r = mt.concat (mt.neg %hi), %lo axis = 3
//   %y = mt.add (mt.mul %x, %cos), (mt.mul %r, %sin)
// becomes
//   %y = mt.rope %x, %cos, %sin : (...) -> tensor<2x4x16x8xf32>
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#define DEBUG_TYPE "mt-raise-rope"

namespace mt {
#define GEN_PASS_DEF_RAISEROPEPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// The x of a slice that keeps [begin, begin + D/2) of x's last axis and all of the others.
Value halfOf(Value value, bool upper) {
  auto slice = value.getDefiningOp<SliceOp>();
  if (!slice)
    return nullptr;
  llvm::ArrayRef<int64_t> shape = slice.getInput().getType().getShape();
  int64_t last = shape.size() - 1, half = shape[last] / 2;
  if (shape[last] % 2 != 0)
    return nullptr;
  for (int64_t d = 0; d <= last; ++d) {
    int64_t start = d == last && upper ? half : 0;
    int64_t limit = d == last && !upper ? half : shape[d];
    if (slice.getStarts()[d] != start || slice.getLimits()[d] != limit ||
        slice.getStrides()[d] != 1)
      return nullptr;
  }
  return slice.getInput();
}

/// x for concat(-x[..., D/2:], x[..., :D/2]) on the last axis.
Value rotatedHalvesOf(Value value) {
  auto concat = value.getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2 ||
      concat.getAxis() != concat.getType().getRank() - 1)
    return nullptr;
  auto neg = concat.getInputs()[0].getDefiningOp<NegOp>();
  if (!neg)
    return nullptr;
  Value x = halfOf(neg.getInput(), /*upper=*/true);
  return x && halfOf(concat.getInputs()[1], /*upper=*/false) == x ? x : nullptr;
}

struct RotateHalf : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (bool swapped : {false, true}) {
      auto [cosTerm, sinTerm] = operandOrder(add, swapped);
      auto cosMul = cosTerm.getDefiningOp<MulOp>();
      auto sinMul = sinTerm.getDefiningOp<MulOp>();
      if (!cosMul || !sinMul)
        continue;
      for (bool sinSwapped : {false, true}) {
        auto [rotated, sin] = operandOrder(sinMul, sinSwapped);
        Value x = rotatedHalvesOf(rotated);
        if (!x || x.getType() != add.getType())
          continue;
        for (bool cosSwapped : {false, true}) {
          auto [input, cos] = operandOrder(cosMul, cosSwapped);
          auto shape = add.getType().getShape();
          if (input != x || !broadcastsTo(llvm::cast<RankedTensorType>(cos.getType()).getShape(), shape) ||
              !broadcastsTo(llvm::cast<RankedTensorType>(sin.getType()).getShape(), shape))
            continue;
          rewriter.replaceOpWithNewOp<RopeOp>(add, add.getType(), x, cos, sin);
          return success();
        }
      }
    }
    return rewriter.notifyMatchFailure(add, "not x * cos + rotate_half(x) * sin");
  }
};

struct RaiseRopePass : mt::impl::RaiseRopePassBase<RaiseRopePass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<RotateHalf>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
