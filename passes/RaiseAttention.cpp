// mt-raise-attention: scaled dot-product attention with a causal mask (or a sliding window's
// band) becomes mt.attention, soft-capped logits (c * tanh(s / c), Gemma 2) included.
//
//   %s = mt.matmul %q, %k transpose_rhs ; %t = mt.mul %s, %scale
//   %u = mt.add %t, %causal_mask ; %p = mt.softmax %u axis = 3
//   %o = mt.matmul %p, %v
// becomes
//   %o = mt.attention %q, %k, %v scale = 0.35355339059327373 causal : (...) -> tensor<2x4x16x8xf32>
// Keys and values repeated for grouped-query heads (reshape [B,Hkv,1,S,D], expand
// [B,Hkv,n,S,D], reshape [B,Hkv*n,S,D]) are traced back to their Hkv heads. The forms of
// torch's scaled_dot_product_attention export are raised too: the scale split as a factor on
// q and on k^T, k^T as a transpose (of the last two axes, or of [B*H, S, D] between
// reshapes), and softmax's NaN guard where(is_nan(p), 0, p), which a causal row never trips.
// An mt.attention imported from opset 23's Attention node reads un-repeated heads the same way.
#include "passes/PatternMatchers.h"
#include "passes/Passes.h"

#include "mlir/IR/Matchers.h"

#define DEBUG_TYPE "mt-raise-attention"

namespace mt {
#define GEN_PASS_DEF_RAISEATTENTIONPASS
#include "passes/Passes.h.inc"
} // namespace mt

using namespace mlir;
using namespace mt;

namespace {

/// Masked-out scores: a fill at or below this is -inf for softmax in fp32 and bf16 alike.
constexpr double kMaskedScore = -1e4;

/// Heads [B, H, S, D] as the exporter wrote them: `source`, viewed through a transpose by
/// `permutation` or a reshape to `shape` where the exporter had neither (k^T transposed from
/// [B, S, H, D], or as [B*H, S, D]). Built only once the whole match succeeds.
struct Heads {
  Value source;
  Shape shape;
  llvm::SmallVector<int64_t, 4> permutation = {}; // empty: a reshape, if any

  static Heads of(Value value) {
    return {value, Shape(llvm::cast<RankedTensorType>(value.getType()).getShape())};
  }
  Value build(PatternRewriter &rewriter, Location loc) const {
    auto type = llvm::cast<RankedTensorType>(source.getType());
    if (!permutation.empty())
      return rewriter.create<TransposeOp>(loc, type.clone(shape), source,
                                          rewriter.getDenseI64ArrayAttr(permutation));
    if (type.getShape() == llvm::ArrayRef<int64_t>(shape))
      return source;
    return rewriter.create<ReshapeOp>(loc, type.clone(shape), source);
  }
};

/// The [B, Hkv, S, D] heads that a grouped-query repeat expanded into `heads`, else `heads`.
Heads unrepeatedHeads(const Heads &heads) {
  // Heads seen through a transpose keep it: the repeat below it is in another layout.
  if (!heads.permutation.empty())
    return heads;
  // Reshapes in a row are one reshape.
  Value expanded = heads.source;
  while (auto merge = expanded.getDefiningOp<ReshapeOp>())
    expanded = merge.getInput();
  auto expand = expanded.getDefiningOp<ExpandOp>();
  auto split = expand ? expand.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!split)
    return heads;
  llvm::ArrayRef<int64_t> kv = split.getInput().getType().getShape();
  llvm::ArrayRef<int64_t> repeated = expand.getType().getShape();
  llvm::ArrayRef<int64_t> merged = heads.shape;
  if (kv.size() != 4 || repeated.size() != 5 || merged.size() != 4 ||
      split.getType().getShape() != llvm::ArrayRef<int64_t>{kv[0], kv[1], 1, kv[2], kv[3]} ||
      repeated[0] != kv[0] || repeated[1] != kv[1] || repeated[3] != kv[2] ||
      repeated[4] != kv[3] || merged[1] != kv[1] * repeated[2])
    return heads;
  return Heads::of(split.getInput());
}

/// The forms a causal mask over [..., T, T] may take as a constant, where query i keeps
/// keys i - W < j <= i (a band of W keys, a sliding window; W = 0: every j <= i).
enum class Triangle {
  Kept,     // nonzero where kept, zero elsewhere: the scores a boolean keeps
  Dropped,  // its complement: the scores a boolean drops
  Additive, // 0 where kept, a masked score elsewhere: added to the scores
};

