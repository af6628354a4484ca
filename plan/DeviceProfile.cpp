// The device profile's JSON form: written by calibration, read by the compiler.
#include "plan/DeviceProfile.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

namespace mt {

namespace {

struct Field {
  const char *key;
  double DeviceProfile::*value;
};

constexpr Field kFields[] = {
    {"gemm_flops_per_second", &DeviceProfile::gemmFlopsPerSecond},
    {"memory_bytes_per_second", &DeviceProfile::memoryBytesPerSecond},
    {"h2d_bytes_per_second", &DeviceProfile::h2dBytesPerSecond},
    {"d2h_bytes_per_second", &DeviceProfile::d2hBytesPerSecond},
    {"duplex_factor", &DeviceProfile::duplexFactor},
    {"host_adam_params_per_second", &DeviceProfile::hostAdamParamsPerSecond},
    {"device_memory_bytes", &DeviceProfile::deviceMemoryBytes},
};
/// Optional: profiles calibrated before mt recorded them leave them unknown (0).
constexpr Field kOptionalFields[] = {
    {"host_memory_bytes", &DeviceProfile::hostMemoryBytes},
    {"attention_flops_per_second", &DeviceProfile::attentionFlopsPerSecond},
    {"host_adam_pulled_params_per_second", &DeviceProfile::hostAdamPulledParamsPerSecond},
};

/// Of cuBLASLt's bf16 GEMM rate, what cuDNN's flash attention (mt-run's default) reached
/// beside it (forward and backward, FLOPs counted over every key): 720 TFLOP/s against the
/// built-in H200 profile's 750.
constexpr double kAttentionShareOfGemm = 720.0 / 750.0;

/// A reader of one flat JSON object whose members are strings or numbers.
class FlatObject {
public:
  explicit FlatObject(const std::string &text) : text(text) {}

  /// The members, or a message naming where the text stops being such an object.
  bool read(std::map<std::string, std::string> &strings, std::map<std::string, double> &numbers,
            std::string &error) {
    if (!take('{'))
      return fail("expected '{'", error);
    if (take('}'))
      return end(error);
    do {
      std::string key;
      if (!string(key) || !take(':'))
        return fail("expected \"name\": value", error);
      skipSpace();
      if (at < text.size() && text[at] == '"') {
        if (!string(strings[key]))
          return fail("unterminated string", error);
        continue;
      }
      const char *begin = text.c_str() + at;
      char *stop = nullptr;
      double value = std::strtod(begin, &stop);
      if (stop == begin)
        return fail("expected a number or a string for \"" + key + "\"", error);
      at += stop - begin;
      numbers[key] = value;
    } while (take(','));
    if (!take('}'))
      return fail("expected ',' or '}'", error);
    return end(error);
  }

private:
  void skipSpace() {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
  }
  bool take(char c) {
    skipSpace();
    if (at < text.size() && text[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  bool string(std::string &out) {
    if (!take('"'))
      return false;
    out.clear();
    for (; at < text.size() && text[at] != '"'; ++at) {
      if (text[at] == '\\' && at + 1 < text.size())
        ++at;
      out += text[at];
    }
    return at++ < text.size();
  }
  bool end(std::string &error) {
    skipSpace();
    return at == text.size() || fail("text after the object", error);
  }
  bool fail(const std::string &what, std::string &error) {
    error = what + " at offset " + std::to_string(at);
    return false;
  }

  const std::string &text;
  size_t at = 0;
};

} // namespace

std::string deviceProfileJson(const DeviceProfile &profile) {
  std::ostringstream out;
  out.precision(6);
  out << "{\n  \"name\": \"";
  for (char c : profile.name)
    out << (c == '"' || c == '\\' ? "\\" : "") << c;
  out << "\"";
  for (const Field &field : kFields)
    out << ",\n  \"" << field.key << "\": " << profile.*field.value;
  for (const Field &field : kOptionalFields)
    if (profile.*field.value > 0)
      out << ",\n  \"" << field.key << "\": " << profile.*field.value;
  out << "\n}\n";
  return out.str();
}

std::optional<DeviceProfile> parseDeviceProfile(const std::string &text, std::string &error) {
  std::map<std::string, std::string> strings;
  std::map<std::string, double> numbers;
  if (!FlatObject(text).read(strings, numbers, error))
    return std::nullopt;
  DeviceProfile profile;
  profile.name = strings["name"];
  for (const Field &field : kFields) {
    auto it = numbers.find(field.key);
    if (it == numbers.end() || !(it->second > 0)) {
      error = std::string("needs a positive number \"") + field.key + "\"";
      return std::nullopt;
    }
    profile.*field.value = it->second;
  }
  for (const Field &field : kOptionalFields)
    if (auto it = numbers.find(field.key); it != numbers.end()) {
      if (!(it->second > 0)) {
        error = std::string("\"") + field.key + "\" must be a positive number";
        return std::nullopt;
      }
      profile.*field.value = it->second;
    }
  return profile;
}

double attentionRate(const DeviceProfile &profile) {
  return profile.attentionFlopsPerSecond > 0 ? profile.attentionFlopsPerSecond
                                             : profile.gemmFlopsPerSecond * kAttentionShareOfGemm;
}

double pulledGradientCacheShare(const DeviceProfile &profile) {
  if (!(profile.hostAdamPulledParamsPerSecond > 0 && profile.hostAdamParamsPerSecond > 0))
    return 0;
  double bytes =
      adamwBytes(1) * profile.hostAdamParamsPerSecond / profile.hostAdamPulledParamsPerSecond;
  return std::clamp((adamwBytes(1) + 4 - bytes) / 8, 0.0, 1.0);
}

double adamwSlowdown(double adamwBytes, double copiedBytes) {
  return adamwBytes > 0 ? 1 + copiedBytes / adamwBytes : 1;
}

} // namespace mt
