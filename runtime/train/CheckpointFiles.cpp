// The checkpoint format's pieces: the state file's layout, its checksum, the folders.
#include "runtime/train/CheckpointFiles.h"

#include "runtime/HostState.h"
#include "runtime/MasterHalves.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace mt::checkpoint {

void ChunkHash::add(const char *bytes, int64_t count) {
  for (int64_t i = 0; i + 4 <= count; i += 4, ++words) {
    uint32_t word;
    std::memcpy(&word, bytes + i, 4);
    uint64_t &lane = lanes[words & 3];
    lane = (lane ^ word) * 0x100000001b3ull;
  }
}

uint64_t ChunkHash::value() const {
  uint64_t h = words;
  for (uint64_t lane : lanes)
    h = (h ^ lane) * 0x100000001b3ull;
  return h;
}

std::string combine(const std::vector<uint64_t> &hashes) {
  ChunkHash all;
  for (uint64_t hash : hashes)
    all.add(reinterpret_cast<const char *>(&hash), 8);
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(all.value()));
  return text;
}

std::vector<Segment> segmentsOf(const HostState &state) {
  std::vector<Segment> segments;
  int64_t offset = 0;
  for (size_t p = 0; p < state.parameters.size(); ++p) {
    const ParameterState &parameter = state.parameters[p];
    if (parameter.held.size() != parameter.count || parameter.owned.size() != parameter.count)
      throw std::runtime_error("checkpoints hold whole parameters; a data-parallel rank holds "
                               "shards of them");
    int64_t bytes = parameter.count * static_cast<int64_t>(sizeof(float));
    // Whole masters have no halves; split ones no fp32 bytes (HostState keeps one or the other).
    segments.push_back({reinterpret_cast<char *>(parameter.master), bytes, offset,
                        static_cast<int>(p), parameter.streamCopy, parameter.masterLow});
    offset += bytes;
    for (float *values : {parameter.firstMoment, parameter.secondMoment}) {
      segments.push_back({reinterpret_cast<char *>(values), bytes, offset, static_cast<int>(p)});
      offset += bytes;
    }
  }
  return segments;
}

Segment partOf(const Segment &segment, int64_t at, int64_t bytes) {
  Segment part = segment;
  part.bytes = bytes;
  part.offset += at;
  if (segment.data)
    part.data += at;
  else {
    part.high += at / 4;
    part.low += at / 4;
  }
  return part;
}

void readSegment(const Segment &segment, char *to) {
  if (segment.data) {
    std::memcpy(to, segment.data, segment.bytes);
    return;
  }
  joinMasters(segment.high, segment.low, segment.bytes / 4, reinterpret_cast<float *>(to));
}

void writeSegment(const Segment &segment, const char *from) {
  if (segment.data) {
    std::memcpy(segment.data, from, segment.bytes);
    return;
  }
  splitMasters(reinterpret_cast<const float *>(from), segment.bytes / 4, segment.high, segment.low);
}

int64_t totalBytes(const std::vector<Segment> &segments) {
  return segments.empty() ? 0 : segments.back().offset + segments.back().bytes;
}

std::vector<Segment> hashedRanges(const std::vector<Segment> &segments, int format) {
  std::vector<Segment> ranges;
  if (format == 1) {
    int64_t total = totalBytes(segments);
    for (int64_t at = 0; at < total; at += kPieceBytes)
      ranges.push_back({nullptr, std::min(kPieceBytes, total - at), at, -1});
    return ranges;
  }
  for (const Segment &segment : segments)
    for (int64_t at = 0; at < segment.bytes; at += kPieceBytes)
      ranges.push_back(partOf(segment, at, std::min(kPieceBytes, segment.bytes - at)));
  return ranges;
}

std::string systemError(const std::string &what, const std::string &path) {
  return what + " " + path + ": " + std::strerror(errno);
}

bool exists(const std::string &path) { return access(path.c_str(), F_OK) == 0; }

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

std::string stepFolder(const std::string &folder, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return folder + "/" + name;
}

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

void removeCheckpoint(const std::string &path) {
  std::remove((path + "/" + kManifestFile).c_str());
  std::remove((path + "/" + kStateFile).c_str());
  rmdir(path.c_str());
}

} // namespace mt::checkpoint
