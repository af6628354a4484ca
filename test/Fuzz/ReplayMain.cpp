// The fuzz targets' main where libFuzzer is not linked (the normal build): runs the target
// once on each file named, or on each regular file of each folder named: a replay of a corpus,
// which the test suite runs.
#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

int replay(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  int inputs = 0;
  for (int a = 1; a < argc; ++a) {
    struct stat info;
    if (stat(argv[a], &info) != 0) {
      std::fprintf(stderr, "cannot read %s\n", argv[a]);
      return 2;
    }
    if (!S_ISDIR(info.st_mode)) {
      inputs += replay(argv[a]);
      continue;
    }
    DIR *dir = opendir(argv[a]);
    while (dirent *entry = dir ? readdir(dir) : nullptr) {
      std::string path = std::string(argv[a]) + "/" + entry->d_name;
      if (stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode))
        inputs += replay(path);
    }
    if (dir)
      closedir(dir);
  }
  std::printf("replayed %d inputs\n", inputs);
  return 0;
}
