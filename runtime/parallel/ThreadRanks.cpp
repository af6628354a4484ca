// Data-parallel ranks as threads of one process.
#include "runtime/parallel/ThreadRanks.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

namespace mt {

ThreadRanks::ThreadRanks(const plan::Plan &plan, const HostState &start, int count)
    : executor(plan), group(count), gradients(count) {
  for (int r = 0; r < count; ++r) {
    states.push_back(std::make_unique<HostState>(plan, /*streamCopy=*/false, r, count));
    for (size_t p = 0; p < start.parameters.size(); ++p) {
      const ParameterState &from = start.parameters[p];
      ParameterState &to = states[r]->parameters[p];
      std::copy(from.master, from.master + from.count, to.master);
      std::copy(from.firstMoment + to.owned.begin, from.firstMoment + to.owned.end, to.firstMoment);
      std::copy(from.secondMoment + to.owned.begin, from.secondMoment + to.owned.end,
                to.secondMoment);
    }
    auto backward = [this, r](const DataParallelRank::Inputs &inputs, std::vector<float *> &out) {
      std::vector<const float *> current;
      for (const ParameterState &parameter : states[r]->parameters)
        current.push_back(parameter.master);
      host::StepResult<float> result = executor.run(current, inputs);
      gradients[r] = std::move(result.gradients);
      for (size_t p = 0; p < out.size(); ++p)
        out[p] = gradients[r][p].data();
      return result.loss;
    };
    ranks.push_back(std::make_unique<DataParallelRank>(*states[r], group.member(r), backward));
  }
}

DataParallelRank::Result ThreadRanks::step(const std::vector<DataParallelRank::Inputs> &inputs,
                                           int64_t step, double lr,
                                           const std::vector<WeightDecay> &decays) {
  std::vector<DataParallelRank::Result> results(ranks.size());
  std::vector<std::exception_ptr> errors(ranks.size());
  std::atomic<int> failed{-1};
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        results[r] = ranks[r]->step(inputs[r], step, lr, decays, /*guarded=*/true);
      } catch (...) {
        // The first rank to fail is the one to report; it stops the others' waits.
        errors[r] = std::current_exception();
        int none = -1;
        failed.compare_exchange_strong(none, static_cast<int>(r));
        group.abort();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  if (failed >= 0)
    std::rethrow_exception(errors[failed]);
  return results[0];
}

void ThreadRanks::gatherInto(HostState &state) const {
  copyMasters(state);
  for (const std::unique_ptr<HostState> &rank : states)
    for (size_t p = 0; p < state.parameters.size(); ++p) {
      const ParameterState &from = rank->parameters[p];
      ParameterState &to = state.parameters[p];
      std::copy(from.firstMoment, from.firstMoment + from.owned.size(),
                to.firstMoment + from.owned.begin);
      std::copy(from.secondMoment, from.secondMoment + from.owned.size(),
                to.secondMoment + from.owned.begin);
    }
}

void ThreadRanks::copyMasters(HostState &state) const {
  for (size_t p = 0; p < state.parameters.size(); ++p)
    std::copy(states[0]->parameters[p].master,
              states[0]->parameters[p].master + state.parameters[p].count,
              state.parameters[p].master);
}

} // namespace mt
