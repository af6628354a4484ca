// The fused transformer kernels: embedding lookup, rotary embedding and grouped-query
// attention, with the gradients of the last two. Attention runs one (batch, query head) per
// task over the cores; key and value gradients go to per-head buffers summed in head order
// afterwards, so that the result does not depend on the thread split.
#include "runtime/host/KernelSupport.h"

#include <cmath>
#include <limits>

namespace mt::host::detail {
namespace {

template <typename T>
void embedding(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  const Shape &table = args.in(0).shape;
  if (table.size() != 2)
    args.fail("the table must have rank 2");
  int64_t vocabulary = table[0], d = table[1];
  const std::vector<int64_t> &ids = args.ints(1);
  if (args.out(0).size() != static_cast<int64_t>(ids.size()) * d)
    args.fail("the result is not [..., " + std::to_string(d) + "] over the ids");
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocabulary)
      args.fail("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                " is outside the table of " + std::to_string(vocabulary) + " rows");
  const std::vector<T> &rows = args.reals(0);
  std::vector<T> &out = args.realResult(0);
  for (size_t i = 0; i < ids.size(); ++i)
    std::copy_n(rows.begin() + ids[i] * d, d, out.begin() + static_cast<int64_t>(i) * d);
}

/// mt.rope (x * cos + rotate_half(x) * sin) or, with `transposed`, mt.rope_grad
/// (g * cos + rotate_half^T(g * sin), where rotate_half^T(y) = concat(y[D/2:], -y[:D/2])).
template <typename T>
void rope(const Args<T> &args, bool transposed) {
  args.expectCounts(3, 3, 1);
  const Shape &shape = args.in(0).shape;
  if (shape.empty() || shape.back() % 2 != 0)
    args.fail("the last axis must exist and have an even size");
  if (args.out(0).shape != shape)
    args.fail("the result's shape differs from the input's");
  int64_t d = shape.back(), half = d / 2;
  std::array<std::vector<int64_t>, 2> strides = {args.broadcastStrides(args.in(1).shape, shape),
                                                 args.broadcastStrides(args.in(2).shape, shape)};
  int64_t sinStep = strides[1].back() * half;
  const std::vector<T> &x = args.reals(0), &cos = args.reals(1), &sin = args.reals(2);
  std::vector<T> &out = args.realResult(0);
  walk(shape, strides, [&](int64_t i, const std::array<int64_t, 2> &at) {
    bool low = i % d < half;
    double rotated;
    if (!transposed)
      rotated = (low ? -static_cast<double>(x[i + half]) : static_cast<double>(x[i - half])) *
                static_cast<double>(sin[at[1]]);
    else if (low)
      rotated = static_cast<double>(x[i + half]) * static_cast<double>(sin[at[1] + sinStep]);
    else
      rotated = -static_cast<double>(x[i - half]) * static_cast<double>(sin[at[1] - sinStep]);
    out[i] = static_cast<T>(static_cast<double>(x[i]) * static_cast<double>(cos[at[0]]) +
                            rotated);
  });
}

struct AttentionShape : AttentionExtents {
  double scale;
  bool causal;
  const int64_t *keySpan; // each sequence's tokens [first, end) (the rest is padding); null: all
  int64_t window;         // a sliding window's keys; 0: none
  double softcap;         // the logits' cap; 0: none

