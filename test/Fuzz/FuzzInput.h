// What every fuzz target shares: the input written to a file (the loaders read paths), and
// the one outcome besides success that is allowed, an exception with a message.
#ifndef MT_TEST_FUZZ_FUZZINPUT_H
#define MT_TEST_FUZZ_FUZZINPUT_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace mt::fuzz {

/// `data` as a file named with `suffix` in the temporary folder, removed when it goes.
class InputFile {
public:
  InputFile(const uint8_t *data, size_t size, const std::string &suffix) {
    const char *folder = getenv("TMPDIR");
    path = std::string(folder && *folder ? folder : "/tmp") + "/mt-fuzz-" +
           std::to_string(getpid()) + suffix;
    FILE *file = std::fopen(path.c_str(), "wb");
    if (file) {
      std::fwrite(data, 1, size, file);
      std::fclose(file);
    }
  }
  ~InputFile() { std::remove(path.c_str()); }
  std::string path;
};

} // namespace mt::fuzz

#endif // MT_TEST_FUZZ_FUZZINPUT_H
