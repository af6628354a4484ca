// The host's worker threads, started once: the CPU AdamW and the host kernels split their
// loops over them instead of starting threads for every call.
#ifndef MT_RUNTIME_THREADPOOL_H
#define MT_RUNTIME_THREADPOOL_H

#include <cstdint>
#include <functional>

namespace mt {

/// Runs body(part) for part in [0, parts) on the pool's threads and the caller's, and returns
/// when all are done. Parts run concurrently; nested calls run inline on the calling thread.
/// The first exception a part throws reaches the caller once no part is running any more.
void runParallel(int64_t parts, const std::function<void(int64_t)> &body);

/// How many threads runParallel uses: the machine's cores.
int64_t parallelism();

} // namespace mt

#endif // MT_RUNTIME_THREADPOOL_H
