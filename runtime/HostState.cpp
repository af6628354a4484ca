// Host state: the per-layer layout, initial weights from plan files or a seeded random draw.
#include "runtime/HostState.h"

#include "runtime/AdamW.h"
#include "runtime/MasterHalves.h"
#include "runtime/PlanLoader.h"
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace mt {

namespace {

/// SplitMix64's finalizer: 64 well-mixed bits of `x`.
uint64_t splitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Elements 2j and 2j + 1 of the draw `key` names, N(0, 0.02) each: Box-Muller over two 24-bit
/// uniforms from a hash of the key and j. A counter, not a generator's stream, so that any
/// element is drawn without the ones before it (about 2.4 times as fast as mt19937_64 and
/// std::normal_distribution, which dominated a large model's start-up).
void drawPair(uint64_t key, int64_t j, float &even, float &odd) {
  uint64_t bits = splitMix(key ^ static_cast<uint64_t>(j) * 0xD1B54A32D192ED03ull);
  float u1 = static_cast<float>((bits >> 40) + 1) * (1.0f / 16777217.0f); // (0, 1)
  float u2 = static_cast<float>(bits & 0xFFFFFF) * (1.0f / 16777216.0f);  // [0, 1)
  float radius = 0.02f * std::sqrt(-2.0f * std::log(u1));
  float angle = 6.28318530717958648f * u2;
  even = radius * std::cos(angle);
  odd = radius * std::sin(angle);
}

constexpr int64_t kPage = 4096;
constexpr int64_t kHugePage = 2 << 20;

/// Bytes of host state for `held` masters (whole or split, 4 bytes either way) and the
/// moments of `owned` parameters: a layer block's, or the whole state's.
int64_t stateBytes(int64_t held, int64_t owned) { return held * 4 + owned * 8; }

/// Refuses, before anything is allocated, host state larger than the memory available.
void checkHostMemory(const std::vector<ParameterState> &parameters) {
  int64_t held = 0, owned = 0;
  for (const ParameterState &p : parameters) {
    held += p.held.size();
    owned += p.owned.size();
  }
  double bytes = static_cast<double>(stateBytes(held, owned));
  int64_t available = availableHostBytes();
  if (available >= 0 && bytes > static_cast<double>(available)) {
    char message[256];
    std::snprintf(message, sizeof message,
                  "the host state needs %.1f GiB (%lld parameters: fp32 masters and moments) "
                  "but this machine has %.1f GiB available",
                  bytes / (1 << 30), static_cast<long long>(held),
                  static_cast<double>(available) / (1 << 30));
    throw std::runtime_error(message);
  }
}

} // namespace

char *allocateHostBlock(int64_t bytes) {
  int64_t align = bytes >= kHugePage ? kHugePage : kPage;
  int64_t rounded = (std::max<int64_t>(bytes, 1) + align - 1) / align * align;
  char *block = static_cast<char *>(std::aligned_alloc(align, rounded));
  if (block && align == kHugePage)
    madvise(block, rounded, MADV_HUGEPAGE);
  return block;
}

int64_t availableHostBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return -1;
}

int64_t physicalHostBytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
}

