// The safetensors writer.
#include "runtime/Safetensors.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace mt {

namespace {

std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace

void writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors) {
  std::string header = "{";
  int64_t offset = 0;
  for (const NamedTensor &tensor : tensors) {
    int64_t count = 1;
    std::string shape;
    for (int64_t d : tensor.shape) {
      count *= d;
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    }
    header += jsonString(tensor.name) + ":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + count * 4) + "]},";
    offset += count * 4;
  }
  header += "\"__metadata__\":{\"format\":\"pt\"}}";
  // The data must start 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    uint64_t size = header.size();
    out.write(reinterpret_cast<const char *>(&size), 8);
    out << header;
    for (const NamedTensor &tensor : tensors) {
      int64_t count = 1;
      for (int64_t d : tensor.shape)
        count *= d;
      out.write(reinterpret_cast<const char *>(tensor.data), count * 4);
    }
    if (!out)
      throw std::runtime_error("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + temporary + " to " + path);
}

} // namespace mt
