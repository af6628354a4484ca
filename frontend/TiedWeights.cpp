// Finds transposed copies by shape first (only [a, b] against [b, a] is compared), so that a
// model's bytes are read only for the few matrices that could be one.
#include "frontend/TiedWeights.h"

#include <cstring>
#include <map>

namespace mt {

llvm::StringMap<std::string> findTransposedCopies(
    const std::vector<const onnx::TensorProto *> &matrices,
    llvm::function_ref<std::optional<std::string>(const onnx::TensorProto &)> bytes) {
  std::map<std::pair<int64_t, int64_t>, std::vector<const onnx::TensorProto *>> byShape;
  for (const onnx::TensorProto *matrix : matrices)
    if (matrix->data_type() == onnx::TensorProto::FLOAT && matrix->dims_size() == 2 &&
        matrix->dims(0) != matrix->dims(1))
      byShape[{matrix->dims(0), matrix->dims(1)}].push_back(matrix);
  std::map<const onnx::TensorProto *, size_t> order;
  for (const onnx::TensorProto *matrix : matrices)
    order.emplace(matrix, order.size());
  llvm::StringMap<std::string> copies;
  for (const auto &[shape, originals] : byShape) {
    auto transposed = byShape.find({shape.second, shape.first});
    // Each pair of shapes once.
    if (transposed == byShape.end() || shape.first > shape.second)
      continue;
    int64_t rows = shape.first, cols = shape.second, elements;
    if (rows <= 0 || cols <= 0 || __builtin_mul_overflow(rows, cols, &elements) ||
        elements > (int64_t{1} << 40))
      continue;
    for (const onnx::TensorProto *original : originals) {
      std::optional<std::string> a = bytes(*original);
      if (!a || a->size() != static_cast<size_t>(elements) * 4)
        continue;
      auto element = [](const std::string &data, int64_t i) {
        float value;
        std::memcpy(&value, data.data() + i * 4, 4);
        return value;
      };
      bool splat = true;
      for (int64_t i = 1; splat && i < elements; ++i)
        splat = element(*a, i) == element(*a, 0);
      if (splat)
        continue;
      for (const onnx::TensorProto *copy : transposed->second) {
        if (copies.count(copy->name()) || copies.count(original->name()))
          continue;
        std::optional<std::string> b = bytes(*copy);
        if (!b || b->size() != a->size())
          continue;
        bool same = true;
        for (int64_t r = 0; same && r < rows; ++r)
          for (int64_t c = 0; same && c < cols; ++c)
            same =
                std::memcmp(a->data() + (r * cols + c) * 4, b->data() + (c * rows + r) * 4, 4) == 0;
        // The one the model lists first (the embedding, by its PyTorch name) stays.
        if (same && order.at(original) < order.at(copy))
          copies[copy->name()] = original->name();
        else if (same)
          copies[original->name()] = copy->name();
      }
    }
  }
  return copies;
}

} // namespace mt
