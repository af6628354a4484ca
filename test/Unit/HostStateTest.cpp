// Unit test of the host state's random draw (runtime/HostState::initializeRandomly): a state of
// several draw runs holds the same weights on every rank (each its shard), its first run is
// what a single generator draws, and vectors start at one (biases at zero).
#include "runtime/HostState.h"
#include "test/Unit/Expect.h"

#include <cstdio>
#include <cstring>
#include <random>
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

  // Run 0 (the first 2^20 elements of the sequence) is a single generator's draw.
  std::mt19937_64 generator(11);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  bool first = true;
  for (int64_t i = 0; i < 700000; ++i)
    first = first && whole.parameters[0].master[i] == normal(generator);
  check(first, "the first run is not a single generator's draw");
  check(whole.parameters[1].master[7] == 1.0f && whole.parameters[2].master[7] == 0.0f,
        "a vector starts at one, a bias at zero");
  std::printf("one run: a single generator's draw; vectors one, biases zero\n");

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
  std::printf("several runs: every rank's shard is the whole state's, every draw the same\n");
  return failures ? 1 : 0;
}