  int64_t kvHead(int64_t head) const { return head / (queryHeads / kvHeads); }
  /// Keys [firstVisible, visible) that query `query` of sequence `b` attends to.
  int64_t visible(int64_t b, int64_t query) const {
    int64_t seen = causal ? std::min(keys, query + 1) : keys;
    return keySpan ? std::min(seen, keySpan[2 * b + 1]) : seen;
  }
  int64_t firstVisible(int64_t b, int64_t query) const {
    int64_t first = window > 0 ? std::max<int64_t>(0, query + 1 - window) : 0;
    return keySpan ? std::max(first, keySpan[2 * b]) : first;
  }
  /// The logit of a key whose query . key product is `dot`.
  double logit(double dot) const {
    double s = dot * scale;
    return softcap > 0 ? softcap * std::tanh(s / softcap) : s;
  }
  /// d logit / d (scale * dot), from the logit.
  double slope(double logit) const {
    return softcap > 0 ? 1.0 - (logit / softcap) * (logit / softcap) : 1.0;
  }
};

/// The attention's shape; its key span, if any, is operand `spanOperand`.
template <typename T> AttentionShape attentionShape(const Args<T> &args, size_t spanOperand) {
  AttentionExtents e{};
  if (std::string error = attentionExtents(args.in(0).shape, args.in(1).shape, args.in(2).shape,
                                           args.flag("sequence_major"), e);
      !error.empty())
    args.fail(error);
  AttentionShape a{e,
                   args.attrFloat("scale"),
                   args.flag("causal"),
                   nullptr,
                   args.find("window") ? args.attrInt("window") : 0,
                   args.find("softcap") ? args.attrFloat("softcap") : 0.0};
  if (args.operands.size() > spanOperand) {
    const std::vector<int64_t> &span = args.ints(spanOperand);
    if (std::string error = keySpanError(args.in(spanOperand).shape, e, span.data());
        !error.empty())
      args.fail(error);
    a.keySpan = span.data();
  }
  return a;
}

/// `count` rows of `width` elements, `stride` apart, transposed into double [width, count].
template <typename T>
void transposeToDouble(const T *rows, int64_t count, int64_t width, int64_t stride,
                       std::vector<double> &out) {
  out.resize(static_cast<size_t>(count * width));
  for (int64_t j = 0; j < count; ++j)
    for (int64_t c = 0; c < width; ++c)
      out[c * count + j] = static_cast<double>(rows[j * stride + c]);
}

/// The keys [from, to) one query row sees.
struct KeyRange {
  int64_t from, to;
};

/// Fills s[from, to) with the logits of one query row against keysT (double [depth, keys]),
/// and slopes[from, to) with their slopes under a soft cap; returns the keys [from, to) the
/// row sees.
template <typename T>
KeyRange logits(const AttentionShape &a, const T *query, const std::vector<double> &keysT,
                int64_t b, int64_t row, double *s, double *slopes) {
  KeyRange r{a.firstVisible(b, row), a.visible(b, row)};
  if (r.to <= r.from)
    return {0, 0};
  std::fill(s + r.from, s + r.to, 0.0);
  for (int64_t c = 0; c < a.depth; ++c) {
    double qc = static_cast<double>(query[c]);
    const double *kc = keysT.data() + c * a.keys;
    for (int64_t j = r.from; j < r.to; ++j)
      s[j] += qc * kc[j];
  }
  for (int64_t j = r.from; j < r.to; ++j) {
    s[j] = a.logit(s[j]);
    slopes[j] = a.slope(s[j]);
  }
  return r;
}

template <typename T>
void attention(const Args<T> &args) {
  args.expectCounts(3, 4, 1, 2);
  AttentionShape a = attentionShape(args, 3);
  if (args.out(0).shape != a.resultShape())
    args.fail("the result is not " + shapes::format(a.resultShape()) + " (attention's layout)");
  T *lse = nullptr;
  if (args.results.size() == 2) {
    if (std::string error = shapes::attentionLse(args.out(1).shape, a); !error.empty())
      args.fail(error);
    lse = args.realResult(1).data();
  }
  const T *q = args.reals(0).data(), *k = args.reals(1).data(), *v = args.reals(2).data();
  T *out = args.realResult(0).data();
  double work = static_cast<double>(a.queries * a.keys * (a.depth + a.valueDepth));
  parallelFor(a.batch * a.queryHeads, work, [&](int64_t begin, int64_t end) {
    std::vector<double> keysT, p(static_cast<size_t>(a.keys)), slopes(p.size()),
        acc(static_cast<size_t>(a.valueDepth));
    for (int64_t task = begin; task < end; ++task) {
      int64_t b = task / a.queryHeads, kv = b * a.kvHeads + a.kvHead(task % a.queryHeads);
      transposeToDouble(k + a.keyRow(kv, 0, a.depth), a.keys, a.depth, a.keyStride(a.depth), keysT);
      const T *values = v + a.keyRow(kv, 0, a.valueDepth);
      int64_t valueStride = a.keyStride(a.valueDepth);
      for (int64_t i = 0; i < a.queries; ++i) {
        KeyRange r =
            logits(a, q + a.queryRow(task, i, a.depth), keysT, b, i, p.data(), slopes.data());
        double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
        for (int64_t j = r.from; j < r.to; ++j)
          max = std::max(max, p[j]);
        for (int64_t j = r.from; j < r.to; ++j)
          sum += p[j] = std::exp(p[j] - max);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = r.from; j < r.to; ++j)
          for (int64_t c = 0; c < a.valueDepth; ++c)
            acc[c] += p[j] / sum * static_cast<double>(values[j * valueStride + c]);
        T *row = out + a.queryRow(task, i, a.valueDepth);
        for (int64_t c = 0; c < a.valueDepth; ++c)
          row[c] = static_cast<T>(acc[c]);
        if (lse) // a row that sees no key: 0
          lse[task * a.queries + i] = static_cast<T>(r.to > r.from ? max + std::log(sum) : 0.0);
      }
    }
  });
}

template <typename T>
void attentionGrad(const Args<T> &args) {
  args.expectCounts(6, 7, 3);
  AttentionShape a = attentionShape(args, 6);
  if (args.in(3).shape != a.resultShape())
    args.fail("the grad is not " + shapes::format(a.resultShape()) + " (attention's layout)");
  if (args.in(4).shape != args.in(3).shape)
    args.fail("the forward's output differs in shape from the grad");
  if (std::string error = shapes::attentionLse(args.in(5).shape, a); !error.empty())
    args.fail(error);
  for (size_t r = 0; r < 3; ++r)
    if (args.out(r).shape != args.in(r).shape)
      args.fail("result " + std::to_string(r) + " differs in shape from operand " +
                std::to_string(r));
  const T *q = args.reals(0).data(), *k = args.reals(1).data(), *v = args.reals(2).data(),
          *g = args.reals(3).data(), *out = args.reals(4).data(), *lse = args.reals(5).data();
  T *dq = args.realResult(0).data();
  int64_t keySize = a.keys * a.depth, valueSize = a.keys * a.valueDepth;
  int64_t heads = a.batch * a.queryHeads;
  std::vector<double> dkHeads(static_cast<size_t>(heads * keySize), 0.0);
  std::vector<double> dvHeads(static_cast<size_t>(heads * valueSize), 0.0);
  double work = static_cast<double>(a.queries * a.keys * (3 * a.depth + 2 * a.valueDepth));
  parallelFor(heads, work, [&](int64_t begin, int64_t end) {
    std::vector<double> keysT, valuesT, p(static_cast<size_t>(a.keys)), slopes(p.size()),
        dp(p.size()), acc(static_cast<size_t>(a.depth));
    for (int64_t task = begin; task < end; ++task) {
      int64_t b = task / a.queryHeads, kv = b * a.kvHeads + a.kvHead(task % a.queryHeads);
      const T *keys = k + a.keyRow(kv, 0, a.depth);
      int64_t keyStride = a.keyStride(a.depth);
      transposeToDouble(keys, a.keys, a.depth, keyStride, keysT);
      transposeToDouble(v + a.keyRow(kv, 0, a.valueDepth), a.keys, a.valueDepth,
                        a.keyStride(a.valueDepth), valuesT);
      double *dk = dkHeads.data() + task * keySize, *dv = dvHeads.data() + task * valueSize;
      for (int64_t i = 0; i < a.queries; ++i) {
        const T *query = q + a.queryRow(task, i, a.depth);
        const T *grad = g + a.queryRow(task, i, a.valueDepth);
        // The forward's log-sum-exp gives the probabilities, its output delta = g . out.
        KeyRange r = logits(a, query, keysT, b, i, p.data(), slopes.data());
        double rowLse = static_cast<double>(lse[task * a.queries + i]);
        for (int64_t j = r.from; j < r.to; ++j)
          p[j] = std::exp(p[j] - rowLse);
        std::fill(dp.begin() + r.from, dp.begin() + r.to, 0.0);
        for (int64_t c = 0; c < a.valueDepth; ++c) {
          double gc = static_cast<double>(grad[c]);
          const double *vc = valuesT.data() + c * a.keys;
          for (int64_t j = r.from; j < r.to; ++j)
            dp[j] += gc * vc[j];
        }
        double expected = 0.0;
        const T *outRow = out + a.queryRow(task, i, a.valueDepth);
        for (int64_t c = 0; c < a.valueDepth; ++c)
          expected += static_cast<double>(grad[c]) * static_cast<double>(outRow[c]);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = r.from; j < r.to; ++j) {
          double ds = p[j] * (dp[j] - expected) * slopes[j] * a.scale;
          for (int64_t c = 0; c < a.depth; ++c) {
            acc[c] += ds * static_cast<double>(keys[j * keyStride + c]);
            dk[j * a.depth + c] += ds * static_cast<double>(query[c]);
          }
          for (int64_t c = 0; c < a.valueDepth; ++c)
            dv[j * a.valueDepth + c] += p[j] * static_cast<double>(grad[c]);
        }
        T *dqRow = dq + a.queryRow(task, i, a.depth);
        for (int64_t c = 0; c < a.depth; ++c)
          dqRow[c] = static_cast<T>(acc[c]);
      }
    }
  });
  int64_t group = a.queryHeads / a.kvHeads;
  // Each key/value head's rows [keys, width] summed over the query heads that read it.
  auto sumHeads = [&](const std::vector<double> &perHead, int64_t width, std::vector<T> &out) {
    int64_t size = a.keys * width;
    for (int64_t kv = 0; kv < a.batch * a.kvHeads; ++kv)
      for (int64_t j = 0; j < a.keys; ++j) {
        T *row = out.data() + a.keyRow(kv, j, width);
        for (int64_t c = 0; c < width; ++c) {
          double sum = 0.0;
          for (int64_t h = 0; h < group; ++h)
            sum += perHead[(kv * group + h) * size + j * width + c];
          row[c] = static_cast<T>(sum);
        }
      }
  };
  sumHeads(dkHeads, a.depth, args.realResult(1));
  sumHeads(dvHeads, a.valueDepth, args.realResult(2));
}

