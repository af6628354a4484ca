// The step's console line and metrics record.
#include "runtime/train/TrainingLog.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mt {

std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  // Whole numbers (byte counts) exactly, as integers.
  if (std::floor(value) == value && std::abs(value) < 9007199254740992.0)
    return std::to_string(static_cast<long long>(value));
  std::ostringstream out;
  out.precision(9);
  out << value;
  return out.str();
}

TrainingLog::TrainingLog(const std::string &metricsPath, int64_t steps, bool terminal,
                         int64_t resumedAfter)
    : metricsPath(metricsPath), steps(steps), terminal(terminal) {
  if (metricsPath.empty())
    return;
  // A resumed run keeps the records of the steps its checkpoint holds, and no later ones
  // (the steps run again after it are written again).
  std::string kept;
  if (resumedAfter > 0) {
    std::ifstream previous(metricsPath);
    for (std::string line; std::getline(previous, line);) {
      const std::string key = "{\"step\":";
      char *end = nullptr;
      long long step =
          line.rfind(key, 0) == 0 ? std::strtoll(line.c_str() + key.size(), &end, 10) : 0;
      // A line a killed run cut short is of a step after the checkpoint: dropped with them.
      if (end && *end == ',' && step <= resumedAfter && line.back() == '}')
        kept += line + "\n";
    }
  }
  if (resumedAfter > 0) {
    // Through a rename: a run killed now keeps the file as it was.
    std::string partial = metricsPath + ".partial";
    {
      std::ofstream out(partial);
      out << kept;
      out.flush();
      if (!out)
        throw std::runtime_error("cannot write " + partial);
    }
    if (std::rename(partial.c_str(), metricsPath.c_str()) != 0)
      throw std::runtime_error("cannot replace " + metricsPath);
  }
  metrics.open(metricsPath, resumedAfter > 0 ? std::ios::app : std::ios::trunc);
  if (!metrics)
    throw std::runtime_error("cannot write " + metricsPath);
}

void TrainingLog::write(const StepReport &report) {
  if (terminal) {
    int filled = steps > 0 ? static_cast<int>(30 * report.step / steps) : 30;
    std::printf("\r[%s%s] ", std::string(filled, '#').c_str(),
                std::string(30 - filled, '.').c_str());
  }
  std::printf("step %lld/%lld | loss %.6f | %.0f ms | %.0f tok/s%s%s%s",
              static_cast<long long>(report.step), static_cast<long long>(steps), report.loss,
              report.ms, report.tokensPerSecond, report.skipped ? " | skipped (not finite)" : "",
              report.consoleDetail.c_str(), terminal && report.step < steps ? "" : "\n");
  std::fflush(stdout);
  if (!metrics.is_open())
    return;
  metrics << "{\"step\":" << report.step << ",\"loss\":" << jsonNumber(report.loss)
          << ",\"lr\":" << jsonNumber(report.lr) << ",\"grad_norm\":" << jsonNumber(report.gradNorm)
          << ",\"ms\":" << jsonNumber(report.ms)
          << ",\"tokens_per_s\":" << jsonNumber(report.tokensPerSecond)
          << ",\"skipped\":" << (report.skipped ? "true" : "false")
          << ",\"skipped_steps\":" << report.skippedSteps;
  for (const auto &[name, value] : report.measures)
    metrics << ",\"" << name << "\":" << jsonNumber(value);
  metrics << "}\n";
  metrics.flush();
  if (!metrics)
    throw std::runtime_error("cannot write " + metricsPath + " (disk full?)");
}

} // namespace mt
