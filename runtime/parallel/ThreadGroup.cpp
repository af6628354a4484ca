// Collectives between threads: publish, barrier, read the others in rank order, barrier (so
// that no rank changes its buffer while another still reads it).
#include "runtime/parallel/ThreadGroup.h"

#include <algorithm>
#include <stdexcept>

namespace mt {

class ThreadGroup::Member : public Communicator {
public:
  Member(ThreadGroup &group, int rank) : group(group), self(rank) {}
  int rank() const override { return self; }
  int size() const override { return group.size; }

  void reduceScatterMean(float *data, int64_t count) override {
    group.buffers[self] = data;
    group.barrier();
    Shard shard = shardOf(count, self, group.size);
    std::vector<float> mean(shard.size(), 0.0f);
    for (int r = 0; r < group.size; ++r)
      for (int64_t i = 0; i < shard.size(); ++i)
        mean[i] += group.buffers[r][shard.begin + i];
    group.barrier();
    for (int64_t i = 0; i < shard.size(); ++i)
      data[shard.begin + i] = mean[i] / static_cast<float>(group.size);
  }

  void allGather(float *data, int64_t count) override {
    group.buffers[self] = data;
    group.barrier();
    for (int r = 0; r < group.size; ++r)
      if (r != self) {
        Shard shard = shardOf(count, r, group.size);
        std::copy(group.buffers[r] + shard.begin, group.buffers[r] + shard.end,
                  data + shard.begin);
      }
    group.barrier();
  }

  double allReduceSum(double value) override {
    group.values[self] = value;
    group.barrier();
    double sum = 0;
    for (double v : group.values)
      sum += v;
    group.barrier();
    return sum;
  }

private:
  ThreadGroup &group;
  int self;
};

ThreadGroup::ThreadGroup(int size) : size(size), buffers(size), values(size) {
  for (int r = 0; r < size; ++r)
    members.push_back(std::make_unique<Member>(*this, r));
}

ThreadGroup::~ThreadGroup() = default;

Communicator &ThreadGroup::member(int rank) { return *members.at(rank); }

void ThreadGroup::abort() {
  std::lock_guard<std::mutex> lock(mutex);
  aborted = true;
  arrived.notify_all();
}

void ThreadGroup::barrier() {
  std::unique_lock<std::mutex> lock(mutex);
  if (aborted)
    throw std::runtime_error("another rank failed");
  uint64_t mine = generation;
  if (++waiting == size) {
    waiting = 0;
    ++generation;
    arrived.notify_all();
    return;
  }
  arrived.wait(lock, [&] { return generation != mine || aborted; });
  if (generation == mine)
    throw std::runtime_error("another rank failed");
}

} // namespace mt
