// Fuzz target: the plan loader (runtime/PlanLoader) on any bytes, then the parts of mt-run
// that read a loaded plan before a step (the step's inputs, the host executor's command
// views). Every bad plan must be a std::exception naming the problem, never a crash.
#include "runtime/PlanLoader.h"
#include "runtime/host/Executor.h"
#include "runtime/train/StepInputs.h"
#include "test/Fuzz/FuzzInput.h"

#include <exception>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mt::fuzz::InputFile input(data, size, ".mtp");
  try {
    mt::plan::Plan plan = mt::loadPlan(input.path);
    try {
      mt::StepInputs inputs(plan, -1);
    } catch (const std::exception &) {
    }
    mt::host::Executor<float> executor(plan);
  } catch (const std::exception &) {
  }
  return 0;
}
