// What unit tests share: an expectation that, when it does not hold, prints "FAIL: ..." (which
// every unit test's FileCheck refuses) and is counted for the exit code.
#ifndef MT_TEST_UNIT_EXPECT_H
#define MT_TEST_UNIT_EXPECT_H

#include <cstdio>
#include <string>

namespace mt::test {

inline int failures = 0;

inline void check(bool ok, const std::string &what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    std::fprintf(stderr, "FAIL: %s\n", what.c_str()); // lit shows stderr when a test fails
    ++failures;
  }
}

} // namespace mt::test

#endif // MT_TEST_UNIT_EXPECT_H
