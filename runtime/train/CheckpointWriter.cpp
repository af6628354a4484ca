// The checkpoint writer: a write in flight is its pieces (CheckpointFiles' format-2 ranges),
// each Pending, Copying (an update is copying it aside), Writing or Written; writer threads
// take what an update waits for first, then the pieces in update order, then the copies.
#include "runtime/train/CheckpointWriter.h"

#include "runtime/HostState.h"
#include "runtime/ThreadPool.h"
#include "runtime/train/CheckpointFiles.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace mt {

using namespace checkpoint;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

/// Writer threads: the disk's queue depth rather than the cores' count; the hashing they do
/// is a fraction of a core's memory speed each.
int writerCount() {
  return static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency() / 2, 1, 8));
}

} // namespace

struct CheckpointWriter::Flight {
  enum class State : uint8_t { Pending, Copying, Writing, Written };

  // Set by begin, then read only.
  int64_t step = 0;
  std::string target, partial, statePath, manifest; // manifest: all but the checksum
  int fd = -1;
  int keep = 1;
  std::string folder;
  std::vector<Segment> pieces;               // in file order
  std::vector<std::vector<int>> ofParameter; // each parameter's pieces
  std::vector<int> order;                    // the pieces in update order
  Clock::time_point start;
  std::thread coordinator;

  std::mutex mutex; // over the rest
  std::condition_variable changed;
  std::vector<State> states;
  std::vector<char *> copies; // a piece's copy while it waits to be written
  std::vector<uint64_t> hashes;
  std::deque<int> urgent, copied; // what an update waits for; copies to write
  size_t next = 0;                // in `order`
  int copying = 0;
  int64_t copyBudget = 0;
  double heldSeconds = 0;
  std::string error;
  bool done = false;
  double seconds = 0;

  ~Flight() {
    for (char *copy : copies)
      std::free(copy);
    if (fd >= 0)
      close(fd);
  }

  bool safe(int piece) const {
    return states[piece] == State::Written || (copies[piece] && states[piece] != State::Copying);
  }

  /// A writer thread: takes pieces until none is left to take.
  void writePieces() {
    std::unique_lock<std::mutex> lock(mutex);
    while (error.empty()) {
      int piece = -1;
      for (std::deque<int> *queue : {&urgent, &copied})
        while (piece < 0 && !queue->empty()) {
          int taken = queue->front();
          queue->pop_front();
          if (states[taken] == State::Pending)
            piece = taken;
        }
      while (piece < 0 && next < order.size())
        if (int taken = order[next++]; states[taken] == State::Pending)
          piece = taken;
      if (piece < 0) {
        if (copying == 0) // every piece is written or being written
          return;
        changed.wait(lock); // a copy lands in `copied`
        continue;
      }
      states[piece] = State::Writing;
      const Segment &range = pieces[piece];
      const char *source = copies[piece] ? copies[piece] : range.data;
      lock.unlock();
      std::string failure;
      ChunkHash hash;
      auto write = [&](const char *bytes, const Segment &part) {
        for (int64_t done = 0; done < part.bytes && failure.empty();) {
          ssize_t moved = pwrite(fd, bytes + done, part.bytes - done, part.offset + done);
          if (moved <= 0)
            failure = systemError("cannot write", statePath);
          else
            done += moved;
        }
        hash.add(bytes, part.bytes);
      };
      if (source) {
        write(source, range);
      } else { // split masters have no fp32 bytes: joined a buffer at a time
        std::vector<char> joined(std::min(range.bytes, kJoinedBytes));
        for (int64_t at = 0; at < range.bytes && failure.empty(); at += kJoinedBytes) {
          Segment part = partOf(range, at, std::min(kJoinedBytes, range.bytes - at));
          readSegment(part, joined.data());
          write(joined.data(), part);
        }
      }
      lock.lock();
      hashes[piece] = hash.value();
      states[piece] = State::Written;
      if (copies[piece]) {
        std::free(copies[piece]);
        copies[piece] = nullptr;
        copyBudget += range.bytes;
      }
      if (!failure.empty() && error.empty())
        error = failure;
      changed.notify_all();
    }
  }

