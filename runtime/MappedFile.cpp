// mmap of a whole file, read-only and private.
#include "runtime/MappedFile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>

namespace mt {

MappedFile::MappedFile(const std::string &path, const std::string &what) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw std::runtime_error("cannot open " + what + " " + path);
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    throw std::runtime_error(what + " " + path + " is not a regular file");
  }
  bytes = static_cast<size_t>(info.st_size);
  if (bytes > 0) {
    void *data = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      close(fd);
      throw std::runtime_error("cannot map " + what + " " + path);
    }
    mapped = data;
  }
  close(fd);
}

MappedFile::MappedFile(MappedFile &&other) noexcept : mapped(other.mapped), bytes(other.bytes) {
  other.mapped = nullptr;
  other.bytes = 0;
}

MappedFile::~MappedFile() {
  if (mapped)
    munmap(mapped, bytes);
}

} // namespace mt
