// Device memory for kernels' temporaries (fp32 partial sums, per-row statistics, converted
// operands): one region of the size the plan reserves (passes/DeviceReserve), handed out
// afresh to each command.
#ifndef MT_RUNTIME_CUDA_SCRATCH_H
#define MT_RUNTIME_CUDA_SCRATCH_H

#include <cstddef>

namespace mt::cuda {

class Scratch {
public:
  explicit Scratch(size_t capacity);
  ~Scratch();
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;

  /// A region of `bytes` (rounded up to 256) that no other request of this command overlaps,
  /// or null when the command's requests exceed the capacity.
  void *take(size_t bytes);
  /// Starts the next command's requests. Work of earlier commands is ordered before it on
  /// the one compute stream, so their regions can be reused.
  void reset() { used = 0; }
  size_t capacity() const { return bytes; }
  /// The most one command has used.
  size_t peak() const { return highest; }

private:
  char *region = nullptr;
  size_t bytes = 0, used = 0, highest = 0;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_SCRATCH_H