  /// The coordinator: the writers, then the file synced, the manifest, the rename and the
  /// older checkpoints removed.
  void run() {
    try {
      std::vector<std::thread> writers;
      try {
        for (int w = 0; w < writerCount(); ++w)
          writers.emplace_back([this] { writePieces(); });
      } catch (const std::system_error &) { // no thread: those started still write
        if (writers.empty())
          throw;
      }
      for (std::thread &writer : writers)
        writer.join();
      std::string failure;
      {
        std::lock_guard<std::mutex> lock(mutex);
        failure = error;
      }
      if (!failure.empty())
        throw std::runtime_error(failure);
      if (fsync(fd) != 0)
        throw std::runtime_error(systemError("cannot sync", statePath));
      close(fd);
      fd = -1;
      std::string manifestPath = partial + "/" + kManifestFile;
      {
        std::ofstream out(manifestPath);
        out << manifest << ",\n  \"state_checksum\": \"" << combine(hashes) << "\"\n}\n";
        out.flush();
        if (!out)
          throw std::runtime_error("cannot write " + manifestPath);
      }
      syncPath(manifestPath);
      syncPath(partial);
      if (exists(target))
        removeCheckpoint(target);
      if (std::rename(partial.c_str(), target.c_str()) != 0)
        throw std::runtime_error(systemError("cannot rename " + partial + " to", target));
      syncPath(folder);
      std::vector<int64_t> steps = checkpointSteps(folder);
      for (size_t i = 0; i + keep < steps.size(); ++i)
        removeCheckpoint(stepFolder(folder, steps[i]));
    } catch (const std::exception &failure) {
      std::lock_guard<std::mutex> lock(mutex);
      if (error.empty())
        error = failure.what();
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (!error.empty()) { // a write that failed leaves no file behind to fill the disk
      if (fd >= 0)
        close(fd);
      fd = -1;
      removeCheckpoint(partial);
    }
    seconds = secondsSince(start);
    done = true;
    changed.notify_all();
  }

  /// Before parameter p changes: copies its pending pieces while the budget lasts, asks the
  /// writers for the rest first, and waits until each is written or copied.
  void release(int p) {
    Clock::time_point begin = Clock::now();
    std::unique_lock<std::mutex> lock(mutex);
    std::vector<int> toCopy;
    for (int piece : ofParameter[p])
      if (states[piece] == State::Pending && !copies[piece]) {
        if (copyBudget >= pieces[piece].bytes) {
          copyBudget -= pieces[piece].bytes;
          states[piece] = State::Copying;
          ++copying;
          toCopy.push_back(piece);
        } else {
          urgent.push_front(piece);
        }
      }
    if (!toCopy.empty()) {
      lock.unlock();
      std::vector<char *> made(toCopy.size());
      runParallel(static_cast<int64_t>(toCopy.size()), [&](int64_t k) {
        const Segment &range = pieces[toCopy[k]];
        if ((made[k] = static_cast<char *>(std::malloc(range.bytes))))
          readSegment(range, made[k]);
      });
      lock.lock();
      for (size_t k = 0; k < toCopy.size(); ++k) {
        int piece = toCopy[k];
        states[piece] = State::Pending;
        --copying;
        if (made[k]) {
          copies[piece] = made[k];
          copied.push_back(piece);
        } else { // no memory after all: the disk it is
          copyBudget += pieces[piece].bytes;
          urgent.push_front(piece);
        }
      }
      changed.notify_all();
    } else if (!urgent.empty()) {
      changed.notify_all();
    }
    // After a failure the checkpoint is abandoned, but a writer may still be reading a piece.
    const std::vector<int> &own = ofParameter[p];
    changed.wait(lock, [&] {
      return std::all_of(own.begin(), own.end(), [&](int i) {
        return safe(i) || (!error.empty() && states[i] != State::Writing);
      });
    });
    heldSeconds += secondsSince(begin);
  }
};

CheckpointWriter::CheckpointWriter(const std::string &folder, int keep)
    : folder(folder), keep(std::max(1, keep)) {
  if (mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error(systemError("--checkpoint-dir: cannot make", folder));
  if (access(folder.c_str(), W_OK) != 0)
    throw std::runtime_error("--checkpoint-dir " + folder + " is not a writable folder");
}

CheckpointWriter::~CheckpointWriter() {
  if (flight && flight->coordinator.joinable())
    flight->coordinator.join();
}

int64_t CheckpointWriter::spareHostBytes() {
  int64_t available = availableHostBytes();
  return available > 0 ? available / 4 * 3 : 0;
}

void CheckpointWriter::begin(const HostState &state, const CheckpointInfo &info,
                             const std::vector<int> &updateOrder, int64_t copyBytes) {
  if (current())
    throw std::logic_error("a checkpoint begins after the one before it has finished");
  auto write = std::make_shared<Flight>();
  Flight &f = *write;
  f.start = Clock::now();
  f.step = info.step;
  f.keep = keep;
  f.folder = folder;
  f.copyBudget = std::max<int64_t>(0, copyBytes);
  std::vector<Segment> segments = segmentsOf(state);
  f.pieces = hashedRanges(segments, kFormat);
  const size_t count = f.pieces.size();
  f.states.assign(count, Flight::State::Pending);
  f.copies.assign(count, nullptr);
  f.hashes.assign(count, 0);
  f.ofParameter.resize(state.parameters.size());
  for (size_t i = 0; i < count; ++i)
    f.ofParameter[f.pieces[i].parameter].push_back(static_cast<int>(i));
  std::vector<bool> ordered(state.parameters.size(), false);
  auto place = [&](int p) {
    if (p < 0 || p >= static_cast<int>(ordered.size()) || ordered[p])
      return;
    ordered[p] = true;
    f.order.insert(f.order.end(), f.ofParameter[p].begin(), f.ofParameter[p].end());
  };
  for (int p : updateOrder)
    place(p);
  for (size_t p = 0; p < ordered.size(); ++p) // any the order left out, in plan order
    place(static_cast<int>(p));

  std::ostringstream manifest;
  manifest << "{\n  \"format\": " << kFormat << ",\n  \"step\": " << info.step
           << ",\n  \"data_position\": " << info.dataPosition
           << ",\n  \"data_tokens\": " << info.dataTokens
           << ",\n  \"skipped_steps\": " << info.skippedSteps << ",\n  \"plan_hash\": \""
           << info.planHash << "\",\n  \"state_bytes\": " << totalBytes(segments)
           << ",\n  \"parameter_elements\": [";
  for (size_t p = 0; p < state.parameters.size(); ++p)
    manifest << (p ? ", " : "") << state.parameters[p].count;
  manifest << "]";
  f.manifest = manifest.str();

  f.target = stepFolder(folder, info.step);
  f.partial = f.target + ".partial";
  removeCheckpoint(f.partial); // a write a crash cut short
  if (mkdir(f.partial.c_str(), 0755) != 0)
    throw std::runtime_error(systemError("cannot make", f.partial));
  f.statePath = f.partial + "/" + kStateFile;
  f.fd = open(f.statePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string failure = f.fd < 0 ? systemError("cannot write", f.statePath)
                        : ftruncate(f.fd, totalBytes(segments)) != 0
                            ? systemError("cannot size", f.statePath)
                            : "";
  if (failure.empty())
    try {
      f.coordinator = std::thread([&f] { f.run(); });
    } catch (const std::system_error &error) {
      failure = std::string("cannot start the checkpoint's writer: ") + error.what();
    }
  if (!failure.empty()) { // nothing left behind: the folder of a write that never began
    if (f.fd >= 0)
      close(f.fd);
    f.fd = -1;
    removeCheckpoint(f.partial);
    throw std::runtime_error(failure);
  }
  std::lock_guard<std::mutex> lock(guard);
  flight = std::move(write);
}

std::shared_ptr<CheckpointWriter::Flight> CheckpointWriter::current() {
  std::lock_guard<std::mutex> lock(guard);
  return flight;
}

void CheckpointWriter::release(int p) {
  std::shared_ptr<Flight> write = current();
  if (write && p >= 0 && p < static_cast<int>(write->ofParameter.size()))
    write->release(p);
}

std::optional<CheckpointWriter::Written> CheckpointWriter::end(bool wait) {
  std::shared_ptr<Flight> write = current();
  if (!write)
    return std::nullopt;
  {
    std::unique_lock<std::mutex> lock(write->mutex);
    if (!write->done && !wait)
      return std::nullopt;
  }
  write->coordinator.join();
  {
    std::lock_guard<std::mutex> lock(guard);
    flight.reset();
  }
  std::lock_guard<std::mutex> lock(write->mutex); // an update may still be leaving release()
  if (!write->error.empty())
    throw std::runtime_error("checkpoint of step " + std::to_string(write->step) + ": " +
                             write->error);
  return Written{write->step, write->target, totalBytes(write->pieces), write->seconds,
                 write->heldSeconds};
}

std::optional<CheckpointWriter::Written> CheckpointWriter::poll() { return end(false); }

std::optional<CheckpointWriter::Written> CheckpointWriter::finish() { return end(true); }

} // namespace mt
