// The host backend's check of a scheduled plan: the step run as the three streams might
// interleave it, with every dependency the plan does not state left to chance.
#include "runtime/host/Executor.h"

#include "runtime/host/Kernels.h"

#include <cmath>
#include <deque>
#include <limits>
#include <random>
#include <set>

namespace mt::host {

namespace {

struct DeviceRange {
  int value;
  int64_t begin, end;
};

bool overlaps(const DeviceRange &range, int64_t begin, int64_t end) {
  return range.begin < end && begin < range.end;
}

} // namespace

template <typename T>
StepResult<T> Executor<T>::runInterleaved(const std::vector<const T *> &parameters,
                                          const std::map<std::string, std::vector<int64_t>> &inputs,
                                          uint64_t seed, int ignoredEvent) const {
  const plan::Program &step = plan.step();
  auto describe = [&](int c) {
    if (c < 0)
      return std::string("the host");
    const plan::Command &command = step.commands(c);
    return command.op() + " #" + std::to_string(c) +
           (command.location().empty() ? "" : " (" + command.location() + ")") + " on " +
           (command.stream().empty() ? std::string("compute") : command.stream());
  };

  std::map<std::string, std::deque<int>> queues;
  std::vector<int> producer(step.values_size(), -1), readers(step.values_size(), 0);
  for (int c = 0; c < step.commands_size(); ++c) {
    const plan::Command &command = step.commands(c);
    queues[command.stream().empty() ? "compute" : command.stream()].push_back(c);
    for (int id : command.results())
      producer[id] = c;
    for (int id : command.operands())
      ++readers[id];
  }
  for (int id : stepOutputs)
    ++readers[id]; // read by the host when the step is done

  std::vector<HostTensor<T>> tokens = tokenInputs(inputs);
  std::vector<std::unique_ptr<HostTensor<T>>> owned(step.values_size());
  std::vector<bool> released(step.values_size(), false);
  std::vector<DeviceRange> live;
  auto value = [&](int id, int reader) -> const HostTensor<T> & {
    const plan::Value &source = step.values(id);
    if (source.has_input())
      return tokens.at(source.input());
    if (!owned[id] && producer[id] < 0)
      owned[id] = sourceValue(step, id, parameters);
    if (released[id])
      throw ScheduleError(describe(reader) + " reads value " + std::to_string(id) + " after " +
                          "its buffer was released");
    if (!owned[id])
      throw ScheduleError(describe(reader) + " reads value " + std::to_string(id) + " before " +
                          describe(producer[id]) + " computed it: a missing dependency");
    return *owned[id];
  };
  // A buffer whose last reader is done is poisoned, so that a stale read cannot pass.
  auto release = [&](int id) {
    if (owned[id])
      for (T &x : owned[id]->reals)
        x = std::numeric_limits<T>::quiet_NaN();
    released[id] = producer[id] >= 0;
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const DeviceRange &range) { return range.value == id; }),
               live.end());
  };
  // The operand result r of command c is summed into (a product's addend, an accumulating
  // template's trailing argument), or -1.
  auto accumulatorOf = [&](const plan::Command &command, int r) {
    if (command.op() == "mt.matmul")
      return r == 0 && command.operands_size() == 3 ? command.operands(2) : -1;
    if (command.op() != "mt.call")
      return -1;
    const plan::Template &layer = plan.templates(command.attributes().at("template").i());
    int first = command.operands_size() - layer.accumulators_size();
    for (int j = 0; j < layer.accumulators_size(); ++j)
      if (layer.accumulators(j) == r)
        return command.operands(first + j);
    return -1;
  };
  // Result `r` (-1: the workspace) may take over the exact bytes of its accumulator when the
  // command is its last reader: a sum accumulated into place.
  auto claim = [&](int c, int r, int64_t begin, int64_t end) {
    int into = r >= 0 ? accumulatorOf(step.commands(c), r) : -1;
    for (const DeviceRange &range : live)
      if (overlaps(range, begin, end) &&
          !(range.value == into && range.begin == begin && range.end == end &&
            readers[into] == 1)) {
        std::string pending;
        for (auto &[stream, queue] : queues)
          for (int waiting : queue)
            for (int id : step.commands(waiting).operands())
              if (id == range.value && pending.empty())
                pending = describe(waiting);
        throw ScheduleError(describe(c) + " writes over value " + std::to_string(range.value) +
                            " while " + (pending.empty() ? "the host" : pending) +
                            " still needs it: a missing dependency");
      }
  };

  // Five adversaries, by seed: any ready stream at random; the copy streams racing ahead of
  // compute; or compute racing ahead of the copies, with the copy streams at random, d2h
  // before h2d, or h2d before d2h (so that a missing wait for one copy stream comes out even
  // where the other's copy, when it runs first, happens to cover it).
  std::mt19937_64 random(seed);
  int adversary = static_cast<int>(seed % 5);
  auto priority = [&](const std::string &stream) {
    if (adversary == 0)
      return 0;
    if (adversary == 1)
      return stream == "compute" ? 1 : 0;
    if (stream == "compute")
      return 0;
    return adversary == 2 ? 1 : (stream == "d2h") == (adversary == 3) ? 1 : 2;
  };
  std::set<int> recorded;
  while (true) {
    std::vector<std::deque<int> *> ready;
    bool pending = false;
    int best = 3;
    for (auto &[stream, queue] : queues) {
      if (queue.empty())
        continue;
      pending = true;
      const plan::Command &head = step.commands(queue.front());
      if (!std::all_of(head.waits().begin(), head.waits().end(), [&](int event) {
            return event == ignoredEvent || recorded.count(event);
          }))
        continue;
      if (priority(stream) < best) {
        best = priority(stream);
        ready.clear();
      }
      if (priority(stream) == best)
        ready.push_back(&queue);
    }
    if (!pending)
      break;
    if (ready.empty())
      throw ScheduleError("the schedule deadlocks: every stream waits for an event not recorded");
    std::deque<int> &queue = *ready[random() % ready.size()];
    int c = queue.front();
    queue.pop_front();
    const plan::Command &command = step.commands(c);

    std::vector<const HostTensor<T> *> operands;
    for (int id : command.operands())
      operands.push_back(&value(id, c));
    if (command.workspace_bytes() > 0)
      claim(c, -1, command.workspace_offset(),
            command.workspace_offset() + command.workspace_bytes());
    for (int r = 0; r < command.offsets_size(); ++r)
      if (command.offsets(r) >= 0)
        claim(c, r, command.offsets(r), command.offsets(r) + command.result_bytes(r));
    std::vector<HostTensor<T>> results = runCommand(step, command, operands, parameters);
    for (int r = 0; r < command.results_size(); ++r) {
      int id = command.results(r);
      owned[id] = std::make_unique<HostTensor<T>>(std::move(results[r]));
      if (r < command.offsets_size() && command.offsets(r) >= 0)
        live.push_back({id, command.offsets(r), command.offsets(r) + command.result_bytes(r)});
    }
    if (command.record() >= 0)
      recorded.insert(command.record());
    for (int id : command.operands())
      if (--readers[id] == 0)
        release(id);
    for (int id : command.results())
      if (readers[id] == 0)
        release(id);
  }

  StepResult<T> result;
  result.loss = static_cast<double>(value(step.loss(), -1).reals.at(0));
  for (int id : step.gradients())
    result.gradients.push_back(value(id, -1).reals);
  return result;
}

template StepResult<float> Executor<float>::runInterleaved(
    const std::vector<const float *> &, const std::map<std::string, std::vector<int64_t>> &,
    uint64_t, int) const;
template StepResult<double> Executor<double>::runInterleaved(
    const std::vector<const double *> &, const std::map<std::string, std::vector<int64_t>> &,
    uint64_t, int) const;

} // namespace mt::host
