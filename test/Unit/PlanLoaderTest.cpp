// Unit test of the plan loader's checks (runtime/PlanLoader): a plan compiled by mtc with one
// field changed, as a corrupted or hostile file would hold it, is refused naming the field,
// never run (a parameter read as I32 trained silently wrong; a dimension of INT64_MIN or a
// gradient of another shape crashed the host kernels and AdamW).
#include "runtime/PlanLoader.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

namespace {

void check(bool condition, const std::string &what) {
  if (!condition) {
    std::printf("FAIL: %s\n", what.c_str());
    std::exit(1);
  }
}

/// The message loadPlan throws for `plan` changed by `change`, or "" when it loads.
std::string loadError(const mt::plan::Plan &plan, const std::string &path,
                      const std::function<void(mt::plan::Plan &)> &change) {
  mt::plan::Plan changed = plan;
  change(changed);
  std::ofstream(path, std::ios::binary) << changed.SerializeAsString();
  try {
    mt::loadPlan(path);
  } catch (const std::runtime_error &error) {
    return error.what();
  }
  return "";
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::printf("usage: mt-plan-loader-test PLAN.mtp WORK_FOLDER\n");
    return 2;
  }
  mt::plan::Plan plan = mt::loadPlan(argv[1]);
  std::string path = std::string(argv[2]) + "/changed.mtp";
  check(loadError(plan, path, [](mt::plan::Plan &) {}).empty(), "the plan as compiled loads");

  auto expect = [&](const std::string &what, const std::function<void(mt::plan::Plan &)> &change,
                    const std::string &message) {
    std::string error = loadError(plan, path, change);
    check(error.find(message) != std::string::npos, what + ": got '" + error + "'");
    std::printf("%s: %s\n", what.c_str(), message.c_str());
  };
  expect(
      "a parameter as integers",
      [](mt::plan::Plan &p) { p.mutable_parameters(0)->mutable_type()->set_dtype(mt::plan::I32); },
      "parameter wte.weight is not a float tensor");
  expect(
      "a dimension of INT64_MIN",
      [](mt::plan::Plan &p) {
        p.mutable_step()->mutable_values(0)->mutable_type()->set_shape(
            0, std::numeric_limits<int64_t>::min());
      },
      "value 0 has a negative dimension");
  expect(
      "a dimension past counting",
      [](mt::plan::Plan &p) {
        mt::plan::TensorType *type = p.mutable_step()->mutable_values(0)->mutable_type();
        type->set_shape(0, int64_t(1) << 40);
        type->set_shape(1, int64_t(1) << 40);
      },
      "value 0 has more elements than sizes can count");
  expect(
      "a parameter read as another shape",
      [](mt::plan::Plan &p) {
        for (mt::plan::Value &value : *p.mutable_step()->mutable_values())
          if (value.has_parameter() && value.parameter() == 0) {
            value.mutable_type()->set_shape(0, value.type().shape(0) + 1);
            return;
          }
      },
      "reads parameter wte.weight as another type");
  expect(
      "a gradient naming another value",
      [](mt::plan::Plan &p) { p.mutable_step()->set_gradients(0, p.step().loss()); },
      "the gradient of wte.weight is not a float tensor of its shape");
  expect(
      "a loss of many elements",
      [](mt::plan::Plan &p) { p.mutable_step()->set_loss(p.step().gradients(0)); },
      "the loss is not one float");
  return 0;
}
