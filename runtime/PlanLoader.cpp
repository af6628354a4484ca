// Loading and validating plans.
#include "runtime/PlanLoader.h"

#include "plan/DeviceLayout.h"
#include "plan/PlanFormat.h"
#include "runtime/KernelShapes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <unistd.h>
#include <vector>

namespace mt {

int64_t bytesPerElement(plan::DType dtype) {
  switch (dtype) {
  case plan::F64:
  case plan::I64:
    return 8;
  case plan::F32:
  case plan::I32:
    return 4;
  case plan::F16:
  case plan::BF16:
    return 2;
  default:
    return 1;
  }
}

bool isFloatDType(plan::DType dtype) {
  return dtype == plan::F32 || dtype == plan::F64 || dtype == plan::F16 || dtype == plan::BF16;
}

double decodeReal(const char *bytes, plan::DType dtype) {
  switch (dtype) {
  case plan::F64: {
    double d;
    std::memcpy(&d, bytes, 8);
    return d;
  }
  case plan::F32: {
    float f;
    std::memcpy(&f, bytes, 4);
    return f;
  }
  case plan::BF16: {
    uint32_t bits = static_cast<uint32_t>(static_cast<uint8_t>(bytes[0]) |
                                          static_cast<uint8_t>(bytes[1]) << 8)
                    << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  default: { // F16
    uint16_t h = static_cast<uint16_t>(static_cast<uint8_t>(bytes[0]) |
                                       static_cast<uint8_t>(bytes[1]) << 8);
    int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                       : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                        : std::ldexp(mantissa + 1024, exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
  }
  }
}

int64_t decodeInteger(const char *bytes, plan::DType dtype) {
  switch (dtype) {
  case plan::I64: {
    int64_t i;
    std::memcpy(&i, bytes, 8);
    return i;
  }
  case plan::I32: {
    int32_t i;
    std::memcpy(&i, bytes, 4);
    return i;
  }
  case plan::I8:
    return static_cast<int8_t>(bytes[0]);
  default: // BOOL
    return bytes[0] != 0;
  }
}

int64_t numElements(const plan::TensorType &type) {
  int64_t n = 1;
  for (int64_t d : type.shape())
    n *= d;
  return n;
}

namespace {

/// Why `type` is no tensor type a plan can hold: a dtype not set, a negative dimension, or
/// more elements than bytes can count; "" when it is one.
std::string typeError(const plan::TensorType &type) {
  if (type.dtype() == plan::DTYPE_UNSPECIFIED || !plan::DType_IsValid(type.dtype()))
    return "has no element type";
  return dimensionsError(type.shape());
}

bool sameType(const plan::TensorType &a, const plan::TensorType &b) {
  return a.dtype() == b.dtype() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
}

} // namespace

std::string readFileBytes(const std::string &path, const std::string &what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot open " + what + " " + path);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

plan::Plan loadPlan(const std::string &path) {
  std::string bytes = readFileBytes(path, "plan");
  plan::Plan plan;
  auto fail = [&](const std::string &why) {
    throw std::runtime_error("plan " + path + ": " + why);
  };
  if (!plan.ParseFromString(bytes))
    fail("not a plan (truncated, or not written by mtc)");
  if (plan.format_version() != kPlanFormatVersion)
    fail("format version " + std::to_string(plan.format_version()) + " is not " +
         std::to_string(kPlanFormatVersion) + ": compile the model again with this mtc");

  auto checkProgram = [&](const plan::Program &program, const std::string &where,
                          const std::vector<int> &outputs) {
    auto fail = [&](const std::string &why) {
      throw std::runtime_error("plan " + path + ": " + where + ": " + why);
    };
    int values = program.values_size();
    std::vector<bool> defined(values, false);
    auto checkId = [&](int id, const std::string &what) {
      if (id < 0 || id >= values)
        fail(what + " names value " + std::to_string(id) + " of " + std::to_string(values));
    };
    for (int v = 0; v < values; ++v) {
      const plan::Value &value = program.values(v);
      if (std::string error = typeError(value.type()); !error.empty())
        fail("value " + std::to_string(v) + " " + error);
      if (value.has_parameter() &&
          (value.parameter() < 0 || value.parameter() >= plan.parameters_size()))
        fail("value " + std::to_string(v) + " reads parameter " +
             std::to_string(value.parameter()) + " of " + std::to_string(plan.parameters_size()));
      if (value.has_parameter() &&
          !sameType(value.type(), plan.parameters(value.parameter()).type()))
        fail("value " + std::to_string(v) + " reads parameter " +
             plan.parameters(value.parameter()).name() + " as another type");
      if (value.has_input() && (value.input() < 0 || value.input() >= program.inputs_size()))
        fail("value " + std::to_string(v) + " is input " + std::to_string(value.input()) +
             " of " + std::to_string(program.inputs_size()));
      if (value.has_constant() &&
          static_cast<int64_t>(value.constant().size()) !=
              numElements(value.type()) * bytesPerElement(value.type().dtype()))
        fail("constant value " + std::to_string(v) + " has the wrong number of bytes");
      defined[v] = value.source_case() != plan::Value::SOURCE_NOT_SET;
    }
    for (const plan::Command &command : program.commands()) {
      std::string op = command.op() + " (" + command.location() + ")";
      if (command.op() == "mt.call") {
        auto callee = command.attributes().find("template");
        if (callee == command.attributes().end() || callee->second.i() < 0 ||
            callee->second.i() >= plan.templates_size())
          fail(op + " calls no template of the plan");
        const plan::Template &layer = plan.templates(callee->second.i());
        if (command.operands_size() != layer.body().inputs_size() ||
            command.results_size() != layer.results_size())
          fail(op + " does not match the arguments and results of " + layer.name());
      }
      for (int id : command.operands()) {
        checkId(id, op);
        if (!defined[id])
          fail(op + " reads value " + std::to_string(id) + " before it is computed");
      }
      for (int id : command.results()) {
        checkId(id, op);
        if (defined[id])
          fail(op + " computes value " + std::to_string(id) + " a second time");
        defined[id] = true;
      }
    }
    for (int id : outputs)
      checkId(id, "an output");
    for (const plan::Input &input : program.inputs())
      checkId(input.value(), "input " + input.name());
  };

  // Parameters first: the programs' reads are checked against them.
  for (const plan::Parameter &parameter : plan.parameters()) {
    if (std::string error = typeError(parameter.type()); !error.empty())
      fail("parameter " + parameter.name() + " " + error);
    if (!isFloatDType(parameter.type().dtype()))
      fail("parameter " + parameter.name() + " is not a float tensor: AdamW trains floats");
  }
  for (const plan::Template &layer : plan.templates())
    checkProgram(layer.body(), "template " + layer.name(),
                 {layer.results().begin(), layer.results().end()});
  std::vector<int> outputs{plan.step().loss()};
  outputs.insert(outputs.end(), plan.step().gradients().begin(), plan.step().gradients().end());
  checkProgram(plan.step(), "the step", outputs);
  if (plan.step().gradients_size() != plan.parameters_size())
    fail("it has " + std::to_string(plan.step().gradients_size()) + " gradients for " +
         std::to_string(plan.parameters_size()) + " parameters");
  const plan::TensorType &loss = plan.step().values(plan.step().loss()).type();
  if (!isFloatDType(loss.dtype()) || numElements(loss) != 1)
    fail("the loss is not one float");
  for (int p = 0; p < plan.parameters_size(); ++p) {
    const plan::TensorType &gradient = plan.step().values(plan.step().gradients(p)).type();
    const plan::TensorType &parameter = plan.parameters(p).type();
    if (!isFloatDType(gradient.dtype()) ||
        !std::equal(gradient.shape().begin(), gradient.shape().end(), parameter.shape().begin(),
                    parameter.shape().end()))
      fail("the gradient of " + plan.parameters(p).name() + " is not a float tensor of its shape");
  }
  for (const plan::Parameter &parameter : plan.parameters())
    if (parameter.layer() < -1)
      fail("parameter " + parameter.name() + " is in layer " + std::to_string(parameter.layer()));
  // Device memory: each part non-negative, and their sum countable.
  int64_t deviceBytes = 0;
  for (auto [field, bytes] : {std::pair{"arena_bytes", plan.arena_bytes()},
                              {"scratch_bytes", plan.scratch_bytes()},
                              {"blas_workspace_bytes", plan.blas_workspace_bytes()},
                              {"input_bytes", plan.input_bytes()},
                              {"constant_bytes", plan.constant_bytes()},
                              {"staging_bytes", plan.staging_bytes()}}) {
    if (bytes < 0 || bytes > (int64_t{1} << 56) - deviceBytes)
      fail(std::string("its ") + field + " is " + std::to_string(bytes));
    deviceBytes += bytes;
  }
  return plan;
}

int64_t planDeviceBytes(const plan::Plan &plan) {
  return plan.arena_bytes() + plan.scratch_bytes() + plan.blas_workspace_bytes() +
         plan.input_bytes() + plan.constant_bytes() + plan.staging_bytes();
}

const std::vector<int64_t> &stepInput(const plan::Program &program, const plan::Input &input,
                                      const std::map<std::string, std::vector<int64_t>> &inputs) {
  const plan::TensorType &type = program.values(input.value()).type();
  int64_t count = numElements(type);
  auto it = inputs.find(input.name());
  if (it == inputs.end() || static_cast<int64_t>(it->second.size()) != count)
    throw std::runtime_error("the step needs input '" + input.name() + "' of " +
                             std::to_string(count) + " tokens");
  if (!input.token_span())
    return it->second;
  // Attention reads this mask as each row's span of tokens, which stands for it only when the
  // tokens are one run: padding, tokens, padding.
  int64_t length = type.shape_size() == 2 ? type.shape(1) : 0;
  for (int64_t row = 0; length > 0 && row < count / length; ++row) {
    const int64_t *mask = it->second.data() + row * length;
    if (int64_t at = tokenPastSpan(length, [&](int64_t i) { return mask[i] != 0; }); at >= 0)
      throw std::runtime_error("input '" + input.name() + "': row " + std::to_string(row) +
                               " has a token after padding after tokens (position " +
                               std::to_string(at) +
                               "); the plan reads it as one span of tokens a row (padding, "
                               "tokens, padding)");
  }
  return it->second;
}

void checkOutputPath(const std::string &flag, const std::string &path, const plan::Plan &plan,
                     const std::string &planPath) {
  if (path.empty())
    return;
  std::string planDir =
      planPath.find('/') == std::string::npos ? "." : planPath.substr(0, planPath.rfind('/'));
  size_t slash = path.rfind('/');
  std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (access(folder.c_str(), W_OK) != 0)
    throw std::runtime_error(flag + " " + path + ": the folder " + folder +
                             " does not exist or is not writable");
  char *resolved = realpath(folder.c_str(), nullptr);
  std::string target = std::string(resolved ? resolved : folder);
  std::free(resolved);
  target += (target.back() == '/' ? "" : "/") + path.substr(slash + 1);
  auto is = [&](const std::string &file) {
    char *existing = realpath(file.c_str(), nullptr);
    bool same = existing && target == std::string(existing);
    std::free(existing);
    return same;
  };
  if (is(planPath))
    throw std::runtime_error(flag + " " + path + " is the plan itself");
  for (const plan::Parameter &parameter : plan.parameters())
    if (!parameter.file().empty() &&
        is(parameter.file().front() == '/' ? parameter.file() : planDir + "/" + parameter.file()))
      throw std::runtime_error(flag + " " + path + " is the plan's own weights file (" +
                               parameter.name() + " starts from it)");
}

} // namespace mt
