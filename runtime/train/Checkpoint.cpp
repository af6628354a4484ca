// Checkpoints: the state file is every parameter's master, first and second moment in plan
// order, written and read in chunks on every core with pwrite/pread, each chunk hashed as it
// goes (4 lanes of FNV-1a over 32-bit words); the manifest (JSON) holds the checksum.
#include "runtime/train/Checkpoint.h"

#include "runtime/HostState.h"
#include "runtime/ThreadPool.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mt {

namespace {

constexpr int kFormat = 1;
constexpr int64_t kChunkBytes = 64 << 20;
constexpr const char *kStateFile = "state.bin", *kManifestFile = "manifest.json";

std::string systemError(const std::string &what, const std::string &path) {
  return what + " " + path + ": " + std::strerror(errno);
}

/// 4 interleaved lanes of 64-bit FNV-1a over 32-bit words: a word's lane is its index mod 4,
/// so the value does not depend on how the bytes arrive (every piece is whole words).
struct ChunkHash {
  uint64_t lanes[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9ce484222325cbf2ull,
                       0x2325cbf29ce48422ull};
  uint64_t words = 0;
  void add(const char *bytes, int64_t count) {
    for (int64_t i = 0; i + 4 <= count; i += 4, ++words) {
      uint32_t word;
      std::memcpy(&word, bytes + i, 4);
      uint64_t &lane = lanes[words & 3];
      lane = (lane ^ word) * 0x100000001b3ull;
    }
  }
  uint64_t value() const {
    uint64_t h = words;
    for (uint64_t lane : lanes)
      h = (h ^ lane) * 0x100000001b3ull;
    return h;
  }
};

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

/// The file's checksum from its chunks' hashes, in order.
std::string combine(const std::vector<uint64_t> &chunks) {
  ChunkHash all;
  for (uint64_t chunk : chunks)
    all.add(reinterpret_cast<const char *>(&chunk), 8);
  return hex(all.value());
}

/// The state file's pieces of memory in file order: each parameter's master, first and
/// second moment.
struct Segment {
  char *data;
  int64_t bytes, offset;
};

std::vector<Segment> segmentsOf(const HostState &state) {
  std::vector<Segment> segments;
  int64_t offset = 0;
  for (size_t p = 0; p < state.parameters.size(); ++p) {
    const ParameterState &parameter = state.parameters[p];
    if (parameter.held.size() != parameter.count || parameter.owned.size() != parameter.count)
      throw std::runtime_error("checkpoints hold whole parameters; a data-parallel rank holds "
                               "shards of them");
    for (float *values : {parameter.master, parameter.firstMoment, parameter.secondMoment}) {
      int64_t bytes = parameter.count * static_cast<int64_t>(sizeof(float));
      segments.push_back({reinterpret_cast<char *>(values), bytes, offset});
      offset += bytes;
    }
  }
  return segments;
}

int64_t totalBytes(const std::vector<Segment> &segments) {
  return segments.empty() ? 0 : segments.back().offset + segments.back().bytes;
}

/// Calls `piece(data, bytes, offset)` for the parts of `segments` in file bytes
/// [begin, end), in order.
template <typename Piece>
void forEachPiece(const std::vector<Segment> &segments, int64_t begin, int64_t end, Piece piece) {
  auto first = std::upper_bound(segments.begin(), segments.end(), begin,
                                [](int64_t at, const Segment &s) { return at < s.offset; });
  for (auto s = first == segments.begin() ? first : first - 1;
       s != segments.end() && s->offset < end; ++s) {
    int64_t from = std::max(begin, s->offset), to = std::min(end, s->offset + s->bytes);
    if (from < to)
      piece(s->data + (from - s->offset), to - from, from);
  }
}

/// Moves every chunk of the state file between memory and `fd` (pwrite or pread) on every
/// core, hashing each chunk's memory; returns the file's checksum.
std::string transfer(const std::vector<Segment> &segments, int fd, bool write,
                     const std::string &path) {
  int64_t total = totalBytes(segments);
  int64_t chunks = (total + kChunkBytes - 1) / kChunkBytes;
  std::vector<uint64_t> hashes(chunks);
  std::vector<std::string> errors(chunks);
  runParallel(chunks, [&](int64_t c) {
    ChunkHash hash;
    forEachPiece(segments, c * kChunkBytes, std::min(total, (c + 1) * kChunkBytes),
                 [&](char *data, int64_t bytes, int64_t offset) {
                   for (int64_t done = 0; done < bytes && errors[c].empty();) {
                     ssize_t moved = write ? pwrite(fd, data + done, bytes - done, offset + done)
                                           : pread(fd, data + done, bytes - done, offset + done);
                     if (moved <= 0)
                       errors[c] = moved == 0
                                       ? path + " ends early"
                                       : systemError(write ? "cannot write" : "cannot read", path);
                     else
                       done += moved;
                   }
                   hash.add(data, bytes);
                 });
    hashes[c] = hash.value();
  });
  for (const std::string &error : errors)
    if (!error.empty())
      throw std::runtime_error(error);
  return combine(hashes);
}

void syncPath(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) {
    std::string error = systemError("cannot sync", path);
    if (fd >= 0)
      close(fd);
    throw std::runtime_error(error);
  }
  close(fd);
}

