// The op families of a step's profile, and its table and metrics.
#include "runtime/train/StepProfile.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace mt {

namespace {

constexpr const char *kNames[kOpFamilies] = {
    "products", "attention", "norms", "rope", "elementwise", "loss", "waits", "copies", "adamw"};

bool onComputeStream(int family) { return family <= static_cast<int>(OpFamily::Loss); }

} // namespace

const char *familyName(OpFamily family) { return kNames[static_cast<int>(family)]; }

OpFamily familyOf(const std::string &op) {
  auto is = [&](std::initializer_list<const char *> names) {
    return std::any_of(names.begin(), names.end(), [&](const char *name) { return op == name; });
  };
  if (is({"mt.matmul", "mt.linear"}))
    return OpFamily::Products;
  if (is({"mt.attention", "mt.attention_grad", "mt.key_span"}))
    return OpFamily::Attention;
  if (is({"mt.rms_norm", "mt.rms_norm_grad", "mt.layer_norm", "mt.layer_norm_grad"}))
    return OpFamily::Norms;
  if (is({"mt.rope", "mt.rope_grad"}))
    return OpFamily::Rope;
  if (is({"mt.cross_entropy", "mt.cross_entropy_grad", "mt.linear_cross_entropy",
          "mt.linear_cross_entropy_grad"}))
    return OpFamily::Loss;
  if (is({"mt.prefetch", "mt.offload"}))
    return OpFamily::Copies;
  return OpFamily::Elementwise;
}

void StepProfile::addKernel(const plan::Command &command, double ms) {
  for (FamilyTime *time :
       {&families[static_cast<int>(familyOf(command.op()))], &ops[command.op()]}) {
    time->ms += ms;
    time->flops += command.flops();
    time->bytes += command.bytes();
    time->flopMs += command.flops() > 0 ? ms : 0;
    ++time->kernels;
  }
}

void StepProfile::add(OpFamily family, double ms, double bytes, int64_t kernels,
                      double parameters) {
  FamilyTime &time = families[static_cast<int>(family)];
  time.ms += ms;
  time.bytes += bytes;
  time.kernels += kernels;
  time.parameters += parameters;
}

void StepProfile::setStepMs(double ms) {
  stepMs = ms;
  double compute = 0;
  for (int f = 0; f < kOpFamilies; ++f)
    if (onComputeStream(f))
      compute += families[f].ms;
  families[static_cast<int>(OpFamily::Waits)].ms = std::max(0.0, ms - compute);
}

std::string StepProfile::table(int heaviest) const {
  std::string out = "profile     | family      |      ms |  share | kernels | achieved\n";
  char line[192];
  auto row = [&](const std::string &name, const FamilyTime &time, const char *note,
                 int width = 11) {
    char rate[32] = "";
    if (time.flops > 0 && time.ms > 0)
      std::snprintf(rate, sizeof rate, "%.3g TFLOP/s ", time.flops / time.ms / 1e9);
    else if (time.bytes > 0 && time.ms > 0)
      std::snprintf(rate, sizeof rate, "%.3g GB/s ", time.bytes / time.ms / 1e6);
    std::snprintf(line, sizeof line, "profile     | %-*s | %7.1f | %5.1f%% | %7lld | %s%s\n", width,
                  name.c_str(), time.ms, stepMs > 0 ? 100.0 * time.ms / stepMs : 0.0,
                  static_cast<long long>(time.kernels), rate, note);
    return std::string(line);
  };
  for (int f = 0; f < kOpFamilies; ++f) {
    const FamilyTime &time = families[f];
    if (time.ms == 0 && time.kernels == 0)
      continue;
    bool beside = !onComputeStream(f) && f != static_cast<int>(OpFamily::Waits);
    out += row(kNames[f], time, beside ? "(beside the compute stream)" : "");
  }
  std::snprintf(line, sizeof line,
                "profile     | step        | %7.1f | shares of the compute stream add to 100%%\n",
                stepMs);
  out += line;
  // The heaviest ops: what to look at inside a family (a transpose among the elementwise).
  std::vector<std::pair<std::string, const FamilyTime *>> sorted;
  for (const auto &[name, time] : ops)
    sorted.push_back({name, &time});
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto &a, const auto &b) { return a.second->ms > b.second->ms; });
  if (sorted.size() > static_cast<size_t>(std::max(heaviest, 0)))
    sorted.resize(std::max(heaviest, 0));
  if (!sorted.empty())
    out += "profile     | heaviest ops, ms, share, kernels, achieved:\n";
  size_t width = 11;
  for (const auto &entry : sorted)
    width = std::max(width, entry.first.size() + 2);
  for (const auto &[name, time] : sorted)
    out += row("  " + name, *time, "", static_cast<int>(width));
  return out;
}