HostState::HostState(const plan::Plan &plan, bool streamCopy, int rank, int ranks,
                     Masters masters)
    : plan(plan) {
  // Each parameter's layer block, as the compiler placed it (Parameter.layer).
  std::vector<int64_t> layers;
  for (const plan::Parameter &parameter : plan.parameters())
    layers.push_back(parameter.layer());
  parameters.resize(plan.parameters_size());
  std::vector<int64_t> order;
  for (int p = 0; p < plan.parameters_size(); ++p) {
    parameters[p].count = numElements(plan.parameters(p).type());
    parameters[p].layer = layers[p];
    parameters[p].owned = shardOf(parameters[p].count, rank, ranks);
    parameters[p].held =
        masters == Masters::Sharded ? parameters[p].owned : Shard{0, parameters[p].count};
    order.push_back(p);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return layers[a] < layers[b]; });
  checkHostMemory(parameters);
  // One allocation per layer: [masters | first moments | second moments], split masters as
  // [high halves (bf16 copies) | low halves]: a layer's copies cross in one piece.
  for (size_t first = 0; first < order.size();) {
    size_t last = first;
    int64_t elements = 0, owned = 0;
    for (; last < order.size() && layers[order[last]] == layers[order[first]]; ++last) {
      elements += parameters[order[last]].held.size();
      owned += parameters[order[last]].owned.size();
    }
    int64_t bytes = stateBytes(elements, owned);
    char *block = allocateHostBlock(bytes);
    if (!block)
      throw std::runtime_error("cannot allocate " + std::to_string(bytes) +
                               " bytes of host state for layer " +
                               std::to_string(layers[order[first]]));
    storage.emplace_back(block);
    blocks.push_back({layers[order[first]], block, bytes});
    float *master = reinterpret_cast<float *>(block);
    float *firstMoment = master + elements, *secondMoment = firstMoment + owned;
    uint16_t *high = reinterpret_cast<uint16_t *>(block), *low = high + elements;
    int64_t offset = 0, ownedOffset = 0;
    for (size_t i = first; i < last; ++i) {
      ParameterState &state = parameters[order[i]];
      state.master = streamCopy ? nullptr : master + offset;
      state.streamCopy = streamCopy ? high + offset : nullptr;
      state.masterLow = streamCopy ? low + offset : nullptr;
      state.firstMoment = firstMoment + ownedOffset;
      state.secondMoment = secondMoment + ownedOffset;
      offset += state.held.size();
      ownedOffset += state.owned.size();
    }
    first = last;
  }
  // Zeroed on every core: the first touch of each page (the kernel's work) runs in parallel.
  constexpr int64_t kPiece = 64 << 20;
  std::vector<std::pair<char *, int64_t>> pieces;
  for (const LayerBlock &block : blocks)
    for (int64_t at = 0; at < block.bytes; at += kPiece)
      pieces.emplace_back(block.begin + at, std::min(kPiece, block.bytes - at));
  runParallel(static_cast<int64_t>(pieces.size()),
              [&](int64_t i) { std::memset(pieces[i].first, 0, pieces[i].second); });
}

void HostState::Free::operator()(char *block) const { std::free(block); }

int64_t HostState::bytes() const {
  int64_t total = 0;
  for (const LayerBlock &block : blocks)
    total += block.bytes;
  return total;
}

void HostState::loadInitialWeights(const std::string &planDir) {
  for (int p = 0; p < plan.parameters_size(); ++p) {
    const plan::Parameter &parameter = plan.parameters(p);
    if (parameter.file().empty())
      throw std::runtime_error("parameter " + parameter.name() +
                               " has no initial data in the plan; use --init=random");
    std::string path = parameter.file().front() == '/' ? parameter.file()
                                                       : planDir + "/" + parameter.file();
    plan::DType dtype = parameter.type().dtype();
    int64_t count = parameters[p].count, width = bytesPerElement(dtype);
    Shard held = parameters[p].held;
    std::string bytes(held.size() * width, '\0');
    std::ifstream in(path, std::ios::binary);
    in.seekg(parameter.offset() + held.begin * width);
    in.read(bytes.data(), bytes.size());
    if (!in || parameter.length() != count * width)
      throw std::runtime_error("parameter " + parameter.name() + ": cannot read " +
                               std::to_string(held.size() * width) + " bytes at offset " +
                               std::to_string(parameter.offset() + held.begin * width) +
                               " of " + path + " (" + std::to_string(count * width) +
                               " bytes from offset " + std::to_string(parameter.offset()) +
                               " hold it)");
    for (int64_t i = 0; i < held.size(); ++i) {
      float value = static_cast<float>(decodeReal(bytes.data() + i * width, dtype));
      parameters[p].writeMasters(i, 1, &value);
    }
  }
}

