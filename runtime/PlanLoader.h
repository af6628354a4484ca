// Reads a plan file and checks that it is a program mt-run can execute: every value id in
// range, every command's operands defined before it, one gradient per parameter.
#ifndef MT_RUNTIME_PLANLOADER_H
#define MT_RUNTIME_PLANLOADER_H

#include "plan/plan.pb.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mt {

/// Every byte of the file at `path`; throws std::runtime_error "cannot open `what` PATH".
std::string readFileBytes(const std::string &path, const std::string &what);

/// The plan at `path`; throws std::runtime_error naming the file and the first problem.
plan::Plan loadPlan(const std::string &path);

/// A scheduled plan's peak device memory: its arena and the reserve beside it (kernel scratch,
/// the cuBLASLt workspace, token inputs, constants, the streamed masters' staging).
int64_t planDeviceBytes(const plan::Plan &plan);

/// Refuses (std::runtime_error naming `flag`), before any work, an output a run could not
/// write at its end (a folder that is missing or not writable) or one that would overwrite
/// the plan at `planPath` or a file its parameters start from. "" is no output.
void checkOutputPath(const std::string &flag, const std::string &path, const plan::Plan &plan,
                     const std::string &planPath);

/// The values fed to `input` of `program` out of `inputs` (by name), checked before any
/// work: as many as its shape holds, and for a mask read as a span of tokens, each row's
/// nonzero entries one run. Throws std::runtime_error naming the input, row and position.
const std::vector<int64_t> &stepInput(const plan::Program &program, const plan::Input &input,
                                      const std::map<std::string, std::vector<int64_t>> &inputs);

/// Bytes per element of a dtype as stored in files and constants (booleans take one byte).
int64_t bytesPerElement(plan::DType dtype);
int64_t numElements(const plan::TensorType &type);

/// Whether a dtype holds floating-point elements.
bool isFloatDType(plan::DType dtype);
/// One stored element (little-endian bytes of `dtype`) of a float or an integer dtype.
double decodeReal(const char *bytes, plan::DType dtype);
int64_t decodeInteger(const char *bytes, plan::DType dtype);

} // namespace mt

#endif // MT_RUNTIME_PLANLOADER_H