StepMeasureList StepProfile::measures() const {
  StepMeasureList list;
  for (int f = 0; f < kOpFamilies; ++f) {
    const FamilyTime &time = families[f];
    if (time.ms == 0 && time.kernels == 0)
      continue;
    std::string key = std::string("profile_") + kNames[f];
    list.push_back({key + "_ms", time.ms});
    list.push_back({key + "_share", stepMs > 0 ? time.ms / stepMs : 0.0});
    if (time.flops > 0 && time.ms > 0)
      list.push_back({key + "_tflops", time.flops / time.ms / 1e9});
    else if (time.bytes > 0 && time.ms > 0)
      list.push_back({key + "_gbps", time.bytes / time.ms / 1e6});
    if (time.parameters > 0 && time.ms > 0)
      list.push_back({key + "_gparams", time.parameters / time.ms / 1e6});
  }
  return list;
}

std::string StepProfile::calibrate(DeviceProfile &profile) const {
  std::string set;
  // Work over the time of the kernels counted in that unit, as the cost model charges them.
  auto rate = [&](std::initializer_list<OpFamily> kinds, bool flops, double &into,
                  const char *what) {
    double ms = 0, work = 0;
    for (OpFamily kind : kinds) {
      const FamilyTime &time = (*this)[kind];
      ms += flops ? time.flopMs : time.ms - time.flopMs;
      work += flops ? time.flops : time.bytes;
    }
    if (ms <= 0 || work <= 0)
      return;
    into = work / (ms / 1e3);
    char line[96];
    std::snprintf(line, sizeof line, "%s%s %.4g %s", set.empty() ? "" : ", ", what,
                  into / (flops ? 1e12 : 1e9), flops ? "TFLOP/s" : "GB/s");
    set += line;
  };
  rate({OpFamily::Products, OpFamily::Loss}, true, profile.gemmFlopsPerSecond, "products");
  rate({OpFamily::Attention}, true, profile.attentionFlopsPerSecond, "attention");
  rate({OpFamily::Products, OpFamily::Attention, OpFamily::Norms, OpFamily::Rope,
        OpFamily::Elementwise, OpFamily::Loss},
       false, profile.memoryBytesPerSecond, "memory-bound kernels");
  // A pulled step's AdamW time holds each tensor's wait for its first chunk, which the cost
  // model charges apart: it leaves both rates as --calibrate measured them.
  if (const FamilyTime &adamw = (*this)[OpFamily::AdamW];
      adamw.ms > 0 && adamw.parameters > 0 && !pulled) {
    // The rate alone, as the profile keeps it: beside the step, its copies took their share
    // of the host's memory from it (adamwSlowdown, as the cost model charges them back).
    double copied = updatesBesideCopies ? (*this)[OpFamily::Copies].bytes : 0;
    profile.hostAdamParamsPerSecond =
        adamw.parameters / (adamw.ms / 1e3) * adamwSlowdown(adamw.bytes, copied);
    char line[64];
    std::snprintf(line, sizeof line, "%sAdamW %.4g G params/s", set.empty() ? "" : ", ",
                  profile.hostAdamParamsPerSecond / 1e9);
    set += line;
  }
  return set;
}

} // namespace mt
