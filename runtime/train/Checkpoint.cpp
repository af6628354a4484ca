// Checkpoints read back: the manifest checked, then the state file read in pieces on every
// core with pread, each piece hashed as it arrives (CheckpointFiles' checksum of its format).
#include "runtime/train/Checkpoint.h"

#include "runtime/HostState.h"
#include "runtime/ThreadPool.h"
#include "runtime/train/CheckpointFiles.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mt {

using namespace checkpoint;

namespace {

/// Calls `piece(part)` for the parts of `segments` in file bytes [begin, end), in order.
template <typename Piece>
void forEachPiece(const std::vector<Segment> &segments, int64_t begin, int64_t end, Piece piece) {
  auto first = std::upper_bound(segments.begin(), segments.end(), begin,
                                [](int64_t at, const Segment &s) { return at < s.offset; });
  for (auto s = first == segments.begin() ? first : first - 1;
       s != segments.end() && s->offset < end; ++s) {
    int64_t from = std::max(begin, s->offset), to = std::min(end, s->offset + s->bytes);
    if (from < to)
      piece(partOf(*s, from - s->offset, to - from));
  }
}

/// Reads the state file from `fd` into memory on every core, hashing each range that
/// `format`'s checksum hashes; returns the file's checksum.
std::string readState(const std::vector<Segment> &segments, int format, int fd,
                      const std::string &path) {
  std::vector<Segment> ranges = hashedRanges(segments, format);
  std::vector<uint64_t> hashes(ranges.size());
  std::vector<std::string> errors(ranges.size());
  runParallel(static_cast<int64_t>(ranges.size()), [&](int64_t r) {
    ChunkHash hash;
    std::vector<char> split; // the file's bytes of split masters, before they are split
    auto read = [&](const Segment &part) {
      char *data = part.data ? part.data : split.data();
      for (int64_t done = 0; done < part.bytes && errors[r].empty();) {
        ssize_t moved = pread(fd, data + done, part.bytes - done, part.offset + done);
        if (moved <= 0)
          errors[r] = moved == 0 ? path + " ends early" : systemError("cannot read", path);
        else
          done += moved;
      }
      hash.add(data, part.bytes);
      if (!part.data)
        writeSegment(part, data);
    };
    forEachPiece(segments, ranges[r].offset, ranges[r].offset + ranges[r].bytes,
                 [&](const Segment &part) {
                   if (part.data)
                     return read(part);
                   split.resize(std::min(part.bytes, kJoinedBytes));
                   for (int64_t at = 0; at < part.bytes; at += kJoinedBytes)
                     read(partOf(part, at, std::min(kJoinedBytes, part.bytes - at)));
                 });
    hashes[r] = hash.value();
  });
  for (const std::string &error : errors)
    if (!error.empty())
      throw std::runtime_error(error);
  return combine(hashes);
}

} // namespace

int64_t checkpointBytes(const HostState &state) { return totalBytes(segmentsOf(state)); }

std::string fileHash(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::vector<uint64_t> hashes;
  std::vector<char> chunk(1 << 20);
  uint64_t length = 0;
  while (in.read(chunk.data(), chunk.size()), in.gcount() > 0) {
    int64_t bytes = in.gcount(), words = (bytes + 3) / 4 * 4;
    length += bytes;
    std::fill(chunk.begin() + bytes, chunk.begin() + words, 0); // the last word, zero-padded
    ChunkHash hash;
    hash.add(chunk.data(), words);
    hashes.push_back(hash.value());
  }
  hashes.push_back(length);
  return combine(hashes);
}

std::string findCheckpoint(const std::string &path) {
  if (exists(path + "/" + kManifestFile))
    return path;
  std::vector<int64_t> steps = checkpointSteps(path);
  if (steps.empty())
    throw std::runtime_error("--resume " + path + ": no complete checkpoint there (a folder " +
                             "step-N with a " + kManifestFile + ")");
  return stepFolder(path, steps.back());
}

CheckpointInfo readCheckpoint(const std::string &path, HostState &state,
                              const std::string &planHash) {
  std::string manifestPath = path + "/" + kManifestFile;
  std::ifstream in(manifestPath);
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::Struct manifest;
  if (!in || !google::protobuf::util::JsonStringToMessage(text.str(), &manifest).ok())
    throw std::runtime_error("checkpoint " + path + ": " + manifestPath +
                             " is missing or not JSON");
  const auto &fields = manifest.fields();
  auto field = [&](const char *key) -> const google::protobuf::Value & {
    auto it = fields.find(key);
    if (it == fields.end())
      throw std::runtime_error("checkpoint " + path + ": the manifest has no " + key);
    return it->second;
  };
  auto whole = [&](const char *key) {
    double value = field(key).number_value();
    if (!(value >= 0 && value < 9007199254740992.0) || value != static_cast<int64_t>(value))
      throw std::runtime_error("checkpoint " + path + ": the manifest's " + key +
                               " is not a whole number");
    return static_cast<int64_t>(value);
  };
  int64_t format = whole("format");
  if (format != 1 && format != kFormat)
    throw std::runtime_error("checkpoint " + path + " has format " + std::to_string(format) +
                             "; this mt-run reads formats 1 to " + std::to_string(kFormat));
  CheckpointInfo info;
  info.step = whole("step");
  info.dataPosition = whole("data_position");
  info.dataTokens = whole("data_tokens");
  info.skippedSteps = whole("skipped_steps");
  info.planHash = field("plan_hash").string_value();
  if (info.planHash != planHash)
    throw std::runtime_error("checkpoint " + path + " was written by another plan (its hash " +
                             info.planHash + ", this plan's " + planHash + ")");
  const auto &elements = field("parameter_elements").list_value().values();
  if (elements.size() != static_cast<int>(state.parameters.size()))
    throw std::runtime_error("checkpoint " + path + " holds " + std::to_string(elements.size()) +
                             " parameters; the plan has " +
                             std::to_string(state.parameters.size()));
  for (size_t p = 0; p < state.parameters.size(); ++p)
    if (elements[p].number_value() != static_cast<double>(state.parameters[p].count))
      throw std::runtime_error("checkpoint " + path + ": parameter " + std::to_string(p) + " (" +
                               state.plan.parameters(p).name() + ") has another size");
  std::vector<Segment> segments = segmentsOf(state);
  std::string statePath = path + "/" + kStateFile;
  struct stat file;
  if (stat(statePath.c_str(), &file) != 0 || file.st_size != totalBytes(segments) ||
      whole("state_bytes") != totalBytes(segments))
    throw std::runtime_error("checkpoint " + path + " is corrupted: " + statePath + " is not " +
                             std::to_string(totalBytes(segments)) + " bytes");
  int fd = open(statePath.c_str(), O_RDONLY);
  if (fd < 0)
    throw std::runtime_error(systemError("cannot read", statePath));
  std::string checksum;
  try {
    checksum = readState(segments, static_cast<int>(format), fd, statePath);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  if (checksum != field("state_checksum").string_value())
    throw std::runtime_error("checkpoint " + path + " is corrupted: " + kStateFile +
                             "'s checksum is " + checksum + ", the manifest says " +
                             field("state_checksum").string_value());
  return info;
}

} // namespace mt
