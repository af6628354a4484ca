// Unit test of checkpoints written while training goes on (runtime/train/CheckpointWriter):
// updates that change the state while a checkpoint is written, in the writers' order or
// against it, with copy memory for all of it, some or none, leave the checkpoint holding the
// state it began from, bit for bit; and a checkpoint begun while another runs is refused.
#include "runtime/train/CheckpointWriter.h"

#include "runtime/HostState.h"
#include "test/Unit/Expect.h"
#include "test/Unit/StateBits.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using mt::test::bitsOf;
using mt::test::check;
using mt::test::failures;
using mt::test::same;

/// Parameters of several sizes: a matrix whose arrays take two of the writer's 64 MiB pieces
/// each, and small ones.
mt::plan::Plan planOf() {
  mt::plan::Plan plan;
  int64_t sizes[] = {17 << 20, 3000, 5, 1 << 16}, layers[] = {-1, 0, 0, 1};
  for (int p = 0; p < 4; ++p) {
    mt::plan::Parameter *parameter = plan.add_parameters();
    parameter->set_name("w" + std::to_string(p));
    parameter->set_layer(layers[p]);
    parameter->mutable_type()->set_dtype(mt::plan::F32);
    parameter->mutable_type()->add_shape(sizes[p]);
  }
  return plan;
}

/// What an update does to the state: every value of p changes.
void change(mt::ParameterState &p) {
  for (float *array : {p.master, p.firstMoment, p.secondMoment})
    for (int64_t i = 0; i < p.count; ++i)
      array[i] = array[i] * 0.5f + 1.0f;
}

} // namespace

int main(int argc, char **argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  mt::plan::Plan plan = planOf();
  mt::HostState state(plan, /*streamCopy=*/false);
  state.initializeRandomly(3);
  for (mt::ParameterState &p : state.parameters) // moments unlike the masters
    for (int64_t i = 0; i < p.count; ++i) {
      p.firstMoment[i] = p.master[i] * 3.0f;
      p.secondMoment[i] = static_cast<float>(i % 7);
    }
  const int64_t bytes = mt::checkpointBytes(state);
  mt::CheckpointWriter writer(dir + "/checkpoints", 8);

  // Each case: the updates run on a thread of their own (as the update worker), release
  // each parameter, then change it; the checkpoint holds the state of its step.
  struct Case {
    const char *what;
    std::vector<int> writerOrder, updateOrder;
    int64_t copyBytes;
  };
  const Case cases[] = {
      {"updates in the writers' order, copies for all", {0, 1, 2, 3}, {0, 1, 2, 3}, bytes},
      {"updates against the writers' order, no copies", {0, 1, 2, 3}, {3, 2, 1, 0}, 0},
      {"updates against the writers' order, copies for some",
       {3, 2, 1, 0},
       {0, 1, 2, 3},
       bytes / 4},
      {"the large parameter updated first, no copies", {3, 2, 1, 0}, {0, 3, 2, 1}, 0},
  };
  int64_t step = 0;
  for (const Case &c : cases) {
    ++step;
    std::vector<float> before = bitsOf(state);
    writer.begin(state, {step, 10 * step, 1000, "test-plan", 0}, c.writerOrder, c.copyBytes);
    std::string refused;
    try {
      writer.begin(state, {step + 100, 0, 1000, "test-plan", 0}, c.writerOrder, 0);
    } catch (const std::logic_error &error) {
      refused = error.what();
    }
    check(refused.find("after the one before it has finished") != std::string::npos,
          std::string(c.what) + ": a second write at once: " + refused);
    std::thread updates([&] {
      for (int p : c.updateOrder) {
        writer.release(p);
        change(state.parameters[p]);
      }
    });
    updates.join();
    std::optional<mt::CheckpointWriter::Written> written = writer.finish();
    check(written && written->step == step && written->bytes == bytes &&
              written->path.find("step-0000000" + std::to_string(step)) != std::string::npos,
          std::string(c.what) + ": the written checkpoint");
    check(!writer.poll() && !writer.finish(), std::string(c.what) + ": nothing left in flight");
    check(!same(bitsOf(state), before), std::string(c.what) + ": the updates changed nothing");

    mt::HostState read(plan, false);
    mt::CheckpointInfo info =
        mt::readCheckpoint(mt::findCheckpoint(dir + "/checkpoints"), read, "test-plan");
    check(info.step == step && info.dataPosition == 10 * step,
          std::string(c.what) + ": the newest checkpoint is step " + std::to_string(info.step));
    check(same(bitsOf(read), before),
          std::string(c.what) + ": the checkpoint holds other bits than its step's state");
    std::printf("%s: the checkpoint holds its step's bits\n", c.what);
  }

  // Split masters (a device's state) hold no fp32 bytes: the writer joins them into the file a
  // small buffer at a time, and the reader splits them back, into either kind of state. The
  // 17Mi-element parameter crosses many buffers and two pieces.
  mt::HostState split(plan, /*streamCopy=*/true);
  split.initializeRandomly(5);
  for (mt::ParameterState &p : split.parameters)
    for (int64_t i = 0; i < p.count; ++i)
      p.secondMoment[i] = static_cast<float>(i % 5);
  const std::vector<float> splitBits = bitsOf(split);
  ++step;
  writer.begin(split, {step, 0, 1000, "test-plan", 0}, {0, 1, 2, 3}, 0);
  check(writer.finish().has_value(), "split masters: the written checkpoint");
  for (bool into : {false, true}) {
    mt::HostState read(plan, into);
    mt::CheckpointInfo info =
        mt::readCheckpoint(mt::findCheckpoint(dir + "/checkpoints"), read, "test-plan");
    check(info.step == step && same(bitsOf(read), splitBits),
          std::string("split masters read back into ") + (into ? "split" : "whole") +
              " masters: other bits");
  }
  std::printf("split masters: written and read back bit for bit, into split and whole\n");

  // Without a write in flight, release returns at once.
  writer.release(0);
  writer.release(99);
  std::printf("release without a write: returns\n");
  return failures ? 1 : 0;
}