/// Whether an element of a `triangle` mask says its score is kept.
bool keeps(Triangle triangle, double value) {
  return triangle == Triangle::Kept ? value != 0 : value == 0;
}

bool holds(Triangle triangle, int64_t window, int64_t i, int64_t j, double value) {
  bool kept = j <= i && (window == 0 || i - j < window);
  if (triangle == Triangle::Additive && !kept)
    return value <= kMaskedScore;
  return keeps(triangle, value) == kept;
}

/// Masks already checked in this run of the pass, with the window found: a mask is one
/// uniqued attribute however many layers read it (a 2048 x 2048 triangle is 4M elements; a
/// 108-layer model reads it 108 times).
llvm::DenseMap<std::tuple<const void *, int64_t, int>, std::optional<int64_t>> &checkedMasks() {
  static llvm::DenseMap<std::tuple<const void *, int64_t, int>, std::optional<int64_t>> checked;
  return checked;
}

/// The window W of `values`, row-major over [..., T, T], when every [T, T] slice is the
/// `triangle` of W (0: the whole triangle, or a window as wide); else nothing. The last
/// query's first kept key tells W.
template <typename Range>
std::optional<int64_t> windowOf(Range values, int64_t t, Triangle triangle) {
  int64_t firstKept = t, n = 0;
  for (auto value : values) {
    if (n >= (t - 1) * t && keeps(triangle, static_cast<double>(value))) {
      firstKept = n - (t - 1) * t;
      break;
    }
    if (++n == t * t)
      break;
  }
  if (firstKept == t)
    return std::nullopt;
  int64_t window = firstKept == 0 ? 0 : t - firstKept;
  int64_t i = 0, j = 0;
  for (auto value : values) {
    if (!holds(triangle, window, i, j, static_cast<double>(value)))
      return std::nullopt;
    if (++j == t) {
      j = 0;
      i = i + 1 == t ? 0 : i + 1;
    }
  }
  return window;
}

/// The window (0: none) when the constant `mask`, broadcast over [..., T, T], is a causal
/// `triangle` everywhere; else nothing.
std::optional<int64_t> causalWindow(Value mask, int64_t t, Triangle triangle) {
  DenseElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)))
    return std::nullopt;
  llvm::ArrayRef<int64_t> shape = attr.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 1] != t || shape[shape.size() - 2] != t)
    return std::nullopt;
  if (attr.isSplat() && t > 1) // a triangle differs below and above its diagonal
    return std::nullopt;
  auto key = std::make_tuple(attr.getAsOpaquePointer(), t, static_cast<int>(triangle));
  if (auto it = checkedMasks().find(key); it != checkedMasks().end())
    return it->second;
  Type element = attr.getElementType();
  std::optional<int64_t> result;
  if (element.isF32())
    result = windowOf(attr.getValues<float>(), t, triangle);
  else if (element.isF64())
    result = windowOf(attr.getValues<double>(), t, triangle);
  else if (llvm::isa<FloatType>(element))
    result = windowOf(llvm::map_range(attr.getValues<APFloat>(),
                                      [](const APFloat &v) { return v.convertToDouble(); }),
                      t, triangle);
  else if (element.isInteger(1))
    result = windowOf(attr.getValues<bool>(), t, triangle);
  else if (element.isInteger(64))
    result = windowOf(attr.getValues<int64_t>(), t, triangle);
  else
    result = windowOf(llvm::map_range(attr.getValues<APInt>(),
                                      [](const APInt &v) { return v.isZero() ? 0.0 : 1.0; }),
                      t, triangle);
  checkedMasks()[key] = result;
  return result;
}

/// Which scores a mask keeps: those at or below the diagonal when `causal` (within `window`
/// keys of it when that is set), and where a padding mask input [B, S] is set, those of each
/// sequence's tokens.
struct Mask {
  bool causal = false;
  BlockArgument padding = nullptr;
  int64_t window = 0;
};

/// A function's integer input [B, S] read as booleans [B, 1, 1, S] (a cast to i1 and reshapes,
/// which keep the row-major order) over scores [B, H, T, S]; else null.
BlockArgument paddingInput(Value view, llvm::ArrayRef<int64_t> scores) {
  if (llvm::cast<RankedTensorType>(view.getType()).getShape() !=
      llvm::ArrayRef<int64_t>{scores[0], 1, 1, scores[3]})
    return nullptr;
  Value source = view;
  while (true) {
    if (auto reshape = source.getDefiningOp<ReshapeOp>())
      source = reshape.getInput();
    else if (auto cast = source.getDefiningOp<CastOp>();
             cast && getElementTypeOrSelf(cast.getType()).isInteger(1) &&
             llvm::isa<IntegerType>(getElementTypeOrSelf(cast.getInput().getType())))
      source = cast.getInput();
    else
      break;
  }
  auto input = llvm::dyn_cast<BlockArgument>(source);
  if (!input || !llvm::isa<func::FuncOp>(input.getOwner()->getParentOp()) ||
      !llvm::isa<IntegerType>(getElementTypeOrSelf(input.getType())) ||
      llvm::cast<RankedTensorType>(input.getType()).getShape() !=
          llvm::ArrayRef<int64_t>{scores[0], scores[3]})
    return nullptr;
  return input;
}

