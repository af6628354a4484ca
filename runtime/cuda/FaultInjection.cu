// MT_INJECT_FAULT, read once.
#include "runtime/cuda/FaultInjection.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mt::cuda {

namespace {

struct Faults {
  int64_t step = -1;
  bool pin = false;
};

const Faults &faults() {
  static const Faults parsed = [] {
    Faults f;
    const char *text = std::getenv("MT_INJECT_FAULT");
    std::string spec = text ? text : "";
    if (spec == "pin")
      f.pin = true;
    else if (spec.rfind("step:", 0) == 0)
      f.step = std::stoll(spec.substr(5));
    else if (!spec.empty())
      throw std::runtime_error("MT_INJECT_FAULT must be step:N or pin, got '" + spec + "'");
    return f;
  }();
  return parsed;
}

__global__ void trapKernel() { __trap(); }

} // namespace

int64_t injectedFaultStep() { return faults().step; }

bool injectedPinFault() { return faults().pin; }

void launchTrap(cudaStream_t stream) { trapKernel<<<1, 1, 0, stream>>>(); }

} // namespace mt::cuda
