// Finite-difference gradient checks on the fp64 host backend.
#include "runtime/GradientCheck.h"

#include "runtime/PlanLoader.h"
#include "runtime/host/Executor.h"

#include <cmath>
#include <map>
#include <random>

namespace mt {

GradientCheckResult checkGradients(const plan::Plan &plan, uint64_t seed, int64_t samples) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::vector<double>> parameters;
  for (const plan::Parameter &parameter : plan.parameters()) {
    parameters.emplace_back(numElements(parameter.type()));
    for (double &x : parameters.back())
      x = normal(generator);
  }
  std::map<std::string, std::vector<int64_t>> inputs;
  for (const plan::Input &input : plan.step().inputs()) {
    std::vector<int64_t> &values = inputs[input.name()];
    values.resize(numElements(plan.step().values(input.value()).type()));
    for (int64_t &v : values)
      v = static_cast<int64_t>(generator() % 2);
  }
  host::Executor<double> executor(plan);
  auto run = [&] {
    std::vector<const double *> pointers;
    for (const std::vector<double> &p : parameters)
      pointers.push_back(p.data());
    return executor.run(pointers, inputs);
  };
  host::StepResult<double> analytic = run();

  GradientCheckResult result;
  const double h = 1e-6;
  for (size_t p = 0; p < parameters.size(); ++p) {
    int64_t count = parameters[p].size();
    int64_t stride = std::max<int64_t>(1, count / samples);
    for (int64_t i = 0; i < count; i += stride) {
      double saved = parameters[p][i];
      parameters[p][i] = saved + h;
      double up = run().loss;
      parameters[p][i] = saved - h;
      double down = run().loss;
      parameters[p][i] = saved;
      double numeric = (up - down) / (2 * h);
      double error = std::abs(analytic.gradients[p][i] - numeric) / std::max(1.0, std::abs(numeric));
      ++result.checked;
      if (error >= result.worstError) {
        result.worstError = error;
        result.worstElement = plan.parameters(p).name() + "[" + std::to_string(i) +
                              "]: analytic " + std::to_string(analytic.gradients[p][i]) +
                              ", numeric " + std::to_string(numeric);
      }
    }
  }
  return result;
}

} // namespace mt