/// The mask of `keep` (true where a score counts, over scores [B, H, T, T]): the causal triangle, a
/// padding input, or both joined as where(x, y, false); else nothing.
std::optional<Mask> keptScores(Value keep, llvm::ArrayRef<int64_t> scores) {
  auto causal = [&](Value value) { return causalWindow(value, scores[3], Triangle::Kept); };
  if (std::optional<int64_t> window = causal(keep))
    return Mask{true, nullptr, *window};
  if (BlockArgument padding = paddingInput(keep, scores))
    return Mask{false, padding};
  auto both = keep.getDefiningOp<WhereOp>();
  if (!both || !isScalarConstant(both.getFalseValue(), 0.0))
    return std::nullopt;
  for (bool swapped : {false, true}) {
    Value triangle = swapped ? both.getTrueValue() : both.getCondition();
    Value view = swapped ? both.getCondition() : both.getTrueValue();
    if (BlockArgument padding = paddingInput(view, scores))
      if (std::optional<int64_t> window = causal(triangle))
        return Mask{true, padding, *window};
  }
  return std::nullopt;
}

/// For masked scores [B, H, T, T], the scores before the mask and what it keeps; nothing when no
/// mask (or one of another kind) applies.
std::optional<std::pair<Value, Mask>> unmaskedScores(Value masked) {
  llvm::ArrayRef<int64_t> shape = llvm::cast<RankedTensorType>(masked.getType()).getShape();
  if (shape[2] != shape[3])
    return std::nullopt;
  // A fill where not kept, as the scores' own where(keep, scores, fill) or an added where(keep, 0,
  // fill); either mirrored.
  auto filled = [&](WhereOp where, auto &&kept) -> std::optional<Mask> {
    for (bool keepFirst : {true, false}) {
      Value fill = keepFirst ? where.getFalseValue() : where.getTrueValue();
      Value other = keepFirst ? where.getTrueValue() : where.getFalseValue();
      std::optional<double> fillValue = scalarConstant(fill);
      if (!fillValue || *fillValue > kMaskedScore || !kept(other))
        continue;
      if (keepFirst)
        return keptScores(where.getCondition(), shape);
      // Mirrored: only the causal triangle, whose complement is a constant too.
      if (std::optional<int64_t> window =
              causalWindow(where.getCondition(), shape[3], Triangle::Dropped))
        return Mask{true, nullptr, *window};
    }
    return std::nullopt;
  };
  if (auto add = masked.getDefiningOp<AddOp>()) {
    for (bool swapped : {false, true}) {
      auto [scores, mask] = operandOrder(add, swapped);
      if (std::optional<int64_t> window = causalWindow(mask, shape[3], Triangle::Additive))
        return std::make_pair(scores, Mask{true, nullptr, *window});
      auto where = mask.getDefiningOp<WhereOp>();
      if (!where || llvm::cast<RankedTensorType>(scores.getType()).getShape() != shape)
        continue;
      if (std::optional<Mask> kept =
              filled(where, [](Value zero) { return isScalarConstant(zero, 0.0); }))
        return std::make_pair(scores, *kept);
    }
    return std::nullopt;
  }
  auto where = masked.getDefiningOp<WhereOp>();
  Value scores;
  if (!where)
    return std::nullopt;
  std::optional<Mask> kept = filled(where, [&](Value value) {
    scores = value;
    return llvm::cast<RankedTensorType>(value.getType()).getShape() == shape;
  });
  if (!kept)
    return std::nullopt;
  return std::make_pair(scores, *kept);
}

/// For x times a scalar constant, x and the factor; else `value` and 1.
std::pair<Value, double> unscaledOperand(Value value) {
  if (auto mul = value.getDefiningOp<MulOp>())
    for (bool swapped : {false, true}) {
      auto [x, factor] = operandOrder(mul, swapped);
      if (std::optional<double> scale = scalarConstant(factor);
          scale && llvm::cast<RankedTensorType>(x.getType()) == mul.getType())
        return {x, *scale};
    }
  return {value, 1.0};
}

