// Unit test of the step log (runtime/train/TrainingLog): each step's metrics object is on
// disk as soon as it is written, valid JSON whatever the numbers (non-finite as null, whole
// numbers exact), with the extra measures after the common ones; and the console line.
#include "runtime/train/TrainingLog.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

namespace {

void check(bool condition, const std::string &what) {
  if (!condition) {
    std::printf("FAIL: %s\n", what.c_str());
    std::exit(1);
  }
}

std::string contents(const std::string &path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

int main(int argc, char **argv) {
  std::string path = std::string(argc > 1 ? argv[1] : ".") + "/metrics.jsonl";
  check(mt::jsonNumber(std::nan("")) == "null" &&
            mt::jsonNumber(std::numeric_limits<double>::infinity()) == "null" &&
            mt::jsonNumber(-std::numeric_limits<double>::infinity()) == "null",
        "non-finite numbers are null");
  check(mt::jsonNumber(7904048128.0) == "7904048128", "whole numbers exact");
  check(mt::jsonNumber(0.1f) == "0.100000001", "a float to 9 digits");
  std::printf("numbers: non-finite as null, whole numbers exact, floats to 9 digits\n");

  mt::TrainingLog log(path, 2, false);
  log.write({1, 5.5, 2.0, 1e-3, 10.0, 3200.0, " | more", false, 0, {{"device_bytes", 1024.0}}});
  // The first step is on disk before the log is closed.
  const std::string first = "{\"step\":1,\"loss\":5.5,\"lr\":0.001,\"grad_norm\":2,\"ms\":10,"
                            "\"tokens_per_s\":3200,\"skipped\":false,\"skipped_steps\":0,"
                            "\"device_bytes\":1024}\n";
  check(contents(path) == first, "the first step flushed: " + contents(path));
  log.write({2,
             std::nan(""),
             std::numeric_limits<double>::infinity(),
             1e-3,
             12.5,
             2560.0,
             "",
             true,
             1,
             {}});
  check(contents(path).find("{\"step\":2,\"loss\":null,\"lr\":0.001,\"grad_norm\":null,\"ms\":12.5,"
                            "\"tokens_per_s\":2560,\"skipped\":true,\"skipped_steps\":1}\n") !=
            std::string::npos,
        "a non-finite loss and norm, the step skipped: " + contents(path));
  std::printf("metrics: each step on disk at once, a non-finite loss as null, skipped steps "
              "counted\n");

  // A run resumed after step 1 keeps that step's record and writes the later ones again.
  {
    std::ofstream cut(path, std::ios::app);
    cut << "{\"step\":3,\"lo"; // a record a killed run left half written
  }
  mt::TrainingLog resumed(path, 2, false, /*resumedAfter=*/1);
  check(contents(path) == first, "resumed after step 1: " + contents(path));
  resumed.write({2, 5.25, 2.0, 1e-3, 10.0, 3200.0, "", false, 1, {}});
  check(contents(path).rfind(first, 0) == 0 &&
            contents(path).find("{\"step\":2,\"loss\":5.25,") == first.size(),
        "the resumed run's step 2 after step 1: " + contents(path));
  std::printf("resumed: the records through the checkpoint's step kept, the rest written again\n");

  bool refused = false;
  try {
    mt::TrainingLog("/nonexistent-folder/metrics.jsonl", 1, false);
  } catch (const std::runtime_error &error) {
    refused = std::string(error.what()) == "cannot write /nonexistent-folder/metrics.jsonl";
  }
  check(refused, "an unwritable metrics file");
  std::printf("an unwritable metrics file is refused\n");
  return 0;
}
