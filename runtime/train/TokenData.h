// Training tokens from a file: nanoGPT's raw uint16, llm.c's headered format (recognized by
// its magic) or raw uint32; batches of consecutive windows that wrap at the end.
#ifndef MT_RUNTIME_TRAIN_TOKENDATA_H
#define MT_RUNTIME_TRAIN_TOKENDATA_H

#include "runtime/MappedFile.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace mt {

struct Batch {
  std::vector<int64_t> inputs;   // B x T
  std::vector<int64_t> targets;  // B x T, the inputs shifted by one
};

/// The attention mask of a batch's inputs of `length` tokens a sequence (0 at the padding
/// token `pad`, else 1). Targets that are padding, and those predicted at padding, become
/// kIgnoredTarget, so that the loss leaves them out (as transformers' collators set padding
/// labels to -100; a left-padded sequence's first token is predicted at padding, which
/// attends to nothing). Throws on padding between two tokens of a sequence: attention reads
/// the mask as one span of tokens a sequence.
std::vector<int64_t> maskPadding(Batch &batch, int64_t pad, int64_t length);

class TokenData {
public:
  /// `dtype` is "u16" or "u32" for raw files; a file with llm.c's header is read as it says.
  /// The file is memory-mapped, not read.
  TokenData(const std::string &path, const std::string &dtype);

  /// The next batch of B sequences of length T: B*(T+1) consecutive tokens, sequence b the
  /// first T tokens of its window as inputs and the last T as targets. Throws naming the
  /// position of a token id >= vocabulary.
  Batch next(int64_t batch, int64_t length, int64_t vocabulary);

  /// Throws naming the first position (and id) of a token id >= `vocabulary` in the whole
  /// file, scanned on every core: a bad token is an error before the first step, not at the
  /// step that reaches it.
  void checkVocabulary(int64_t vocabulary) const;

  int64_t size() const { return tokenCount; }
  /// Where the next batch starts: what a checkpoint records, and seek restores.
  int64_t position() const { return cursor; }
  /// Throws unless `position` is within the file.
  void seek(int64_t position);
  const std::string &format() const { return formatName; }

private:
  /// Token i of the file (i < size()).
  int64_t token(int64_t i) const {
    uint32_t value = 0;
    std::memcpy(&value, first + i * width, width);
    return value;
  }

  std::string path;
  std::string formatName;
  MappedFile file;
  const unsigned char *first = nullptr; // the first token, after any header
  int64_t width = 2, tokenCount = 0;
  int64_t cursor = 0;
};

} // namespace mt

#endif // MT_RUNTIME_TRAIN_TOKENDATA_H
