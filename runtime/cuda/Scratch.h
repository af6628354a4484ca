// Device memory for kernels' temporaries (fp32 partial sums, converted operands): a bump
// region reset before each command. It grows only while a step first meets a larger need,
// so later steps allocate nothing.
#ifndef MT_RUNTIME_CUDA_SCRATCH_H
#define MT_RUNTIME_CUDA_SCRATCH_H

#include <cstddef>
#include <vector>

namespace mt::cuda {

class Scratch {
public:
  Scratch() = default;
  ~Scratch();
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;

  /// A fresh region of `bytes` (rounded up to 256) that no other request of this command
  /// overlaps.
  void *take(size_t bytes);
  /// Starts the next command's requests. Regions handed out before stay valid for work
  /// already enqueued on the stream: memory is freed only by cudaFree, which waits for it.
  void reset();
  /// The largest bytes one command has needed: device memory beyond the plan's arena.
  size_t capacity() const { return regionBytes; }

private:
  char *region = nullptr;
  size_t regionBytes = 0, used = 0;
  /// Overflow blocks of the current command, merged into one larger region at reset.
  std::vector<void *> overflow;
  size_t overflowBytes = 0;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_SCRATCH_H
