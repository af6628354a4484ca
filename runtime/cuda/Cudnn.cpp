// cuDNN through dlopen: bound once, on first use, so that a run without cuDNN never loads it
// and a machine without it keeps mt's own kernels.
#include "runtime/cuda/Cudnn.h"

#include <dlfcn.h>

#include <cstdlib>

namespace mt::cuda {

namespace {

template <typename F> bool bind(void *library, const char *name, F &field, std::string &why) {
  field = reinterpret_cast<F>(dlsym(library, name));
  if (!field)
    why = std::string("libcudnn.so.9 has no ") + name;
  return field != nullptr;
}

struct Loaded {
  CudnnApi api{};
  std::string why; // empty when loaded
};

Loaded load() {
  Loaded l;
  std::vector<std::string> candidates;
  if (const char *named = std::getenv("MT_CUDNN_LIBRARY"))
    candidates.push_back(named);
  candidates.push_back("libcudnn.so.9");
  candidates.push_back("/usr/local/cuda/lib64/libcudnn.so.9");
  void *library = nullptr;
  for (const std::string &candidate : candidates) {
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (library)
      break;
    if (l.why.empty())
      l.why = dlerror();
  }
  if (!library)
    return l;
  l.why.clear();
  CudnnApi &a = l.api;
  bool bound = bind(library, "cudnnCreate", a.create, l.why) &&
               bind(library, "cudnnDestroy", a.destroy, l.why) &&
               bind(library, "cudnnSetStream", a.setStream, l.why) &&
               bind(library, "cudnnGetVersion", a.version, l.why) &&
               bind(library, "cudnnGetErrorString", a.errorString, l.why) &&
               bind(library, "cudnnGetLastErrorString", a.lastError, l.why) &&
               bind(library, "cudnnBackendCreateDescriptor", a.createDescriptor, l.why) &&
               bind(library, "cudnnBackendDestroyDescriptor", a.destroyDescriptor, l.why) &&
               bind(library, "cudnnBackendFinalize", a.finalize, l.why) &&
               bind(library, "cudnnBackendSetAttribute", a.setAttribute, l.why) &&
               bind(library, "cudnnBackendGetAttribute", a.getAttribute, l.why) &&
               bind(library, "cudnnBackendExecute", a.execute, l.why);
  // The fused attention graphs mt builds are those of cuDNN 9.
  if (bound && a.version() < 90000)
    l.why = "cuDNN " + std::to_string(a.version()) + " is older than 9";
  return l;
}

} // namespace

const CudnnApi *loadCudnn(std::string *why) {
  static const Loaded loaded = load();
  if (why)
    *why = loaded.why;
  return loaded.why.empty() ? &loaded.api : nullptr;
}

void checkCudnn(const CudnnApi &api, cudnnStatus_t status, const std::string &call) {
  if (status == CUDNN_STATUS_SUCCESS)
    return;
  char detail[1024] = {0};
  api.lastError(detail, sizeof detail);
  throw CudnnError(call + " failed: " + api.errorString(status) +
                   (detail[0] ? std::string(" (") + detail + ")" : std::string()));
}

CudnnDescriptor::CudnnDescriptor(const CudnnApi &api, cudnnBackendDescriptorType_t type)
    : api(api) {
  checkCudnn(api, api.createDescriptor(type, &descriptor),
             "cudnnBackendCreateDescriptor(" + std::to_string(type) + ")");
}

CudnnDescriptor::~CudnnDescriptor() {
  if (descriptor)
    api.destroyDescriptor(descriptor);
}

CudnnDescriptor &CudnnDescriptor::set(cudnnBackendAttributeName_t name,
                                      cudnnBackendAttributeType_t type, int64_t count,
                                      const void *values) {
  checkCudnn(api, api.setAttribute(descriptor, name, type, count, values),
             "setting cuDNN attribute " + std::to_string(name));
  return *this;
}

CudnnDescriptor &CudnnDescriptor::finalize() {
  checkCudnn(api, api.finalize(descriptor), "cudnnBackendFinalize");
  return *this;
}

} // namespace mt::cuda
