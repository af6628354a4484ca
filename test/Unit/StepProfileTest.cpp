// Unit test of a step's profile (runtime/train/StepProfile): kernels summed by op family,
// Waits what the compute families leave of the step, and the rates a device profile takes
// from it, each over the time of the kernels counted in its unit.
#include "runtime/train/StepProfile.h"
#include "test/Unit/Expect.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace {

using mt::test::check;
using mt::test::failures;

mt::plan::Command command(const std::string &op, double flops, double bytes) {
  mt::plan::Command c;
  c.set_op(op);
  c.set_flops(flops);
  c.set_bytes(bytes);
  return c;
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::fabs(b); }

} // namespace

int main() {
  mt::StepProfile profile;
  // Products: 2e12 FLOP in 4 ms. The loss: a fused loss (1e12 FLOP in 2 ms) and an unfused
  // cross-entropy counted in bytes (1e9 bytes in 1 ms). Attention: 3e11 FLOP in 2 ms and its
  // key lengths (1e6 bytes in 0.5 ms). Elementwise and norms: 3e9 bytes in 2 ms.
  profile.addKernel(command("mt.linear", 1e12, 0), 1.5);
  profile.addKernel(command("mt.matmul", 1e12, 0), 2.5);
  profile.addKernel(command("mt.linear_cross_entropy", 1e12, 0), 2);
  profile.addKernel(command("mt.cross_entropy", 0, 1e9), 1);
  profile.addKernel(command("mt.attention", 3e11, 0), 2);
  profile.addKernel(command("mt.key_span", 0, 1e6), 0.5);
  profile.addKernel(command("mt.add", 0, 2e9), 1.5);
  profile.addKernel(command("mt.rms_norm", 0, 1e9), 0.5);
  profile.add(mt::OpFamily::Copies, 3, 1e9, 2);     // beside the compute stream
  profile.add(mt::OpFamily::AdamW, 4, 1e9, 3, 2e7); // 20M parameters in 4 ms, on the CPU
  profile.setStepMs(16);
  check(profile[mt::OpFamily::Products].kernels == 2 && profile[mt::OpFamily::Loss].ms == 3,
        "kernels by family");
  check(near(profile[mt::OpFamily::Waits].ms, 16 - 11.5), "waits: what the compute families leave");
  std::printf("families: kernels summed, waits the rest of the step\n");

  // Each op on its own too; the table lists the heaviest (ties in name order) after the
  // families.
  check(profile.byOp().at("mt.linear").kernels == 1 && profile.byOp().at("mt.add").ms == 1.5 &&
            profile.byOp().size() == 8,
        "kernels by op");
  std::string table = profile.table(2);
  size_t matmul = table.find("|   mt.matmul    |     2.5 |  15.6% |       1 | 400 TFLOP/s");
  size_t attention = table.find("|   mt.attention |     2.0 |  12.5% |       1 | 150 TFLOP/s");
  check(matmul != std::string::npos && attention != std::string::npos && matmul < attention &&
            table.find("mt.linear_cross_entropy") == std::string::npos &&
            table.find("heaviest ops") < matmul,
        "the heaviest two ops after the families:\n" + table);
  std::printf("ops: the heaviest listed after the families\n");

  mt::DeviceProfile device;
  device.gemmFlopsPerSecond = 1;
  device.attentionFlopsPerSecond = 1;
  device.memoryBytesPerSecond = 1;
  device.h2dBytesPerSecond = 7;
  std::string set = profile.calibrate(device);
  // GEMMs: 3e12 FLOP over the 6 ms of kernels counted in FLOPs (the cross-entropy's byte-bound
  // millisecond is not theirs); attention 3e11 over 2 ms; memory: every byte-counted kernel,
  // 1e9 + 1e6 + 2e9 + 1e9 bytes over 1 + 0.5 + 1.5 + 0.5 ms.
  check(near(device.gemmFlopsPerSecond, 3e12 / 6e-3),
        "GEMM rate " + std::to_string(device.gemmFlopsPerSecond));
  check(near(device.attentionFlopsPerSecond, 3e11 / 2e-3),
        "attention rate " + std::to_string(device.attentionFlopsPerSecond));
  check(near(device.memoryBytesPerSecond, (4e9 + 1e6) / 3.5e-3),
        "memory rate " + std::to_string(device.memoryBytesPerSecond));
  check(device.h2dBytesPerSecond == 7, "copies leave the profile's copy rates alone");
  // AdamW ran at 5 G parameters a second, its 1e9 bytes sharing host memory with the
  // copies' 1e9: alone, twice that (the rate the cost model slows by the copies again).
  check(near(device.hostAdamParamsPerSecond, 2 * 2e7 / 4e-3) &&
            set.find(", AdamW 10 G params/s") != std::string::npos,
        "AdamW's rate alone: " + set);
  check(set.find("products 500 TFLOP/s, attention 150 TFLOP/s, memory-bound kernels") == 0,
        "the line: " + set);
  // Updates that ran after the step's runs (several a step) shared nothing: as measured.
  mt::StepProfile alone = profile;
  alone.updatesRanAlone();
  mt::DeviceProfile afterRuns;
  alone.calibrate(afterRuns);
  check(near(afterRuns.hostAdamParamsPerSecond, 2e7 / 4e-3),
        "AdamW after the runs: " + std::to_string(afterRuns.hostAdamParamsPerSecond));
  std::printf("calibration: each rate over the time of the kernels counted in its unit, and "
              "AdamW's alone\n");

  // A step that timed no kernel sets nothing.
  mt::DeviceProfile untouched = device;
  check(mt::StepProfile().calibrate(untouched).empty() &&
            untouched.gemmFlopsPerSecond == device.gemmFlopsPerSecond,
        "an empty profile sets nothing");
  std::printf("an empty profile sets nothing\n");
  return failures ? 1 : 0;
}
