// Evaluates ONNX ops on host tensors whose values are all known at import time, so shape
// subgraphs (Shape, Gather, Concat, Range, Trilu, Where, ...) become constants, not ops.
#ifndef MT_FRONTEND_CONSTANTFOLDER_H
#define MT_FRONTEND_CONSTANTFOLDER_H

#include "frontend/HostTensor.h"

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mt {

/// Elementwise ops of two operands with numpy broadcasting: arithmetic keeps the lhs kind,
/// comparisons and logic give booleans. nullopt when `opType` is not one of them.
std::optional<HostTensor> foldBinary(llvm::StringRef opType, const HostTensor &lhs,
                                     const HostTensor &rhs);
/// Elementwise ops of one operand; nullopt when `opType` is not one of them.
std::optional<HostTensor> foldUnary(llvm::StringRef opType, const HostTensor &input);

HostTensor whereTensor(const HostTensor &condition, const HostTensor &onTrue,
                       const HostTensor &onFalse);
HostTensor expandTensor(const HostTensor &input, llvm::ArrayRef<int64_t> shape);
HostTensor transposeTensor(const HostTensor &input, llvm::ArrayRef<int64_t> permutation);
/// Gather along `axis` with non-negative indices.
HostTensor gatherTensor(const HostTensor &input, const HostTensor &indices, int64_t axis);
/// Per axis: elements start, start + step, ... while before `limit` (steps may be negative).
HostTensor sliceTensor(const HostTensor &input, llvm::ArrayRef<int64_t> starts,
                       llvm::ArrayRef<int64_t> limits, llvm::ArrayRef<int64_t> steps);
HostTensor concatTensors(llvm::ArrayRef<HostTensor> inputs, int64_t axis);
/// Keeps the upper (or lower) triangle of the last two axes from diagonal k; zeros the rest.
HostTensor triluTensor(const HostTensor &input, int64_t k, bool upper);
/// GatherND: each row of `indices`' last axis picks an element (or a slice) of `input` past
/// its first `batchDims` axes, which both share; indices are in range and non-negative.
HostTensor gatherNdTensor(const HostTensor &input, const HostTensor &indices, int64_t batchDims);
/// Running sums along `axis`, each excluding its own element when `exclusive`, from the
/// end when `reverse`.
HostTensor cumSumTensor(const HostTensor &input, int64_t axis, bool exclusive, bool reverse);
HostTensor rangeTensor(const HostTensor &start, const HostTensor &limit, const HostTensor &delta);

} // namespace mt

#endif // MT_FRONTEND_CONSTANTFOLDER_H
