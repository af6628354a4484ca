// A file mapped read-only into memory for as long as the object lives: token files and
// safetensors shards are read through it instead of being copied.
#ifndef MT_RUNTIME_MAPPEDFILE_H
#define MT_RUNTIME_MAPPEDFILE_H

#include <cstddef>
#include <string>

namespace mt {

class MappedFile {
public:
  /// Maps `path`; throws "cannot open WHAT PATH", "WHAT PATH is not a regular file" or
  /// "cannot map WHAT PATH". An empty file maps to no bytes (data() is null).
  MappedFile(const std::string &path, const std::string &what);
  ~MappedFile();
  MappedFile(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  MappedFile &operator=(MappedFile &&) = delete;

  const char *data() const { return static_cast<const char *>(mapped); }
  size_t size() const { return bytes; }

private:
  void *mapped = nullptr;
  size_t bytes = 0;
};

} // namespace mt

#endif // MT_RUNTIME_MAPPEDFILE_H
