// mt-raise-gelu: the erf and tanh forms of GELU that exporters write out become mt.gelu.
//
//   %a = mt.div %x, %sqrt2 ; %e = mt.erf %a ; %p = mt.add %e, %one
//   %m = mt.mul %x, %p     ; %y = mt.mul %m, %half
// becomes
//   %y = mt.gelu %x : tensor<2x16x128xf32>
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#include <cmath>

#define DEBUG_TYPE "mt-raise-gelu"

namespace mt {
#define GEN_PASS_DEF_RAISEGELUPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// The leaves of a product tree: the factors of `value` through single-use products.
void collectFactors(Value value, bool isRoot, llvm::SmallVectorImpl<Value> &factors) {
  auto mul = value.getDefiningOp<MulOp>();
  if (!mul || (!isRoot && !mul->hasOneUse()) || factors.size() > 3) {
    factors.push_back(value);
    return;
  }
  collectFactors(mul.getLhs(), false, factors);
  collectFactors(mul.getRhs(), false, factors);
}

/// True when `value` is x * c or c * x (or x / (1 / c)) for the scalar constant c.
bool isScaled(Value value, Value x, double c) {
  if (auto div = value.getDefiningOp<DivOp>())
    return div.getLhs() == x && isScalarConstant(div.getRhs(), 1.0 / c);
  auto mul = value.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  for (bool swapped : {false, true}) {
    auto [a, b] = operandOrder(mul, swapped);
    if (a == x && isScalarConstant(b, c))
      return true;
  }
  return false;
}

/// True when `value` is x ** 3 written as a pow or as products.
bool isCube(Value value, Value x) {
  if (auto pow = value.getDefiningOp<PowOp>())
    return pow.getLhs() == x && isScalarConstant(pow.getRhs(), 3.0);
  auto mul = value.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  for (bool swapped : {false, true}) {
    auto [a, b] = operandOrder(mul, swapped);
    if (a == x && squareOf(b) == x)
      return true;
  }
  return false;
}

/// sqrt(2 / pi) * (x + 0.044715 * x ** 3), the argument of tanh in the approximation.
bool isTanhArgument(Value value, Value x) {
  auto mul = value.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  for (bool swapped : {false, true}) {
    auto [beta, sum] = operandOrder(mul, swapped);
    auto add = sum.getDefiningOp<AddOp>();
    if (!isScalarConstant(beta, std::sqrt(2.0 / M_PI)) || !add)
      continue;
    for (bool addSwapped : {false, true}) {
      auto [linear, cubic] = operandOrder(add, addSwapped);
      auto scaled = cubic.getDefiningOp<MulOp>();
      if (linear != x || !scaled)
        continue;
      for (bool cubeSwapped : {false, true}) {
        auto [kappa, cube] = operandOrder(scaled, cubeSwapped);
        if (isScalarConstant(kappa, 0.044715) && isCube(cube, x))
          return true;
      }
    }
  }
  return false;
}

/// "none" or "tanh" when `value` is 1 + erf(x / sqrt 2) or 1 + tanh(...) of this x.
std::optional<StringRef> geluFactorForm(Value value, Value x) {
  auto add = value.getDefiningOp<AddOp>();
  if (!add)
    return std::nullopt;
  for (bool swapped : {false, true}) {
    auto [one, curve] = operandOrder(add, swapped);
    if (!isScalarConstant(one, 1.0))
      continue;
    if (auto erf = curve.getDefiningOp<ErfOp>(); erf && isScaled(erf.getInput(), x, M_SQRT1_2))
      return StringRef("none");
    if (auto tanh = curve.getDefiningOp<TanhOp>(); tanh && isTanhArgument(tanh.getInput(), x))
      return StringRef("tanh");
  }
  return std::nullopt;
}

struct GeluProduct : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    llvm::SmallVector<Value, 4> factors;
    collectFactors(mul, /*isRoot=*/true, factors);
    if (factors.size() != 3)
      return rewriter.notifyMatchFailure(mul, "not a product of three factors");
    // Try each factor as x; the other two must be 0.5 and the (1 + erf/tanh) term.
    for (int i = 0; i < 3; ++i) {
      Value x = factors[i], a = factors[(i + 1) % 3], b = factors[(i + 2) % 3];
      if (x.getType() != mul.getType())
        continue;
      for (auto [half, curve] : {std::make_pair(a, b), std::make_pair(b, a)}) {
        std::optional<StringRef> form = geluFactorForm(curve, x);
        if (!form || !isScalarConstant(half, 0.5))
          continue;
        rewriter.replaceOpWithNewOp<GeluOp>(mul, x, rewriter.getStringAttr(*form));
        return success();
      }
    }
    return rewriter.notifyMatchFailure(mul, "not x * 0.5 * (1 + erf or tanh(...))");
  }
};

struct RaiseGeluPass : mt::impl::RaiseGeluPassBase<RaiseGeluPass> {
  void runOnOperation() override {
    if (failed(applyRaisePatterns<GeluProduct>(getOperation())))
      signalPassFailure();
  }
};

} // namespace