/// For scores times a scalar (or divided by one), the scores and the factor.
std::pair<Value, double> unscaledScores(Value scaled) {
  if (auto div = scaled.getDefiningOp<DivOp>())
    if (std::optional<double> divisor = scalarConstant(div.getRhs()))
      return {div.getLhs(), 1.0 / *divisor};
  return unscaledOperand(scaled);
}

/// For logits soft-capped as c * tanh(s / c) (the division as a product by 1 / c, either
/// factor on either side), s and c; else nothing.
std::optional<std::pair<Value, double>> uncappedScores(Value capped) {
  auto [bounded, cap] = unscaledOperand(capped);
  auto tanh = bounded.getDefiningOp<TanhOp>();
  if (!tanh || !(cap > 0.0))
    return std::nullopt;
  auto [scores, inverse] = unscaledScores(tanh.getInput());
  if (std::abs(inverse * cap - 1.0) > 1e-6)
    return std::nullopt;
  return std::make_pair(scores, cap);
}

/// For k^T [B, H, D, S] written as a transpose of k [B, H, S, D] (of any 4-D tensor, or of
/// [B*H, S, D] between reshapes), k; else nothing.
std::optional<Heads> keyOfTransposed(Value transposed) {
  llvm::ArrayRef<int64_t> kt = llvm::cast<RankedTensorType>(transposed.getType()).getShape();
  if (kt.size() != 4)
    return std::nullopt;
  if (auto t = transposed.getDefiningOp<TransposeOp>()) {
    // k^T = transpose(x, p) makes k = transpose(x, p with its last two axes swapped).
    llvm::ArrayRef<int64_t> p = t.getPermutation();
    llvm::SmallVector<int64_t, 4> key = {p[0], p[1], p[3], p[2]};
    if (key == llvm::ArrayRef<int64_t>{0, 1, 2, 3})
      return Heads::of(t.getInput());
    return Heads{t.getInput(), Shape{kt[0], kt[1], kt[3], kt[2]}, key};
  }
  auto merge = transposed.getDefiningOp<ReshapeOp>();
  auto t = merge ? merge.getInput().getDefiningOp<TransposeOp>() : TransposeOp();
  if (!t || t.getPermutation() != llvm::ArrayRef<int64_t>{0, 2, 1})
    return std::nullopt;
  llvm::ArrayRef<int64_t> flat = t.getInput().getType().getShape();
  if (flat[0] != kt[0] * kt[1] || flat[1] != kt[3] || flat[2] != kt[2])
    return std::nullopt;
  return Heads{t.getInput(), Shape{kt[0], kt[1], kt[3], kt[2]}};
}

/// The probabilities p of softmax's NaN guard where(is_nan(p), 0, p); else `value`.
Value unguarded(Value value) {
  auto where = value.getDefiningOp<WhereOp>();
  auto isNan = where ? where.getCondition().getDefiningOp<IsNanOp>() : IsNanOp();
  if (isNan && isNan.getInput() == where.getFalseValue() &&
      isScalarConstant(where.getTrueValue(), 0.0) && where.getType() == isNan.getInput().getType())
    return where.getFalseValue();
  return value;
}

/// The span of tokens of each sequence of a padding input, computed once, before `use` and
/// every other attention that reads it. A span stands for the mask only when each row's
/// tokens are one run (left padding, tokens, right padding), so the input is marked
/// `mt.token_span`: the plan records it and the runtime refuses any other mask.
Value keySpanOf(BlockArgument padding, Operation *use, PatternRewriter &rewriter) {
  for (Operation *user : padding.getUsers())
    if (auto span = llvm::dyn_cast<KeySpanOp>(user)) {
      // Patterns run in no particular order: the first use in the block decides.
      if (use->isBeforeInBlock(span))
        rewriter.moveOpBefore(span, use);
      return span;
    }
  auto function = llvm::cast<func::FuncOp>(padding.getOwner()->getParentOp());
  rewriter.modifyOpInPlace(function, [&] {
    function.setArgAttr(padding.getArgNumber(), "mt.token_span", rewriter.getUnitAttr());
  });
  int64_t batch = llvm::cast<RankedTensorType>(padding.getType()).getDimSize(0);
  return rewriter.create<KeySpanOp>(
      padding.getLoc(), RankedTensorType::get({batch, 2}, rewriter.getI64Type()), padding);
}

