// Fuzz target: the token-file reader (runtime/train/TokenData) on any bytes, as raw uint16,
// raw uint32 or llm.c's headered format (the first byte picks), then the vocabulary scan and
// a few batches.
#include "runtime/train/TokenData.h"
#include "test/Fuzz/FuzzInput.h"

#include <exception>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const char *dtype = data[0] & 1 ? "u32" : "u16";
  int64_t vocabulary = 1 + data[0] * 13;
  mt::fuzz::InputFile input(data + 1, size - 1, ".bin");
  try {
    mt::TokenData tokens(input.path, dtype);
    tokens.checkVocabulary(vocabulary);
    for (int b = 0; b < 3; ++b)
      tokens.next(2, 3, vocabulary);
  } catch (const std::exception &) {
  }
  return 0;
}
