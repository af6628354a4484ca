// What a run reports each step: a line on the console (a progress bar on a terminal) and a
// JSON object a line in the metrics file, flushed at once so that a run cut short keeps its
// steps, and valid JSON whatever the numbers (a non-finite one is null).
#ifndef MT_RUNTIME_TRAIN_TRAININGLOG_H
#define MT_RUNTIME_TRAIN_TRAININGLOG_H

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace mt {

/// Named measures of a step beyond the common ones (the device's, for instance).
using StepMeasureList = std::vector<std::pair<std::string, double>>;

struct StepReport {
  int64_t step = 0;
  double loss = 0, gradNorm = 0, lr = 0, ms = 0, tokensPerSecond = 0;
  std::string consoleDetail; // appended to the console line: " | device 12.0 ms | ..."
  bool skipped = false;      // no update applied: the loss or a gradient was not finite
  int64_t skippedSteps = 0;  // of the run so far
  StepMeasureList measures;  // appended to the metrics object
};

/// `value` as a JSON number with enough digits to read a float back exactly (a whole number
/// below 2^53 exactly, as an integer); null when it is not finite (JSON has no NaN or
/// infinity).
std::string jsonNumber(double value);

class TrainingLog {
public:
  /// A log of `steps` steps; `metricsPath` "" writes no metrics file. Throws when it cannot
  /// be written. `terminal` draws a progress bar, each step's line over the last. A run
  /// resumed after step `resumedAfter` keeps the file's records up to that step.
  TrainingLog(const std::string &metricsPath, int64_t steps, bool terminal,
              int64_t resumedAfter = 0);

  void write(const StepReport &report);

private:
  std::ofstream metrics;
  std::string metricsPath;
  int64_t steps;
  bool terminal;
};

} // namespace mt

#endif // MT_RUNTIME_TRAIN_TRAININGLOG_H
