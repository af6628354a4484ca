// Host state: allocation, initial weights from plan files or a seeded random draw.
#include "runtime/HostState.h"

#include "runtime/PlanLoader.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace mt {

HostState::HostState(const plan::Plan &plan) : plan(plan) {
  for (const plan::Parameter &parameter : plan.parameters()) {
    int64_t count = numElements(parameter.type());
    master.emplace_back(count, 0.0f);
    firstMoment.emplace_back(count, 0.0f);
    secondMoment.emplace_back(count, 0.0f);
  }
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
    int64_t count = master[p].size(), width = bytesPerElement(dtype);
    std::string bytes(count * width, '\0');
    std::ifstream in(path, std::ios::binary);
    in.seekg(parameter.offset());
    in.read(bytes.data(), bytes.size());
    if (!in || parameter.length() != count * width)
      throw std::runtime_error("parameter " + parameter.name() + ": cannot read " +
                               std::to_string(count * width) + " bytes at offset " +
                               std::to_string(parameter.offset()) + " of " + path);
    for (int64_t i = 0; i < count; ++i) {
      const char *element = bytes.data() + i * width;
      if (dtype == plan::F32) {
        std::memcpy(&master[p][i], element, 4);
      } else if (dtype == plan::F64) {
        double d;
        std::memcpy(&d, element, 8);
        master[p][i] = static_cast<float>(d);
      } else if (dtype == plan::BF16) {
        uint32_t bits = 0;
        std::memcpy(reinterpret_cast<char *>(&bits) + 2, element, 2);
        std::memcpy(&master[p][i], &bits, 4);
      } else {
        throw std::runtime_error("parameter " + parameter.name() +
                                 ": float16 initial weights are not supported yet");
      }
    }
  }
}

void HostState::initializeRandomly(uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (int p = 0; p < plan.parameters_size(); ++p) {
    const std::string &name = plan.parameters(p).name();
    bool isVector = plan.parameters(p).type().shape_size() == 1;
    bool isBias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    for (float &x : master[p])
      x = isVector ? (isBias ? 0.0f : 1.0f) : normal(generator);
  }
}

} // namespace mt