struct SoftmaxAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp output, PatternRewriter &rewriter) const override {
    auto softmax = unguarded(output.getLhs()).getDefiningOp<SoftmaxOp>();
    if (!softmax || output.getTransposeLhs() || output.getTransposeRhs() || output.getAddend() ||
        softmax.getAxis() != softmax.getType().getRank() - 1 || softmax.getType().getRank() != 4)
      return rewriter.notifyMatchFailure(output, "not softmax(scores) @ v over 4-D heads");
    Value scores = softmax.getInput();
    Mask mask;
    if (std::optional<std::pair<Value, Mask>> unmasked = unmaskedScores(scores))
      std::tie(scores, mask) = *unmasked;
    bool causal = mask.causal;
    std::optional<double> softcap;
    if (std::optional<std::pair<Value, double>> uncapped = uncappedScores(scores))
      std::tie(scores, softcap) = *uncapped;
    auto [raw, scale] = unscaledScores(scores);
    auto product = raw.getDefiningOp<MatmulOp>();
    // A mask that is not causal (or any other op on the scores) stops the match here.
    if (!product || product.getTransposeLhs() || product.getAddend())
      return rewriter.notifyMatchFailure(output, "scores are not q @ k^T (after scale and mask)");
    auto [query, queryScale] = unscaledOperand(product.getLhs());
    auto [keyOperand, keyScale] = unscaledOperand(product.getRhs());
    std::optional<Heads> repeatedKey = product.getTransposeRhs()
                                           ? std::optional<Heads>(Heads::of(keyOperand))
                                           : keyOfTransposed(keyOperand);
    if (!repeatedKey)
      return rewriter.notifyMatchFailure(output, "scores are not q @ k^T (after scale and mask)");
    scale *= queryScale * keyScale;
    Heads repeatedValue = Heads::of(output.getRhs());
    auto formsAttention = [&](const Heads &key, const Heads &value) {
      FailureOr<Shape> shape = attentionShape(
          llvm::cast<RankedTensorType>(query.getType()).getShape(), key.shape, value.shape, causal,
          /*sequenceMajor=*/false, [] { return InFlightDiagnostic(); });
      return succeeded(shape) && llvm::ArrayRef<int64_t>(*shape) == output.getType().getShape();
    };
    Heads key = unrepeatedHeads(*repeatedKey), value = unrepeatedHeads(repeatedValue);
    // Repeated heads of different group sizes for k and v: use them as repeated.
    if (!formsAttention(key, value)) {
      key = *repeatedKey;
      value = repeatedValue;
      if (!formsAttention(key, value))
        return rewriter.notifyMatchFailure(output, "q, k, v shapes do not form attention");
    }
    Location loc = output.getLoc();
    Value keySpan = mask.padding ? keySpanOf(mask.padding, output, rewriter) : Value();
    rewriter.replaceOpWithNewOp<AttentionOp>(
        output, output.getType(), Type(), query, key.build(rewriter, loc),
        value.build(rewriter, loc), keySpan, rewriter.getF64FloatAttr(scale),
        causal ? rewriter.getUnitAttr() : UnitAttr(),
        mask.window ? rewriter.getI64IntegerAttr(mask.window) : IntegerAttr(),
        softcap ? rewriter.getF64FloatAttr(*softcap) : FloatAttr(), UnitAttr());
    return success();
  }
};

/// mt.attention of keys and values repeated for grouped-query heads (opset 23's Attention
/// node reads them as transformers' repeat_kv wrote them) reads their Hkv heads instead.
struct UnrepeatedAttentionHeads : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp attention, PatternRewriter &rewriter) const override {
    if (attention.getSequenceMajor()) // heads at axis 2: not the repeats this reads
      return rewriter.notifyMatchFailure(attention, "sequence-major");
    Heads key = unrepeatedHeads(Heads::of(attention.getKey()));
    Heads value = unrepeatedHeads(Heads::of(attention.getValue()));
    if (key.source == attention.getKey() || value.source == attention.getValue() ||
        key.shape[1] != value.shape[1])
      return rewriter.notifyMatchFailure(attention, "keys and values are not both repeated");
    rewriter.modifyOpInPlace(attention, [&] {
      attention.getKeyMutable().assign(key.source);
      attention.getValueMutable().assign(value.source);
    });
    return success();
  }
};

struct RaiseAttentionPass : mt::impl::RaiseAttentionPassBase<RaiseAttentionPass> {
  void runOnOperation() override {
    checkedMasks().clear(); // the attributes of another run may share these addresses
    if (failed(applyRaisePatterns<SoftmaxAttention, UnrepeatedAttentionHeads>(getOperation())))
      signalPassFailure();
    checkedMasks().clear();
  }
};

} // namespace
