// The backend registry, and what a backend does by default.
#include "runtime/train/StepBackend.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace mt {

namespace {

std::vector<BackendKind> &registry() {
  static std::vector<BackendKind> kinds;
  return kinds;
}

} // namespace

std::vector<int> StepBackend::readOrder(int parameters) const {
  std::vector<int> order(parameters);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

double StepBackend::updateOnDevice(int p, const AdamWConstants &, bool) {
  throw std::logic_error("parameter " + std::to_string(p) + " is not updated on the device");
}

double StepBackend::gradientSquares(int p) {
  throw std::logic_error("the gradient of parameter " + std::to_string(p) +
                         " is not measured on the device");
}

void StepBackend::writeTrace(const std::string &path, const std::vector<UpdateSpan> &) const {
  throw std::runtime_error("--trace " + path + ": this backend measures no streams");
}

void registerBackend(BackendKind kind) {
  for (const BackendKind &known : registry())
    if (known.name == kind.name)
      throw std::logic_error("backend " + kind.name + " registered twice");
  registry().push_back(std::move(kind));
}

std::string backendNames() {
  std::string names;
  for (const BackendKind &kind : registry())
    names += (names.empty() ? "" : ", ") + kind.name;
  return names;
}

const BackendKind *findLauncher() {
  for (const BackendKind &kind : registry())
    if (kind.launch)
      return &kind;
  return nullptr;
}

const BackendKind &findBackend(const std::string &name) {
  const BackendKind *best = nullptr;
  for (const BackendKind &kind : registry()) {
    if (kind.name == name) {
      if (!kind.available())
        throw std::runtime_error("--backend=" + name + ": " + kind.unavailable);
      return kind;
    }
    if (name == "auto" && kind.available() && (!best || kind.preference > best->preference))
      best = &kind;
  }
  if (best)
    return *best;
  if (name == "auto")
    throw std::logic_error("no backend is available (registered: " + backendNames() + ")");
  if (name == "cuda") // the one backend a build can leave out
    throw std::runtime_error("--backend=cuda needs an mt-run built with the CUDA toolkit");
  throw std::runtime_error("--backend must be auto or one of " + backendNames() + ", got " + name);
}

} // namespace mt
