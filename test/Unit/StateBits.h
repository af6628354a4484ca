// What the unit tests of training share: a host state's masters and moments as one array of
// bits, compared exactly.
#ifndef MT_TEST_UNIT_STATEBITS_H
#define MT_TEST_UNIT_STATEBITS_H

#include "runtime/HostState.h"

#include <cstring>
#include <vector>

namespace mt::test {

/// The state's masters (split ones joined) and moments, flattened.
inline std::vector<float> bitsOf(const HostState &state) {
  std::vector<float> bits;
  for (const ParameterState &p : state.parameters) {
    std::vector<float> masters = p.masters();
    bits.insert(bits.end(), masters.begin(), masters.end());
    for (const float *array : {p.firstMoment, p.secondMoment})
      bits.insert(bits.end(), array, array + p.count);
  }
  return bits;
}

inline bool same(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace mt::test

#endif // MT_TEST_UNIT_STATEBITS_H