bool exists(const std::string &path) { return access(path.c_str(), F_OK) == 0; }

/// Removes a checkpoint folder, its manifest first: a folder left half removed is never
/// taken for a complete checkpoint.
void removeCheckpoint(const std::string &path) {
  std::remove((path + "/" + kManifestFile).c_str());
  std::remove((path + "/" + kStateFile).c_str());
  rmdir(path.c_str());
}

/// The steps of the complete checkpoints in `folder` (step-N holding a manifest), ascending.
std::vector<int64_t> checkpointSteps(const std::string &folder) {
  std::vector<int64_t> steps;
  DIR *dir = opendir(folder.c_str());
  if (!dir)
    return steps;
  while (dirent *entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name.rfind("step-", 0) != 0 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos || name.size() == 5)
      continue;
    if (exists(folder + "/" + name + "/" + kManifestFile))
      steps.push_back(std::stoll(name.substr(5)));
  }
  closedir(dir);
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string stepFolder(const std::string &folder, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return folder + "/" + name;
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

CheckpointWriter::CheckpointWriter(const std::string &folder, int keep)
    : folder(folder), keep(std::max(1, keep)) {
  if (mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error(systemError("--checkpoint-dir: cannot make", folder));
  if (access(folder.c_str(), W_OK) != 0)
    throw std::runtime_error("--checkpoint-dir " + folder + " is not a writable folder");
}

std::string CheckpointWriter::write(const HostState &state, const CheckpointInfo &info) {
  std::vector<Segment> segments = segmentsOf(state);
  std::string target = stepFolder(folder, info.step), partial = target + ".partial";
  removeCheckpoint(partial); // a write a crash cut short
  if (mkdir(partial.c_str(), 0755) != 0)
    throw std::runtime_error(systemError("cannot make", partial));
  std::string statePath = partial + "/" + kStateFile;
  int fd = open(statePath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw std::runtime_error(systemError("cannot write", statePath));
  std::string checksum;
  try {
    if (ftruncate(fd, totalBytes(segments)) != 0)
      throw std::runtime_error(systemError("cannot size", statePath));
    checksum = transfer(segments, fd, /*write=*/true, statePath);
    if (fsync(fd) != 0)
      throw std::runtime_error(systemError("cannot sync", statePath));
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);

  std::ostringstream manifest;
  manifest << "{\n  \"format\": " << kFormat << ",\n  \"step\": " << info.step
           << ",\n  \"data_position\": " << info.dataPosition
           << ",\n  \"data_tokens\": " << info.dataTokens
           << ",\n  \"skipped_steps\": " << info.skippedSteps << ",\n  \"plan_hash\": \""
           << info.planHash << "\",\n  \"state_bytes\": " << totalBytes(segments)
           << ",\n  \"state_checksum\": \"" << checksum << "\",\n  \"parameter_elements\": [";
  for (size_t p = 0; p < state.parameters.size(); ++p)
    manifest << (p ? ", " : "") << state.parameters[p].count;
  manifest << "]\n}\n";
  std::string manifestPath = partial + "/" + kManifestFile;
  {
    std::ofstream out(manifestPath);
    out << manifest.str();
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
  return target;
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
  if (whole("format") != kFormat)
    throw std::runtime_error("checkpoint " + path + " has format " +
                             std::to_string(whole("format")) + "; this mt-run reads format " +
                             std::to_string(kFormat));
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
    checksum = transfer(segments, fd, /*write=*/false, statePath);
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