void HostState::initializeRandomly(uint64_t seed) {
  // The parameters' elements in plan order form one sequence; element e of it is drawn from
  // the seed and e alone (drawPair), in runs of kDrawChunk on every core, and every rank draws
  // the runs that hold its elements: the same weights on any number of cores and ranks.
  constexpr int64_t kDrawChunk = 1 << 20;
  const uint64_t key = splitMix(seed);
  std::vector<int64_t> starts; // each parameter's first element in the sequence
  int64_t total = 0;
  for (const ParameterState &parameter : parameters) {
    starts.push_back(total);
    total += parameter.count;
  }
  runParallel((total + kDrawChunk - 1) / kDrawChunk, [&](int64_t k) {
    int64_t begin = k * kDrawChunk, end = std::min(total, begin + kDrawChunk);
    int p =
        static_cast<int>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin()) -
        1;
    bool held = false;
    for (int q = p; q < static_cast<int>(parameters.size()) && starts[q] < end; ++q)
      held = held || (parameters[q].held.size() > 0 && starts[q] + parameters[q].held.end > begin &&
                      starts[q] + parameters[q].held.begin < end);
    if (!held)
      return;
    std::vector<float> draw(static_cast<size_t>(end - begin + 1)); // begin is even
    for (int64_t e = begin; e < end; e += 2)
      drawPair(key, e / 2, draw[e - begin], draw[e - begin + 1]);
    for (int64_t at = begin; at < end; ++p) {
      const std::string &name = plan.parameters(p).name();
      bool isVector = plan.parameters(p).type().shape_size() == 1;
      bool isBias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
      Shard own = parameters[p].held;
      int64_t from = at - starts[p], to = std::min(parameters[p].count, from + (end - at));
      // The run's part of p that the state holds, [first, last) of p's elements.
      int64_t first = std::max(from, own.begin), last = std::min(to, own.end);
      if (first < last) {
        float *run = draw.data() + (starts[p] + first - begin);
        if (isVector)
          std::fill(run, run + (last - first), isBias ? 0.0f : 1.0f);
        parameters[p].writeMasters(first - own.begin, last - first, run);
      }
      at += to - from;
    }
  });
}

void HostState::joinMasters() {
  std::vector<uint16_t> halves;
  for (const LayerBlock &block : blocks) {
    auto *high = reinterpret_cast<uint16_t *>(block.begin);
    std::vector<ParameterState *> split;
    int64_t elements = 0;
    for (ParameterState &parameter : parameters)
      if (parameter.streamCopy && parameter.layer == block.layer) {
        split.push_back(&parameter);
        elements += parameter.held.size();
      }
    if (split.empty())
      continue;
    // [high halves | low halves] become the block's fp32 masters, over the same bytes.
    halves.assign(high, high + 2 * elements);
    auto *masters = reinterpret_cast<float *>(block.begin);
    constexpr int64_t kChunk = 1 << 20;
    runParallel((elements + kChunk - 1) / kChunk, [&](int64_t c) {
      int64_t at = c * kChunk;
      mt::joinMasters(halves.data() + at, halves.data() + elements + at,
                      std::min(kChunk, elements - at), masters + at);
    });
    for (ParameterState *parameter : split) {
      parameter->master = masters + (parameter->streamCopy - high);
      parameter->streamCopy = parameter->masterLow = nullptr;
    }
  }
}

void ParameterState::readMasters(int64_t first, int64_t n, float *to) const {
  if (master)
    std::copy(master + first, master + first + n, to);
  else
    joinMasters(streamCopy + first, masterLow + first, n, to);
}

void ParameterState::writeMasters(int64_t first, int64_t n, const float *from) {
  if (master)
    std::copy(from, from + n, master + first);
  else
    splitMasters(from, n, streamCopy + first, masterLow + first);
}

std::vector<float> ParameterState::masters() const {
  std::vector<float> values(held.size());
  readMasters(0, held.size(), values.data());
  return values;
}

MasterWeights ParameterState::weightsAt(int64_t first) const {
  return (master ? MasterWeights(master) : MasterWeights(streamCopy, masterLow)) + first;
}

} // namespace mt
