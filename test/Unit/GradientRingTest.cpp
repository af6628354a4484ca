// Unit test of the gradient ring's layout (plan/DeviceLayout.h), which the runtime places
// gradients by and the cost model simulates: wrap-around, overlaps, and a depth that holds
// every gradient however deep it is asked to be; and the chunks a pulled gradient crosses in.
#include "plan/DeviceLayout.h"
#include "test/Unit/Expect.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <vector>

using mt::test::check;

int main() {
  // Three gradients of 4, 4 and 3 bytes in a ring of 10: the third passes the end and goes
  // back to the start, over the first's bytes.
  auto places = mt::placeInRing({4, 4, 3}, 10);
  check(places.size() == 3 && places[0] == std::make_pair<int64_t, int64_t>(0, 4) &&
            places[1] == std::make_pair<int64_t, int64_t>(4, 8) &&
            places[2] == std::make_pair<int64_t, int64_t>(0, 3),
        "placeInRing wraps a gradient that would pass the end to the start");
  // One that fits exactly stays; the next starts over.
  places = mt::placeInRing({5, 5, 5}, 10);
  check(places[1] == std::make_pair<int64_t, int64_t>(5, 10) &&
            places[2] == std::make_pair<int64_t, int64_t>(0, 5),
        "placeInRing keeps a gradient that ends at the end");
  // A ring as large as every gradient: no two overlap.
  places = mt::placeInRing({3, 7, 2, 9}, 21);
  bool disjoint = true;
  for (size_t i = 0; i < places.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      disjoint &= places[i].second <= places[j].first || places[j].second <= places[i].first;
  check(disjoint, "placeInRing gives every gradient its own bytes in a ring that holds them all");
  std::printf("placeInRing: wraps at the end, every gradient its own bytes when all fit\n");

  check(mt::gradientRingBytes(3, 100, 1000) == 300, "gradientRingBytes: depth times unit");
  check(mt::gradientRingBytes(10, 100, 950) == 950, "gradientRingBytes: at most every gradient");
  check(mt::gradientRingBytes(std::numeric_limits<int64_t>::max(), int64_t(1) << 40,
                              int64_t(1) << 42) == int64_t(1) << 42,
        "gradientRingBytes: a depth whose bytes overflow holds every gradient");
  check(mt::gradientRingBytes(0, 100, 1000) == 0 && mt::gradientRingBytes(3, 0, 1000) == 0,
        "gradientRingBytes: no depth or no unit, no ring");
  std::printf("gradientRingBytes: saturates at every gradient, never overflows\n");

  // A gradient of 25Mi + 5 elements through 4Mi-element slots: 1Mi, 2Mi, then 4Mi chunks,
  // the last the 5 left over; contiguous, none over a slot.
  const int64_t Mi = int64_t{1} << 20, large = 25 * Mi + 5;
  std::vector<int64_t> begins = mt::pullChunks(large, 4 * Mi);
  std::vector<int64_t> expected{0, Mi, 3 * Mi};
  for (int64_t at = 3 * Mi + 4 * Mi; at < large; at += 4 * Mi)
    expected.push_back(at);
  expected.push_back(large);
  check(begins == expected, "pullChunks: 1Mi, 2Mi, then a slot's 4Mi, to the end");
  // Smaller than the first chunk: one chunk, also through slots the size of the largest
  // gradient (the runtime's where every gradient is smaller than kPullChunk). Slots smaller
  // than the first chunk cap every chunk. Nothing to pull: no chunk; no slot: refused.
  check(mt::pullChunks(1000, 4 * Mi) == std::vector<int64_t>{0, 1000} &&
            mt::pullChunks(1000, 1000) == std::vector<int64_t>{0, 1000},
        "pullChunks: a gradient smaller than the first chunk crosses whole");
  check(mt::pullChunks(2500, 1000) == std::vector<int64_t>{0, 1000, 2000, 2500},
        "pullChunks: slots smaller than the first chunk cap every chunk");
  check(mt::pullChunks(0, 4 * Mi) == std::vector<int64_t>{0}, "pullChunks: none for nothing");
  bool refused = false;
  try {
    mt::pullChunks(10, 0);
  } catch (const std::invalid_argument &) {
    refused = true;
  }
  check(refused, "pullChunks: refuses a gradient with no slot to cross through");
  std::printf("pullChunks: contiguous, growing to a slot, none over a slot\n");
  return mt::test::failures ? 1 : 0;
}
