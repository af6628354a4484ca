// Unit test of the host state's random draw (runtime/HostState::initializeRandomly): a state of
// several draw runs holds the same weights on every rank (each its shard), matrices are drawn
// from N(0, 0.02), vectors start at one (biases at zero), and the seed decides the draw.
#include "runtime/HostState.h"
#include "runtime/MasterHalves.h"
#include "test/Unit/Expect.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

using mt::test::check;
using mt::test::failures;

mt::plan::Plan planOf() {
  mt::plan::Plan plan;
  auto add = [&](const char *name, std::initializer_list<int64_t> shape, int64_t layer) {
    mt::plan::Parameter *parameter = plan.add_parameters();
    parameter->set_name(name);
    parameter->set_layer(layer);
    parameter->mutable_type()->set_dtype(mt::plan::F32);
    for (int64_t d : shape)
      parameter->mutable_type()->add_shape(d);
  };
  add("embed", {1000, 700}, -1); // 700,000 elements: the first run and part of the second
  add("norm.weight", {300}, 0);
  add("proj.bias", {300}, 0);
  add("proj", {1500, 1000}, 0); // 1,500,000: runs 1 and 2
  return plan;
}

} // namespace

int main() {
  mt::plan::Plan plan = planOf();
  mt::HostState whole(plan, /*streamCopy=*/false);
  whole.initializeRandomly(11);

  // Matrices draw N(0, 0.02): 2.2M elements' mean and deviation, and no element twice.
  double sum = 0, squares = 0;
  int64_t count = 0, repeats = 0;
  for (int p : {0, 3}) {
    const mt::ParameterState &matrix = whole.parameters[p];
    for (int64_t i = 0; i < matrix.count; ++i) {
      sum += matrix.master[i];
      squares += static_cast<double>(matrix.master[i]) * matrix.master[i];
      repeats += i > 0 && matrix.master[i] == matrix.master[i - 1];
    }
    count += matrix.count;
  }
  double mean = sum / count, deviation = std::sqrt(squares / count - mean * mean);
  check(std::abs(mean) < 1e-4 && std::abs(deviation - 0.02) < 1e-4 && repeats == 0,
        "the draw's mean " + std::to_string(mean) + ", deviation " + std::to_string(deviation) +
            ", repeats " + std::to_string(repeats));
  check(whole.parameters[1].master[7] == 1.0f && whole.parameters[2].master[7] == 0.0f,
        "a vector starts at one, a bias at zero");
  std::printf("matrices N(0, 0.02); vectors one, biases zero\n");

  // Every rank's shard of the masters is the whole state's.
  for (int rank = 0; rank < 3; ++rank) {
    mt::HostState shard(plan, false, rank, 3, mt::HostState::Masters::Sharded);
    shard.initializeRandomly(11);
    for (size_t p = 0; p < plan.parameters().size(); ++p) {
      const mt::ParameterState &mine = shard.parameters[p];
      check(std::memcmp(mine.master, whole.parameters[p].master + mine.held.begin,
                        mine.held.size() * sizeof(float)) == 0,
            "rank " + std::to_string(rank) + " drew other weights for " +
                plan.parameters(p).name());
    }
  }
  mt::HostState again(plan, false);
  again.initializeRandomly(11);
  bool same = true;
  for (size_t p = 0; p < plan.parameters().size(); ++p)
    same = same && std::memcmp(again.parameters[p].master, whole.parameters[p].master,
                               whole.parameters[p].count * sizeof(float)) == 0;
  check(same, "a second draw differs");
  mt::HostState other(plan, false);
  other.initializeRandomly(12);
  check(std::memcmp(other.parameters[3].master, whole.parameters[3].master,
                    whole.parameters[3].count * sizeof(float)) != 0,
        "another seed draws the same");
  std::printf("several runs: every rank's shard is the whole state's, every draw the same\n");

  // Split masters (a device's state): the same draw, in the same bytes, each high half (the
  // bf16 copy the device streams) the master's rounding; what is written comes back.
  mt::HostState split(plan, /*streamCopy=*/true);
  split.initializeRandomly(11);
  bool drawn = true, rounded = true;
  for (size_t p = 0; p < plan.parameters().size(); ++p) {
    const mt::ParameterState &halves = split.parameters[p], &floats = whole.parameters[p];
    std::vector<float> joined = halves.masters();
    drawn = drawn && halves.master == nullptr &&
            std::memcmp(joined.data(), floats.master, floats.count * sizeof(float)) == 0;
    for (int64_t i = 0; i < floats.count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &floats.master[i], 4);
      rounded = rounded && halves.streamCopy[i] == mt::highHalf(bits);
    }
  }
  check(drawn && rounded && split.bytes() == whole.bytes(),
        "split masters: another draw, other copies or other bytes (" +
            std::to_string(split.bytes()) + " against " + std::to_string(whole.bytes()) + ")");
  std::vector<float> written = {0.1f, -3.0e-20f, 1.00390625f, 65504.0f};
  split.parameters[3].writeMasters(5, 4, written.data());
  std::vector<float> back(4);
  split.parameters[3].readMasters(5, 4, back.data());
  check(std::memcmp(back.data(), written.data(), 16) == 0 &&
            split.parameters[3].masters()[4] == whole.parameters[3].master[4],
        "split masters written do not read back");
  // Joined in place at the end (for the saved weights): whole masters, the same values.
  std::vector<std::vector<float>> before;
  for (const mt::ParameterState &parameter : split.parameters)
    before.push_back(parameter.masters());
  split.joinMasters();
  bool joined = true;
  for (size_t p = 0; p < plan.parameters().size(); ++p) {
    const mt::ParameterState &parameter = split.parameters[p];
    joined = joined && parameter.master && !parameter.streamCopy && !parameter.masterLow &&
             std::memcmp(parameter.master, before[p].data(), before[p].size() * 4) == 0;
  }
  check(joined, "split masters joined in place are not the masters they held");
  std::printf("split masters: the same draw in the same bytes, each high half its master's "
              "rounding; joined in place, the same masters\n");
  return failures ? 1 : 0;
}
