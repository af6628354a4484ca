// Calibration of the host backend: each rate is the best of a few timed runs of the kernel
// the plans use for it.
#include "runtime/Calibration.h"

#include "plan/DeviceProfile.h"

#include "runtime/AdamW.h"
#include "runtime/HostState.h"
#include "runtime/host/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace mt {

namespace {

/// The shortest of `runs` timings of `work`, in seconds.
double fastest(int runs, const std::function<void()> &work) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

host::HostTensor<float> filled(host::Shape shape, float value) {
  host::HostTensor<float> tensor;
  tensor.shape = std::move(shape);
  tensor.reals.assign(tensor.size(), value);
  return tensor;
}

void run(const std::string &op, const std::vector<const host::HostTensor<float> *> &operands,
         host::HostTensor<float> &result) {
  plan::Command command;
  command.set_op(op);
  host::runKernel<float>(command, operands, {&result});
}

} // namespace

std::string calibrateHost(const std::string &path) {
  const int64_t n = 768;
  host::HostTensor<float> a = filled({n, n}, 0.5f), b = filled({n, n}, 0.25f),
                          c = filled({n, n}, 0.0f);
  double gemm = 2.0 * n * n * n / fastest(3, [&] { run("mt.matmul", {&a, &b}, c); });

  const int64_t elements = 1 << 23;
  host::HostTensor<float> x = filled({elements}, 1.0f), y = filled({elements}, 2.0f),
                          z = filled({elements}, 0.0f);
  double memory = 3.0 * elements * 4 / fastest(3, [&] { run("mt.add", {&x, &y}, z); });

  // On the host backend a copy between host and device memory is a memcpy.
  std::vector<char> source(256 << 20, 1), target(256 << 20), second(256 << 20);
  double copy = source.size() / fastest(3, [&] {
                  std::memcpy(target.data(), source.data(), source.size());
                });
  double both = source.size() / fastest(3, [&] {
                  std::thread other([&] { std::memcpy(second.data(), source.data(), source.size()); });
                  std::memcpy(target.data(), source.data(), source.size());
                  other.join();
                });

  plan::AdamW adamw;
  adamw.set_beta1(0.9);
  adamw.set_beta2(0.999);
  adamw.set_eps(1e-8);
  std::vector<float> param(elements, 1.0f), m(elements), v(elements), grad(elements, 0.1f);
  double adam = elements / fastest(3, [&] {
                  adamwUpdate(param.data(), m.data(), v.data(), grad.data(), elements, 1e-3, 0.01,
                              adamw, 1);
                });
  auto ram = static_cast<double>(physicalHostBytes());

  DeviceProfile profile{"host backend", gemm, memory, copy, copy, std::min(1.0, both / copy),
                        adam,           ram,  ram};
  std::ofstream out(path);
  out << deviceProfileJson(profile);
  if (!out)
    throw std::runtime_error("cannot write " + path);
  std::ostringstream table;
  table << "host backend, measured\n"
        << "  GEMM (fp32, " << n << "^3)       " << gemm / 1e9 << " GFLOP/s\n"
        << "  memory-bound kernel (add)  " << memory / 1e9 << " GB/s\n"
        << "  copy                       " << copy / 1e9 << " GB/s (" << both / 1e9
        << " GB/s each with two at once)\n"
        << "  AdamW                      " << adam / 1e9 << " G params/s\n"
        << "  memory                     " << ram / (1 << 30) << " GiB\n"
        << "profile written to " << path << "\n";
  return table.str();
}

} // namespace mt