/// mt.key_span: each row's first nonzero entry and one past its last ([0, 0] for none).
template <typename T> void keySpan(const Args<T> &args) {
  args.expectCounts(1, 1, 1);
  const Shape &mask = args.in(0).shape;
  if (mask.size() != 2 || args.out(0).shape != Shape{mask[0], 2})
    args.fail("the mask is not [batch, keys] or the result not [batch, 2]");
  const std::vector<int64_t> &m = args.ints(0);
  std::vector<int64_t> &span = args.out(0).ints;
  for (int64_t b = 0; b < mask[0]; ++b) {
    const int64_t *row = m.data() + b * mask[1];
    int64_t first = 0, end = mask[1];
    while (first < end && row[first] == 0)
      ++first;
    while (end > first && row[end - 1] == 0)
      --end;
    span[2 * b] = first == end ? 0 : first;
    span[2 * b + 1] = first == end ? 0 : end;
  }
}

} // namespace

template <typename T>
void addTransformerKernels(KernelMap<T> &kernels) {
  kernels["mt.embedding"] = embedding<T>;
  kernels["mt.rope"] = [](const Args<T> &args) { rope(args, false); };
  kernels["mt.rope_grad"] = [](const Args<T> &args) { rope(args, true); };
  kernels["mt.attention"] = attention<T>;
  kernels["mt.attention_grad"] = attentionGrad<T>;
  kernels["mt.key_span"] = keySpan<T>;
}

template void addTransformerKernels<float>(KernelMap<float> &);
template void addTransformerKernels<double>(KernelMap<double> &);

} // namespace mt::host::detail
