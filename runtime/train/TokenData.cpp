// Reading token files and cutting them into batches.
#include "runtime/train/TokenData.h"

#include "runtime/KernelShapes.h"
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mt {

namespace {
// llm.c's token files start with 256 int32: magic, version, token count.
constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);
} // namespace

TokenData::TokenData(const std::string &path, const std::string &dtype)
    // Mapped, not read: a file of billions of tokens costs no copy, and the pages a run never
    // reaches are never read.
    : path(path), file(path, "data file") {
  if (dtype != "u16" && dtype != "u32")
    throw std::runtime_error("--data-dtype must be u16 or u32, got " + dtype);
  const unsigned char *bytes = reinterpret_cast<const unsigned char *>(file.data());
  size_t offset = 0;
  width = dtype == "u32" ? 4 : 2;
  int64_t count = -1;
  int32_t header[3];
  if (file.size() >= kLlmcHeaderBytes) {
    std::memcpy(header, bytes, sizeof(header));
    if (header[0] == kLlmcMagic) {
      if (header[1] != 1)
        throw std::runtime_error(path + ": llm.c token file version " + std::to_string(header[1]) +
                                 " is not 1 (uint16 tokens)");
      offset = kLlmcHeaderBytes;
      width = 2;
      count = header[2];
      formatName = "llm.c uint16";
    }
  }
  if (formatName.empty())
    formatName = width == 2 ? "raw uint16" : "raw uint32";
  size_t available = (file.size() - offset) / width;
  if (count < 0)
    count = available;
  if ((file.size() - offset) % width != 0 || static_cast<size_t>(count) > available)
    throw std::runtime_error(path + ": size does not match " + formatName + " tokens");
  if (count == 0)
    throw std::runtime_error(path + " holds no tokens");
  first = bytes + offset;
  tokenCount = count;
}

void TokenData::checkVocabulary(int64_t vocabulary) const {
  if (vocabulary <= 0)
    return;
  // Each part's first bad position; the lowest of them is the file's first.
  int64_t parts = std::max<int64_t>(1, std::min<int64_t>(parallelism(), size() / 65536));
  std::vector<int64_t> firstBad(parts, -1);
  runParallel(parts, [&](int64_t part) {
    int64_t begin = size() * part / parts, end = size() * (part + 1) / parts;
    for (int64_t i = begin; i < end; ++i)
      if (token(i) >= vocabulary) {
        firstBad[part] = i;
        return;
      }
  });
  for (int64_t position : firstBad)
    if (position >= 0)
      throw std::runtime_error(path + ": token " + std::to_string(token(position)) +
                               " at position " + std::to_string(position) +
                               " is not below the vocabulary size " + std::to_string(vocabulary));
}

Batch TokenData::next(int64_t batch, int64_t length, int64_t vocabulary) {
  Batch result;
  int64_t window = length + 1;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < window; ++t) {
      int64_t position = (cursor + b * window + t) % size();
      int64_t token = this->token(position);
      if (vocabulary > 0 && token >= vocabulary)
        throw std::runtime_error(path + ": token " + std::to_string(token) + " at position " +
                                 std::to_string(position) + " is not below the vocabulary size " +
                                 std::to_string(vocabulary));
      if (t < length)
        result.inputs.push_back(token);
      if (t > 0)
        result.targets.push_back(token);
    }
  }
  cursor = (cursor + batch * window) % size();
  return result;
}

void TokenData::seek(int64_t position) {
  if (position < 0 || position >= size())
    throw std::runtime_error(path + ": position " + std::to_string(position) +
                             " is not within its " + std::to_string(size()) + " tokens");
  cursor = position;
}

std::vector<int64_t> maskPadding(Batch &batch, int64_t pad, int64_t length) {
  std::vector<int64_t> mask;
  mask.reserve(batch.inputs.size());
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    mask.push_back(batch.inputs[i] != pad);
    // A prediction made at padding counts for nothing either: under left padding the last
    // padding position predicts the first token from a row that attends to nothing.
    if (!mask.back() || batch.targets[i] == pad)
      batch.targets[i] = kIgnoredTarget;
  }
  for (int64_t b = 0; b < static_cast<int64_t>(mask.size()) / length; ++b) {
    const int64_t *row = mask.data() + b * length;
    if (int64_t at = tokenPastSpan(length, [&](int64_t i) { return row[i] != 0; }); at >= 0)
      throw std::runtime_error("sequence " + std::to_string(b) +
                               " of the batch has a token after padding after tokens "
                               "(position " +
                               std::to_string(at) +
                               "): --pad-token-id takes sequences padded before or after their "
                               "tokens, not between them");
  }
  return mask;
}

} // namespace mt
