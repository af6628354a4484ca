// The CUDA backend's executor. Commands are issued in plan order, each on its stream after
// the events it waits for; a wait captures the latest record of its event at issue time,
// which in plan order is the record the schedule meant.
#include "runtime/cuda/Executor.h"

#include "plan/DeviceLayout.h"
#include "runtime/PlanLoader.h"
#include "runtime/Shard.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/TensorCopy.h"
#include "runtime/cuda/kernels/KernelArgs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

namespace mt::cuda {

namespace {

constexpr int64_t kPage = 4096;

int64_t pageAlign(int64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

/// A prefetch of weights the step keeps on the device across steps (mtc --persistent-layers).
bool isPersistent(const plan::Command &command) {
  auto flag = command.attributes().find("persistent");
  return command.op() == "mt.prefetch" && flag != command.attributes().end() && flag->second.flag();
}

int64_t elementsOf(const plan::TensorType &type) {
  int64_t n = 1;
  for (int64_t d : type.shape())
    n *= d;
  return n;
}

/// How the plan stores a value of `type` in `bytes` of device memory: reals are bf16 unless
/// the plan gave them four bytes an element; integers keep their width.
Storage storageFor(const plan::TensorType &type, int64_t bytes) {
  switch (type.dtype()) {
  case plan::I64: return Storage::I64;
  case plan::I32: return Storage::I32;
  case plan::BOOL: case plan::I8: return Storage::U8;
  default: return bytes == 4 * elementsOf(type) && bytes > 0 ? Storage::F32 : Storage::BF16;
  }
}

DeviceTensor tensorOf(const plan::TensorType &type, Storage storage, void *data) {
  DeviceTensor tensor;
  tensor.shape.assign(type.shape().begin(), type.shape().end());
  tensor.storage = storage;
  tensor.data = data;
  return tensor;
}

/// Constants are fp32 (reals) or their integer width; `out` receives the encoded bytes.
Storage encodeConstant(const plan::Value &value, std::string &out) {
  const plan::TensorType &type = value.type();
  int64_t n = elementsOf(type), width = bytesPerElement(type.dtype());
  if (static_cast<int64_t>(value.constant().size()) != n * width)
    throw CudaError("a constant of " + std::to_string(n) + " elements holds " +
                    std::to_string(value.constant().size()) + " bytes");
  Storage storage = isFloatDType(type.dtype()) ? Storage::F32 : storageFor(type, 0);
  out.assign(n * widthOf(storage), '\0');
  for (int64_t i = 0; i < n; ++i) {
    const char *at = value.constant().data() + i * width;
    char *to = out.data() + i * widthOf(storage);
    if (storage == Storage::F32) {
      float x = static_cast<float>(decodeReal(at, type.dtype()));
      std::memcpy(to, &x, 4);
    } else {
      int64_t x = decodeInteger(at, type.dtype());
      std::memcpy(to, &x, widthOf(storage)); // little-endian: the low bytes
    }
  }
  return storage;
}

} // namespace

/// A program's values: a device tensor per value, with `offset` from the program's base
/// (the arena for the step, a call's workspace for a template) where the plan placed it.
struct Executor::Program {
  std::vector<DeviceTensor> values;
  std::vector<int64_t> offsets;      // per value, -1 when data is absolute
  std::vector<int64_t> workspace;    // per command: a call's workspace offset
};

Executor::Executor(const plan::Plan &plan, HostState &state, ExecutorOptions options)
    : plan(plan), state(state), options(options) {
  // A plan the device cannot run fails here; what was already allocated goes with the
  // members, once the device is done with it.
  try {
    build();
  } catch (...) {
    cudaDeviceSynchronize();
    throw;
  }
}

std::string Executor::attentionKernels() const {
  if (!cudnn)
    return options.attention == AttentionKernels::Own ? "mt's own kernels"
                                                      : "mt's own kernels: " + cudnnMissing;
  std::string line = "cuDNN " + cudnn->version() + " where it serves (" +
                     (!cudnn->servesBackward() ? "the forward; mt's backward"
                      : cudnn->deterministic() ? "forward, deterministic backward"
                                               : "forward, backward summing dq with atomics") +
                     "), mt's own kernels elsewhere";
  if (cudnn->forwardCalls() + cudnn->backwardCalls() > 0)
    line += "; " + std::to_string(cudnn->forwardCalls()) + " forward and " +
            std::to_string(cudnn->backwardCalls()) + " backward calls on cuDNN, workspace up to " +
            std::to_string(cudnn->workspaceBytes() >> 10) + " KiB";
  if (cudnn->ownBytes() > 0)
    line += " (" + std::to_string(cudnn->ownBytes() >> 20) +
            " MiB of it beside the plan's kernel scratch)";
  if (!cudnn->declined().empty())
    line += "; cuDNN declined " + cudnn->declined();
  return line;
}

void checkDeviceMemory(int64_t needed, int64_t arena, int64_t reserve) {
  size_t freeBytes = 0, totalBytes = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  if (needed <= static_cast<int64_t>(freeBytes))
    return;
  char numbers[256];
  std::snprintf(
      numbers, sizeof numbers,
      "the plan needs %.2f GiB of device memory (arena %.2f GiB, kernel scratch, "
      "cuBLASLt workspace and staging %.2f GiB, constants and inputs %.2f GiB) but the device has "
      "%.2f GiB free of %.2f GiB",
      needed / 1073741824.0, arena / 1073741824.0, reserve / 1073741824.0,
      (needed - arena - reserve) / 1073741824.0, freeBytes / 1073741824.0,
      totalBytes / 1073741824.0);
  throw CudaError(std::string(numbers) +
                  "; compile the plan for what is free (mtc --device-memory)");
}

/// Where build() puts what is not a member: the constant pool's bytes and where each constant
/// lies in it, a serialized run's own offsets, the token inputs' bytes, and each offloaded
/// value's place in the host block.
struct Executor::Layout {
  std::string constants;
  std::vector<std::pair<const plan::Program *, int>> constantValues;
  std::vector<int64_t> constantOffsets;
  std::vector<Storage> constantStorage;
  int64_t arenaBytes = 0, inputBytes = 0;
  std::vector<std::vector<int64_t>> ownOffsets; // serialized: per step command, its results'
  std::vector<int64_t> ownWorkspace;            // serialized: per step command
  std::vector<int64_t> hostOffsets;             // per step value, -1 when not on the host
  std::vector<int64_t> ringOffsets;             // per step value, -1 when not in the device's ring
  int64_t hostBytes = 0, hostPoolBytes = 0;
};

void Executor::build() {
  checkHostState();
  Layout layout = layoutOf();
  allocateDevice(layout);
  step = bindProgram(plan.step(), true, layout);
  for (const plan::Template &layer : plan.templates())
    templates.push_back(bindProgram(layer.body(), false, layout));
  placeOffloads(layout);
  bindStep(layout);
  checkStepReads();
  bindPersistent();
  start(layout);
}

void Executor::checkHostState() const {
  const plan::Program &stepProgram = plan.step();
  if (stepProgram.commands_size() == 0 || stepProgram.commands(0).stream().empty())
    throw CudaError("the CUDA backend runs scheduled plans; compile with mtc -o PLAN.mtp "
                    "(scheduling is on by default)");
  for (size_t p = 0; p < state.parameters.size(); ++p) {
    const ParameterState &parameter = state.parameters[p];
    if (!parameter.streamCopy && !plan.stream_masters())
      throw CudaError("the host state keeps no bf16 copies for the device to stream");
    if (!parameter.master && plan.stream_masters())
      throw CudaError("the plan streams whole fp32 masters, and the host state splits them");
    // Each rank uploads what it holds of its own shard, or everything on one GPU.
    const DeviceCollectives *collectives = options.collectives;
    Shard upload = shardOf(parameter.count, collectives ? collectives->rank() : 0,
                           collectives ? collectives->size() : 1);
    if (upload.begin < parameter.held.begin || upload.end > parameter.held.end)
      throw CudaError("the host state holds elements [" + std::to_string(parameter.held.begin) +
                      ", " + std::to_string(parameter.held.end) + ") of " +
                      plan.parameters(p).name() + ", but the step uploads [" +
                      std::to_string(upload.begin) + ", " + std::to_string(upload.end) + ")");
  }
}

Executor::Layout Executor::layoutOf() const {
  const plan::Program &stepProgram = plan.step();
  Layout layout;
  // Constants of the step and of every template go to one pool, uploaded once.
  auto gatherConstants = [&](const plan::Program &program) {
    for (int id = 0; id < program.values_size(); ++id)
      if (program.values(id).has_constant()) {
        std::string bytes;
        layout.constantStorage.push_back(encodeConstant(program.values(id), bytes));
        layout.constantOffsets.push_back(static_cast<int64_t>(layout.constants.size()));
        layout.constantValues.emplace_back(&program, id);
        layout.constants += bytes;
        layout.constants.resize(alignToDevice(layout.constants.size()));
      }
  };
  gatherConstants(stepProgram);
  for (const plan::Template &layer : plan.templates())
    gatherConstants(layer.body());

  // Serialized runs give every result and workspace bytes of their own.
  layout.arenaBytes = plan.arena_bytes();
  layout.ownOffsets.resize(stepProgram.commands_size());
  layout.ownWorkspace.assign(stepProgram.commands_size(), 0);
  if (options.serialize) {
    int64_t top = 0;
    for (int c = 0; c < stepProgram.commands_size(); ++c) {
      const plan::Command &command = stepProgram.commands(c);
      for (int r = 0; r < command.offsets_size(); ++r) {
        layout.ownOffsets[c].push_back(command.offsets(r) < 0 ? -1 : top);
        if (command.offsets(r) >= 0)
          top += alignToDevice(command.result_bytes(r));
      }
      layout.ownWorkspace[c] = top;
      top += alignToDevice(command.workspace_bytes());
    }
    layout.arenaBytes = top;
  }

  for (const plan::Input &input : stepProgram.inputs())
    layout.inputBytes +=
        alignToDevice(elementsOf(stepProgram.values(input.value()).type()) * kTokenBytes);
  return layout;
}

void Executor::allocateDevice(const Layout &layout) {
  const plan::Program &stepProgram = plan.step();
  if (plan.blas_workspace_bytes() <= 0)
    throw CudaError("the plan reserves no device memory beside its arena; recompile it with "
                    "this mtc");
  // A plan that streams its masters into bf16 slots casts them through its staging buffer.
  bool castsMasters = false;
  if (plan.stream_masters())
    for (const plan::Command &command : stepProgram.commands())
      for (int r = 0; command.op() == "mt.prefetch" && r < command.results_size(); ++r)
        castsMasters |= stepProgram.values(command.operands(r)).has_parameter() &&
                        command.result_bytes(r) ==
                            2 * elementsOf(stepProgram.values(command.results(r)).type());
  if (castsMasters && plan.staging_bytes() < kDeviceAlignment)
    throw CudaError("the plan streams its fp32 masters into bf16 slots but reserves no staging "
                    "buffer to cast them in; recompile it with this mtc");
  int64_t stagingBytes = castsMasters ? plan.staging_bytes() : 0;
  int64_t reserve = plan.scratch_bytes() + plan.blas_workspace_bytes() + stagingBytes;
  int64_t constantBytes = static_cast<int64_t>(layout.constants.size());
  checkDeviceMemory(layout.arenaBytes + constantBytes + layout.inputBytes + reserve,
                    layout.arenaBytes, reserve);

  blas = std::make_unique<CublasLt>(plan.blas_workspace_bytes());
  if (options.attention != AttentionKernels::Own)
    cudnn = CudnnAttention::create(options.attention != AttentionKernels::CudnnForward,
                                   options.attention == AttentionKernels::CudnnDeterministic,
                                   &cudnnMissing);
  deviceMemory.blasWorkspace = plan.blas_workspace_bytes();
  scratch = std::make_unique<Scratch>(plan.scratch_bytes());
  deviceMemory.scratch = plan.scratch_bytes();
  arena = DeviceAllocation::create(layout.arenaBytes);
  deviceMemory.arena = layout.arenaBytes;
  constantPool = DeviceAllocation::create(constantBytes);
  MT_CUDA_CHECK(cudaMemcpy(constantPool, layout.constants.data(), layout.constants.size(),
                           cudaMemcpyHostToDevice));
  deviceMemory.constants = constantBytes;
  inputPool = DeviceAllocation::create(layout.inputBytes);
  deviceMemory.inputs = layout.inputBytes;
  if (stagingBytes > 0)
    staging = DeviceAllocation::create(stagingBytes);
  deviceMemory.staging = stagingBytes;
}

std::unique_ptr<Executor::Program> Executor::bindProgram(const plan::Program &program, bool isStep,
                                                         const Layout &layout) const {
  auto bound = std::make_unique<Program>();
  bound->values.resize(program.values_size());
  bound->offsets.assign(program.values_size(), -1);
  bound->workspace.assign(program.commands_size(), 0);
  for (int id = 0; id < program.values_size(); ++id)
    bound->values[id].shape.assign(program.values(id).type().shape().begin(),
                                   program.values(id).type().shape().end());
  for (size_t k = 0; k < layout.constantValues.size(); ++k)
    if (layout.constantValues[k].first == &program) {
      int id = layout.constantValues[k].second;
      bound->values[id] = tensorOf(program.values(id).type(), layout.constantStorage[k],
                                   constantPool.data() + layout.constantOffsets[k]);
    }
  const bool own = isStep && options.serialize;
  for (int c = 0; c < program.commands_size(); ++c) {
    const plan::Command &command = program.commands(c);
    bound->workspace[c] = own ? layout.ownWorkspace[c] : command.workspace_offset();
    bool offload = command.op() == "mt.offload";
    if (!offload && command.offsets_size() != command.results_size())
      throw CudaError(command.op() + " at " + command.location() +
                      " has no device offsets; recompile the plan with this mtc");
    for (int r = 0; r < command.results_size() && !offload; ++r) {
      // Offloaded results are bound by placeOffloads, once the host block exists.
      int id = command.results(r);
      const plan::TensorType &type = program.values(id).type();
      bound->values[id] = tensorOf(type, storageFor(type, command.result_bytes(r)), nullptr);
      bound->offsets[id] = own ? layout.ownOffsets[c][r] : command.offsets(r);
    }
  }
  return bound;
}

void Executor::placeOffloads(Layout &layout) {
  // Offloaded values keep their device storage in one page-aligned host block, pinned
  // with the host state: each checkpoint a slot of its own, and each gradient too, or with
  // the gradient ring a place in it.
  const plan::Program &stepProgram = plan.step();
  gradientParameter.assign(stepProgram.values_size(), -1);
  for (int p = 0; p < stepProgram.gradients_size(); ++p)
    gradientParameter[stepProgram.gradients(p)] = p;
  // An offload's gradients cross in the order the next forward reads their parameters: the
  // last layer's gradients land as the backward ends, and its first-read weights are updated
  // and uploaded while the others still cross.
  std::vector<int> need(plan.parameters_size());
  std::vector<int> order = readOrder();
  for (size_t i = 0; i < order.size(); ++i)
    need[order[i]] = static_cast<int>(i);
  issueOrder.assign(stepProgram.commands_size(), {});
  for (int c = 0; c < stepProgram.commands_size(); ++c) {
    const plan::Command &command = stepProgram.commands(c);
    if (command.op() != "mt.offload")
      continue;
    std::vector<int> &results = issueOrder[c];
    for (int r = 0; r < command.results_size(); ++r)
      results.push_back(r);
    auto rank = [&](int r) {
      int p = gradientParameter[command.results(r)];
      return p >= 0 ? need[p] : -1;
    };
    std::stable_sort(results.begin(), results.end(),
                     [&](int a, int b) { return rank(a) < rank(b); });
  }
  const bool ring = options.gradientRing && !options.serialize && !options.collectives;
  int64_t &hostBytes = layout.hostBytes;
  std::vector<int64_t> &hostOffsets = layout.hostOffsets;
  hostOffsets.assign(stepProgram.values_size(), -1);
  std::vector<int> ringOrder; // gradients, in the order they land
  std::vector<int64_t> offloadBytes(stepProgram.values_size(), 0);
  for (int c = 0; c < stepProgram.commands_size(); ++c) {
    const plan::Command &command = stepProgram.commands(c);
    if (command.op() == "mt.offload")
      for (int r : issueOrder[c]) {
        int id = command.results(r);
        offloadBytes[id] = alignToDevice(step->values[command.operands(r)].bytes());
        if (ring && gradientParameter[id] >= 0 && hostOffsets[id] < 0) {
          ringOrder.push_back(id);
          continue;
        }
        hostOffsets[id] = hostBytes;
        hostBytes += offloadBytes[id];
      }
  }
  layout.ringOffsets.assign(stepProgram.values_size(), -1);
  bool pull = !ringOrder.empty() && plan.pull_gradients();
  if (plan.pull_gradients() && ringOrder.empty())
    gradientsLandedWhy = "this run has no gradient ring (--grad-clip without "
                         "--grad-clip-memory=recompute, --serialize, ranks or sample-major "
                         "micro-batches)";
  int64_t ringBytes = 0;
  if (pull) {
    // The ring goes beside the plan's memory, as deep as the plan asks or the device's free
    // memory allows, less a margin for cuDNN's own workspace; where not even the least ring
    // fits, the gradients land in host memory, as a plan without it lands them.
    size_t freeBytes = 0, totalBytes = 0;
    MT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
    int64_t room = static_cast<int64_t>(freeBytes) - kPullMargin;
    ringBytes = placeGradientRing(ringOrder, offloadBytes, 0, layout.ringOffsets, room);
    if (ringBytes > room) {
      char why[256];
      std::snprintf(why, sizeof why,
                    "the least ring (%lld layers' gradients) needs %.2f GiB of device memory, "
                    "and the device has %.2f GiB free, less 1 GiB kept for cuDNN's own",
                    static_cast<long long>(kLeastGradientRingLayers), ringBytes / 1073741824.0,
                    freeBytes / 1073741824.0);
      gradientsLandedWhy = why;
      layout.ringOffsets.assign(stepProgram.values_size(), -1);
      pull = false;
    }
  }
  if (pull) {
    deviceRing = DeviceAllocation::create(ringBytes);
    deviceMemory.gradientRing = ringBytes;
    // The slots the updates pull through, pinned in the host block with the rest, each a
    // chunk's, or the largest gradient's where it is smaller.
    int64_t largest = 0;
    for (int id : ringOrder)
      largest = std::max(largest, offloadBytes[id]);
    pullSlotElements = std::min<int64_t>(kPullChunk, largest / sizeof(float));
    pullSlotsAt = hostBytes;
    hostBytes += kPullSlots * pullSlotElements * static_cast<int64_t>(sizeof(float));
    onDeviceRing.assign(stepProgram.values_size(), 0);
    for (int id : ringOrder)
      onDeviceRing[id] = 1;
  } else if (!ringOrder.empty()) {
    hostBytes += placeGradientRing(ringOrder, offloadBytes, hostBytes, hostOffsets,
                                   std::numeric_limits<int64_t>::max());
  }
  // A parameter the loss does not reach has a constant zero gradient: it gets a zeroed host
  // slot, like an offloaded gradient (shared when parameters share the constant).
  for (int p = 0; p < stepProgram.gradients_size(); ++p) {
    int id = stepProgram.gradients(p);
    if (!stepProgram.values(id).has_constant())
      continue;
    if (hostOffsets[id] < 0) {
      hostOffsets[id] = hostBytes;
      step->values[id] = tensorOf(stepProgram.values(id).type(), Storage::F32, nullptr);
      hostBytes += alignToDevice(step->values[id].bytes());
    }
    constantGradients.push_back(p);
  }
  layout.hostPoolBytes = pageAlign(std::max<int64_t>(hostBytes, 1));
  // Refused before it is taken: the kernel would grant it and kill the run as it pins.
  if (int64_t available = availableHostBytes();
      available >= 0 && layout.hostPoolBytes > available) {
    char message[256];
    std::snprintf(message, sizeof message,
                  "the offloaded checkpoints and gradients need %.1f GiB of host memory beside "
                  "the host state, but this machine has %.1f GiB available",
                  layout.hostPoolBytes / 1073741824.0, available / 1073741824.0);
    // Clipping without the ring holds every gradient until the norm is known.
    bool clipHolds = !ring && plan.optimizer().grad_clip() > 0 && !options.collectives;
    throw CudaError(std::string(message) +
                    (clipHolds ? "; --grad-clip holds every gradient for the global norm, "
                                 "--grad-clip-memory=recompute holds none"
                               : ""));
  }
  hostPool.reset(allocateHostBlock(layout.hostPoolBytes));
  if (!hostPool)
    throw CudaError("cannot allocate " + std::to_string(hostBytes) +
                    " bytes of host memory for offloaded checkpoints and gradients");
  for (const plan::Command &command : stepProgram.commands())
    if (command.op() == "mt.offload")
      for (int r = 0; r < command.results_size(); ++r) {
        const DeviceTensor &from = step->values[command.operands(r)];
        int id = command.results(r);
        step->values[id] = from;
        step->values[id].data = layout.ringOffsets[id] >= 0
                                    ? deviceRing.data() + layout.ringOffsets[id]
                                    : hostPool.get() + hostOffsets[id];
      }
  for (int p : constantGradients) {
    DeviceTensor &zero = step->values[stepProgram.gradients(p)];
    zero.data = hostPool.get() + hostOffsets[stepProgram.gradients(p)];
    std::memset(zero.data, 0, zero.bytes());
  }
}

void Executor::bindStep(const Layout &layout) {
  const plan::Program &stepProgram = plan.step();
  for (int id = 0; id < stepProgram.values_size(); ++id)
    if (step->offsets[id] >= 0)
      step->values[id].data = arena.data() + step->offsets[id];

  int64_t inputAt = 0;
  for (const plan::Input &input : stepProgram.inputs()) {
    const plan::TensorType &type = stepProgram.values(input.value()).type();
    step->values[input.value()] = tensorOf(type, Storage::I64, inputPool.data() + inputAt);
    inputAt += alignToDevice(elementsOf(type) * kTokenBytes);
  }

  for (int p = 0; p < stepProgram.gradients_size(); ++p) {
    int id = stepProgram.gradients(p);
    const DeviceTensor &gradient = step->values.at(id);
    if ((layout.hostOffsets[id] < 0 && layout.ringOffsets[id] < 0) ||
        gradient.storage != Storage::F32)
      throw CudaError("the gradient of " + plan.parameters(p).name() +
                      " is not offloaded to the host in fp32; recompile the plan with this mtc");
    gradients.push_back(reinterpret_cast<float *>(gradient.data));
  }
  notices.clear();
  for (int id = 0; id < stepProgram.values_size(); ++id)
    notices.push_back({this, gradientParameter[id]});
}

void Executor::checkStepReads() const {
  const plan::Program &stepProgram = plan.step();
  // Averaging a gradient over the ranks overwrites its device buffer: nothing may read that
  // buffer after the offload.
  if (options.collectives) {
    std::vector<int> lastRead(stepProgram.values_size(), -1);
    for (int c = 0; c < stepProgram.commands_size(); ++c)
      for (int id : stepProgram.commands(c).operands())
        lastRead[id] = c;
    for (int c = 0; c < stepProgram.commands_size(); ++c) {
      const plan::Command &command = stepProgram.commands(c);
      if (command.op() == "mt.offload")
        for (int r = 0; r < command.results_size(); ++r) {
          int p = gradientParameter[command.results(r)];
          if (p >= 0 && lastRead[command.operands(r)] > c)
            throw CudaError("the gradient of " + plan.parameters(p).name() +
                            " is read on the device after its offload at " +
                            command.location() + ", so it cannot be averaged in place");
        }
    }
  }
  for (const plan::Command &command : stepProgram.commands())
    if (command.op() != "mt.prefetch")
      for (int id : command.operands())
        if (stepProgram.values(id).has_parameter())
          throw CudaError(command.op() + " at " + command.location() + " reads parameter " +
                          plan.parameters(stepProgram.values(id).parameter()).name() +
                          " without a prefetch");
}

void Executor::start(const Layout &layout) {
  std::vector<PinnedMemory::Region> regions;
  for (const LayerBlock &block : state.blocks)
    regions.push_back({block.begin, static_cast<size_t>(block.bytes)});
  if (layout.hostBytes > 0)
    regions.push_back({hostPool.get(), static_cast<size_t>(layout.hostPoolBytes)});
  pinned = std::make_unique<PinnedMemory>(regions);
  if (!persistentSent.empty()) // the copies it sends lie in the state's registrations
    sender = std::make_unique<WeightSender>(*pinned);

  streams = {Stream::create(), Stream::create(), Stream::create()};
  if (deviceRing)
    puller = std::make_unique<GradientPuller>(
        reinterpret_cast<float *>(hostPool.get() + pullSlotsAt), pullSlotElements, *pinned);
  if (options.deviceUpdateLayers > 0)
    startDeviceUpdates();
  for (int e = 0; e < plan.events(); ++e)
    events.push_back(Event::forOrdering());
  clock.begin = Event::forTiming();
  for (Event &end : clock.streamEnds)
    end = Event::forTiming();
  for (int c = 0; options.timeCommands && c < plan.step().commands_size(); ++c) {
    clock.commandStarts.push_back(Event::forTiming());
    clock.commandEnds.push_back(Event::forTiming());
  }
  // The constants' blocking copy from pageable memory may still be landing: the executor's
  // non-blocking streams would not wait for it.
  MT_CUDA_CHECK(cudaDeviceSynchronize());
}

void Executor::startDeviceUpdates() {
  // As the cost model counts them: the prologue's parameters (those the step reads before
  // any layer block) and deviceUpdateLayers blocks spread over the read order.
  const std::vector<int> order = readOrder();
  std::map<int64_t, int64_t> place; // a layer block's place in the read order
  for (int p : order)
    if (int64_t layer = plan.parameters(p).layer(); layer >= 0)
      place.emplace(layer, static_cast<int64_t>(place.size()));
  std::vector<int> onDevice;
  bool prologue = true;
  for (int p : order) {
    int64_t layer = plan.parameters(p).layer();
    prologue = prologue && layer < 0;
    bool chosen = prologue || (layer >= 0 && updatesLayerOnDevice(place.at(layer), place.size(),
                                                                  options.deviceUpdateLayers));
    if (chosen && persistentWeight(p) && gradientOnDevice(p))
      onDevice.push_back(p);
  }
  if (persistentSent.empty())
    updatesOnHostWhy = "the plan keeps no weight on the device across steps (mtc "
                       "--persistent-layers)";
  else if (!deviceRing)
    updatesOnHostWhy =
        "the gradients land in host memory: " +
        (gradientsLandedWhy.empty()
             ? std::string("the plan does not pull them (mtc --gradient-ring=device)")
             : gradientsLandedWhy);
  else if (onDevice.empty())
    updatesOnHostWhy = "no persistent weight's gradient waits in the device's ring";
  if (!updatesOnHostWhy.empty())
    return;
  size_t freeBytes = 0, totalBytes = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  const int64_t needed = DeviceUpdater::deviceBytesFor(state, onDevice);
  if (needed > static_cast<int64_t>(freeBytes) - kPullMargin) {
    char why[200];
    std::snprintf(why, sizeof why,
                  "they need %.2f GiB of device memory beside the plan and the ring, and the "
                  "device has %.2f GiB free, less 1 GiB kept for cuDNN's own",
                  needed / 1073741824.0, freeBytes / 1073741824.0);
    updatesOnHostWhy = why;
    return;
  }
  const int64_t residentBytes =
      options.residentUpdateState ? static_cast<int64_t>(freeBytes) - kResidentMargin - needed : 0;
  updater = std::make_unique<DeviceUpdater>(state, onDevice, *pinned, residentBytes);
  deviceMemory.updates = updater->deviceBytes();
  if (options.timeCommands)
    updater->timeUpdates();
}

std::vector<UpdateTiming> Executor::deviceUpdateTimings() {
  std::vector<UpdateTiming> timings;
  if (!updater)
    return timings;
  for (const DeviceUpdater::Span &span : updater->takeSpans()) {
    MT_CUDA_CHECK(cudaEventSynchronize(span.end));
    UpdateTiming timing{span.parameter, 0, 0};
    MT_CUDA_CHECK(cudaEventElapsedTime(&timing.start, clock.begin, span.start));
    MT_CUDA_CHECK(cudaEventElapsedTime(&timing.end, clock.begin, span.end));
    timings.push_back(timing);
  }
  return timings;
}

double Executor::updateOnDevice(int p, const AdamWConstants &constants, bool guarded) {
  if (!updatesOnDevice(p))
    throw std::logic_error("parameter " + plan.parameters(p).name() +
                           " is not updated on the device");
  double squares = updater->squares(p);
  updater->update(p, gradients.at(p), constants, guarded, persistentTargets.at(p),
                  persistentSent.at(p));
  return squares;
}

// The members free the device's memory, streams and events, and unpin the host's, once the
// device has finished with them.
Executor::~Executor() { cudaDeviceSynchronize(); }

void Executor::drain() {
  for (int s = 0; s < 3; ++s)
    if (streams[s])
      cudaStreamSynchronize(streams[s]);
  if (updater) // its high halves stay on the device: a checkpoint may be reading the state
    try {
      updater->wait();
    } catch (const std::exception &) { // a failed step drains too
    }
  // After a device error the synchronizations return at once, while a landing's callback may
  // still run: from here on none reaches the listener, and once this returns none is inside
  // it (the callback holds the lock around it), so what it calls may be torn down.
  std::lock_guard<std::mutex> lock(landingMutex);
  gradientListener = nullptr;
}

int64_t Executor::placeGradientRing(const std::vector<int> &order,
                                    const std::vector<int64_t> &bytes, int64_t base,
                                    std::vector<int64_t> &hostOffsets, int64_t most) {
  // The plan's depth in the largest layer's gradients (mt-fit-step's, by the cost model: the
  // layers landed while the CPU still updates earlier ones), the least in a plan without one.
  int64_t depth =
      plan.gradient_ring_layers() > 0 ? plan.gradient_ring_layers() : kLeastGradientRingLayers;
  std::map<int64_t, int64_t> layerBytes;
  for (int id : order)
    layerBytes[plan.parameters(gradientParameter[id]).layer()] += bytes[id];
  int64_t unit = 0, total = 0;
  for (const auto &layer : layerBytes) {
    unit = std::max(unit, layer.second);
    total += layer.second;
  }
  int64_t capacity = gradientRingBytes(depth, unit, total);
  while (capacity > most && depth > kLeastGradientRingLayers)
    capacity = gradientRingBytes(--depth, unit, total);
  std::vector<int64_t> sizes;
  for (int id : order)
    sizes.push_back(bytes[id]);
  std::vector<std::pair<int64_t, int64_t>> places = placeInRing(sizes, capacity);
  for (size_t i = 0; i < order.size(); ++i)
    hostOffsets[order[i]] = base + places[i].first;
  ringOccupants.assign(plan.step().gradients_size(), {});
  for (size_t i = 0; i < order.size(); ++i)
    for (size_t j = 0; j < order.size(); ++j)
      if (i != j && places[i].first < places[j].second && places[j].first < places[i].second)
        ringOccupants[gradientParameter[order[i]]].push_back({gradientParameter[order[j]], j < i});
  landedRun.assign(plan.step().gradients_size(), 0);
  return capacity;
}

void Executor::pullGradient(int p, int64_t count, const GradientVisitor &visit) {
  const float *from = gradients.at(p);
  if (!gradientOnDevice(p))
    visit(from, 0, count);
  else
    puller->pull(from, count, visit);
}

void Executor::gradientLanded(void *data) {
  auto *notice = static_cast<GradientNotice *>(data);
  Executor &executor = *notice->executor;
  std::lock_guard<std::mutex> lock(executor.landingMutex);
  if (!executor.gradientListener) // drained after a failure
    return;
  executor.gradientListener(notice->parameter);
  if (executor.landedRun.empty()) // no gradient ring: nothing waits for landings
    return;
  executor.landedRun[notice->parameter] = executor.runs;
  executor.landing.notify_all();
}

void Executor::awaitLanding(int p) {
  std::unique_lock<std::mutex> lock(landingMutex);
  // A failed step lands nothing more: its error ends the wait. The stream is asked without
  // the lock, which the landings' callbacks take.
  while (!landing.wait_for(lock, std::chrono::milliseconds(50),
                           [&] { return landedRun[p] >= runs; })) {
    lock.unlock();
    cudaError_t status = cudaStreamQuery(streams.d2h);
    if (status != cudaSuccess && status != cudaErrorNotReady)
      MT_CUDA_CHECK(status);
    lock.lock();
  }
}

void Executor::onGradient(std::function<void(int parameter)> listener) {
  std::lock_guard<std::mutex> lock(landingMutex);
  gradientListener = std::move(listener);
}

const DeviceTensor &Executor::stepValue(int id) const { return step->values.at(id); }

int Executor::completingCommand(int p, const std::vector<int> &producer) const {
  const plan::Program &stepProgram = plan.step();
  int gradient = stepProgram.gradients(p);
  if (producer[gradient] < 0) // a constant, whose update waits for the step's end
    return stepProgram.commands_size();
  const plan::Command &offload = stepProgram.commands(producer[gradient]);
  for (int r = 0; r < offload.results_size(); ++r)
    if (offload.results(r) == gradient)
      return producer[offload.operands(r)];
  return producer[gradient];
}

void Executor::bindPersistent() {
  const plan::Program &stepProgram = plan.step();
  persistentTargets.assign(plan.parameters_size(), {});
  std::vector<char> streamed(plan.parameters_size(), 0); // prefetched otherwise
  // The persistent copies' device bytes, and which step values they are.
  std::vector<std::pair<const char *, const char *>> kept;
  std::vector<char> keptValue(stepProgram.values_size(), 0);
  std::vector<int> producer(stepProgram.values_size(), -1);
  for (int c = 0; c < stepProgram.commands_size(); ++c)
    for (int id : stepProgram.commands(c).results())
      producer[id] = c;
  for (int c = 0; c < stepProgram.commands_size(); ++c) {
    const plan::Command &command = stepProgram.commands(c);
    if (command.op() != "mt.prefetch")
      continue;
    for (int r = 0; r < command.results_size(); ++r) {
      const plan::Value &source = stepProgram.values(command.operands(r));
      if (!source.has_parameter())
        continue;
      int p = source.parameter();
      const std::string &name = plan.parameters(p).name();
      if (!isPersistent(command)) {
        streamed[p] = 1;
        continue;
      }
      const DeviceTensor &copy = step->values[command.results(r)];
      if (options.collectives)
        throw CudaError("persistent weights (" + name +
                        ") run on one GPU; recompile the plan "
                        "without --persistent-layers for ranks");
      if (copy.storage != Storage::BF16 || !state.parameters.at(p).streamCopy)
        throw CudaError("persistent weight " + name +
                        " needs bf16 on the device and the host's "
                        "bf16 copy; recompile with this mtc");
      // Its update's copy crosses once its gradient is complete: nothing may read the device
      // copy after the command that completes the gradient (the offload waits for it alone).
      int completes = completingCommand(p, producer);
      for (int later = completes + 1; later < stepProgram.commands_size(); ++later)
        for (int operand : stepProgram.commands(later).operands())
          if (operand == command.results(r))
            throw CudaError("persistent weight " + name + " is read by " +
                            stepProgram.commands(later).op() + " at " +
                            stepProgram.commands(later).location() +
                            " after its gradient is complete; recompile without "
                            "--persistent-layers");
      persistentTargets[p].push_back(static_cast<uint16_t *>(copy.data));
      kept.push_back({static_cast<const char *>(copy.data),
                      static_cast<const char *>(copy.data) + copy.bytes()});
      keptValue[command.results(r)] = 1;
    }
  }
  for (int p = 0; p < plan.parameters_size(); ++p) {
    if (persistentTargets[p].empty())
      continue;
    if (streamed[p])
      throw CudaError("persistent weight " + plan.parameters(p).name() +
                      " is also prefetched for each step; recompile with this mtc");
    persistentSent.resize(plan.parameters_size());
    persistentSent[p] = Event::forOrdering();
  }
  // No other tensor of the step, nor a call's workspace, may take a persistent weight's bytes
  // at any point of it: the plan's liveness keeps them for the whole step.
  if (kept.empty())
    return;
  std::sort(kept.begin(), kept.end());
  auto check = [&](const char *begin, int64_t bytes, const std::string &what) {
    // The kept ranges do not overlap one another: sorted by start, their ends are too.
    auto after =
        std::upper_bound(kept.begin(), kept.end(), begin,
                         [](const char *at, const auto &range) { return at < range.second; });
    if (bytes > 0 && after != kept.end() && after->first < begin + bytes)
      throw CudaError("the plan places " + what +
                      " in a persistent weight's device memory; recompile with this mtc");
  };
  for (int id = 0; id < stepProgram.values_size(); ++id)
    if (step->offsets[id] >= 0 && !keptValue[id])
      check(static_cast<const char *>(step->values[id].data), step->values[id].bytes(),
            "step value " + std::to_string(id));
  for (int c = 0; c < stepProgram.commands_size(); ++c)
    if (stepProgram.commands(c).workspace_bytes() > 0)
      check(arena.data() + step->workspace[c], stepProgram.commands(c).workspace_bytes(),
            "the workspace of " + stepProgram.commands(c).op() + " at " +
                stepProgram.commands(c).location());
}

void Executor::updateParameter(int p, int64_t count, const float *gradient,
                               const GradientVisitor &update) {
  const std::vector<uint16_t *> *targets = persistentWeight(p) ? &persistentTargets[p] : nullptr;
  // A persistent weight's pieces cross from the state's bf16 copy as the update writes them.
  auto piece = [&](const float *chunk, int64_t first, int64_t n) {
    if (!targets)
      return update(chunk, first, n);
    sender->send(*targets, state.parameters.at(p).streamCopy, first, n,
                 [&](int64_t at, int64_t m) { update(chunk + (at - first), at, m); });
  };
  if (gradient)
    piece(gradient, 0, count);
  else
    pullGradient(p, count, piece);
  if (targets)
    sender->mark(persistentSent[p]);
}

void Executor::awaitParameter(std::function<void(int parameter)> await) {
  parameterAwait = std::move(await);
}

std::vector<int> Executor::readOrder() const {
  const plan::Program &program = plan.step();
  std::vector<int> order;
  std::vector<bool> placed(plan.parameters_size(), false);
  auto place = [&](int p) {
    if (!placed.at(p))
      order.push_back(p);
    placed[p] = true;
  };
  for (const plan::Command &command : program.commands())
    if (command.op() == "mt.prefetch")
      for (int operand : command.operands())
        if (program.values(operand).has_parameter())
          place(program.values(operand).parameter());
  for (int p = 0; p < plan.parameters_size(); ++p)
    place(p);
  return order;
}

cudaStream_t Executor::streamOf(const plan::Command &command, int *index) const {
  static const char *names[3] = {"h2d", "compute", "d2h"};
  for (int s = 0; s < 3; ++s)
    if (command.stream() == names[s]) {
      *index = s;
      return options.serialize ? streams.compute.get() : streams[s];
    }
  throw CudaError(command.op() + " at " + command.location() + " names stream '" +
                  command.stream() + "'; expected h2d, compute or d2h");
}

int64_t Executor::uploadParameter(int p, const DeviceTensor &slot, Shard shard,
                                  cudaStream_t stream) {
  const ParameterState &parameter = state.parameters.at(p);
  if (parameter.count != slot.size())
    throw CudaError("prefetch of " + plan.parameters(p).name() + ": the slot holds " +
                    std::to_string(slot.size()) + " elements");
  // The host holds elements [held.begin, held.end) of the parameter.
  auto host = [&](const void *base, int64_t element, int64_t width) {
    return const_cast<char *>(static_cast<const char *>(base)) +
           (element - parameter.held.begin) * width;
  };
  int64_t width = widthOf(slot.storage);
  if (slot.storage == Storage::F32 && !parameter.master)
    throw CudaError("prefetch of " + plan.parameters(p).name() +
                    ": an fp32 slot reads whole masters, and the host state splits them; "
                    "recompile with --stream-weights=fp32");
  if (slot.storage == Storage::F32 || parameter.streamCopy) {
    const void *from = slot.storage == Storage::F32 ? static_cast<const void *>(parameter.master)
                                                    : parameter.streamCopy;
    pinned->copy(static_cast<char *>(slot.data) + shard.begin * width,
                 host(from, shard.begin, width), shard.size() * width, cudaMemcpyHostToDevice,
                 stream);
    return shard.size() * width;
  }
  // The master crosses a piece at a time into the staging buffer and is cast from there; the
  // stream's order keeps each piece's cast ahead of the next piece's copy over it.
  int64_t piece = deviceMemory.staging / 4;
  if (piece == 0)
    throw CudaError("prefetch of " + plan.parameters(p).name() +
                    ": the host keeps no bf16 copy of it and the plan no staging buffer");
  for (int64_t at = shard.begin; at < shard.end; at += piece) {
    int64_t n = std::min(piece, shard.end - at);
    pinned->copy(staging.data(), host(parameter.master, at, 4), n * 4, cudaMemcpyHostToDevice,
                 stream);
    copyTensor(DeviceTensor{staging.data(), Storage::F32, {n}},
               DeviceTensor{static_cast<char *>(slot.data) + at * 2, Storage::BF16, {n}}, stream);
  }
  return shard.size() * 4;
}

void Executor::runCommand(const plan::Command &command, const std::vector<DeviceTensor> &values,
                          std::vector<DeviceTensor> &results, cudaStream_t stream) {
  std::vector<DeviceTensor> operands;
  for (int id : command.operands())
    operands.push_back(values[id]);
  scratch->reset();
  KernelArgs args(command, std::move(operands), results, stream, *blas, cudnn.get(), *scratch);
  if (!options.profileKernels) {
    runDeviceKernel(args);
    return;
  }
  size_t k = clock.kernelsRun++;
  if (k == clock.kernels.size()) {
    clock.kernelStarts.push_back(Event::forTiming());
    clock.kernelEnds.push_back(Event::forTiming());
    clock.kernels.push_back(nullptr);
  }
  clock.kernels[k] = &command;
  MT_CUDA_CHECK(cudaEventRecord(clock.kernelStarts[k], stream));
  runDeviceKernel(args);
  MT_CUDA_CHECK(cudaEventRecord(clock.kernelEnds[k], stream));
}

void Executor::runTemplate(int index, const std::vector<DeviceTensor> &arguments,
                           char *workspace, const std::vector<DeviceTensor> &results,
                           cudaStream_t stream) {
  const plan::Template &layer = plan.templates(index);
  const Program &bound = *templates.at(index);
  const plan::Program &body = layer.body();
  std::vector<DeviceTensor> values = bound.values;
  for (int id = 0; id < body.values_size(); ++id) {
    if (bound.offsets[id] >= 0)
      values[id].data = workspace + bound.offsets[id];
    else if (body.values(id).has_input()) {
      const DeviceTensor &argument = arguments.at(body.values(id).input());
      if (argument.size() != values[id].size())
        throw CudaError("template " + layer.name() + " gets " + std::to_string(argument.size()) +
                        " elements for an argument of " + std::to_string(values[id].size()));
      values[id].data = argument.data;
      values[id].storage = argument.storage;
    }
  }
  // A result that a command makes lands in the call's buffer directly, not in the workspace
  // and then a copy: a gradient accumulated into place stays in place.
  std::vector<bool> landed(layer.results_size(), false);
  for (int r = 0; r < layer.results_size(); ++r) {
    int id = layer.results(r);
    DeviceTensor &value = values[id];
    if (bound.offsets[id] >= 0 && value.storage == results.at(r).storage &&
        value.size() == results[r].size() &&
        std::count(layer.results().begin(), layer.results().end(), id) == 1) {
      value.data = results[r].data;
      landed[r] = true;
    }
  }
  for (const plan::Command &command : body.commands()) {
    std::vector<DeviceTensor> outputs;
    for (int id : command.results())
      outputs.push_back(values[id]);
    runCommand(command, values, outputs, stream);
  }
  for (int r = 0; r < layer.results_size(); ++r)
    if (!landed[r])
      copyTensor(values[layer.results(r)], results.at(r), stream);
}

StepMeasures Executor::run(const std::map<std::string, std::vector<int64_t>> &inputs) {
  const plan::Program &program = plan.step();
  {
    std::lock_guard<std::mutex> lock(landingMutex);
    ++runs;
  }
  for (const plan::Input &input : program.inputs()) {
    const DeviceTensor &slot = step->values[input.value()];
    const std::vector<int64_t> &values = stepInput(program, input, inputs);
    // On the compute stream, which every use follows: a blocking copy from pageable memory
    // may return before its data land, and the executor's streams do not wait for it.
    MT_CUDA_CHECK(cudaMemcpyAsync(slot.data, values.data(), slot.bytes(),
                                  cudaMemcpyHostToDevice, streams.compute));
  }

  StepMeasures measures;
  clock.kernelsRun = 0;
  if (updater && options.timeCommands) // the trace shows those from this step's start on
    updater->takeSpans();
  // Every stream starts at `begin`, so that command times share one origin.
  MT_CUDA_CHECK(cudaEventRecord(clock.begin, streams.compute));
  MT_CUDA_CHECK(cudaStreamWaitEvent(streams.h2d, clock.begin));
  MT_CUDA_CHECK(cudaStreamWaitEvent(streams.d2h, clock.begin));
  const std::vector<DeviceTensor> &values = step->values;
  DeviceCollectives *collectives = options.collectives;
  for (int c = 0; c < program.commands_size(); ++c) {
    const plan::Command &command = program.commands(c);
    int streamIndex = 0;
    cudaStream_t stream = streamOf(command, &streamIndex);
    if (!options.serialize)
      for (int event : command.waits())
        MT_CUDA_CHECK(cudaStreamWaitEvent(stream, events.at(event)));
    // A copy's clock starts at its first copy, once the host has waited for what that copy
    // needs (an update, a landing): the wait is the CPU's, not the copy stream's.
    bool started = false;
    auto startClock = [&] {
      if (options.timeCommands && !started)
        MT_CUDA_CHECK(cudaEventRecord(clock.commandStarts[c], stream));
      started = true;
    };
    const bool isCopy = command.op() == "mt.prefetch" || command.op() == "mt.offload";
    if (!isCopy)
      startClock();
    std::vector<DeviceTensor> results;
    for (int id : command.results())
      results.push_back(values[id]);
    if (command.op() == "mt.prefetch") {
      // A persistent weight crosses on the first run; later ones wait for its update's copy.
      const bool sent = persistentFilled && isPersistent(command);
      for (int r = 0; r < command.results_size(); ++r) {
        const plan::Value &source = program.values(command.operands(r));
        const DeviceTensor &to = results[r];
        void *from = values[command.operands(r)].data;
        if (!source.has_parameter()) {
          startClock();
          pinned->copy(to.data, from, to.bytes(), cudaMemcpyHostToDevice, stream);
          measures.copiedBytes[0] += to.bytes();
          continue;
        }
        // Each weight crosses once its update has run: the first updated cross while the
        // worker updates the rest.
        if (parameterAwait)
          parameterAwait(source.parameter());
        startClock();
        if (sent) {
          MT_CUDA_CHECK(cudaStreamWaitEvent(stream, persistentSent[source.parameter()]));
          continue;
        }
        // With ranks, this rank's shard crosses PCIe and the device gathers the rest.
        Shard shard = shardOf(to.size(), collectives ? collectives->rank() : 0,
                              collectives ? collectives->size() : 1);
        measures.copiedBytes[0] += uploadParameter(source.parameter(), to, shard, stream);
        if (collectives)
          collectives->gather(to.data, to.size(), static_cast<int>(widthOf(to.storage)), stream);
      }
    } else if (command.op() == "mt.offload") {
      for (int r : issueOrder[c]) {
        const DeviceTensor &from = values[command.operands(r)];
        int p = gradientParameter[command.results(r)];
        // A gradient's host slot is free once the update that read it last has run (and,
        // in the ring, the gradients of the slots it overlaps have landed and been used).
        if (parameterAwait && p >= 0) {
          // A gradient the device updates is read there until its update's end.
          auto awaitUpdate = [&](int q) {
            parameterAwait(q);
            if (updatesOnDevice(q))
              MT_CUDA_CHECK(cudaStreamWaitEvent(stream, persistentSent[q]));
          };
          if (!ringOccupants.empty())
            for (auto [q, sameStep] : ringOccupants[p]) {
              if (sameStep)
                awaitLanding(q);
              awaitUpdate(q);
            }
          awaitUpdate(p);
        }
        startClock();
        // With ranks, a gradient is averaged on the device and this rank's shard offloaded.
        Shard shard{0, from.size()};
        if (collectives && p >= 0) {
          collectives->reduceMean(static_cast<float *>(from.data), from.size(), stream);
          shard = shardOf(from.size(), collectives->rank(), collectives->size());
        }
        int64_t width = widthOf(from.storage);
        if (!onDeviceRing.empty() && onDeviceRing[command.results(r)]) {
          // Into the device's ring: the update pulls it across PCIe.
          MT_CUDA_CHECK(cudaMemcpyAsync(results[r].data, from.data, from.bytes(),
                                        cudaMemcpyDeviceToDevice, stream));
          if (updatesOnDevice(p)) // its squares reach the host before its landing's notice
            updater->measure(p, static_cast<const float *>(results[r].data), stream);
        } else {
          pinned->copy(static_cast<char *>(from.data) + shard.begin * width,
                       static_cast<char *>(results[r].data) + shard.begin * width,
                       shard.size() * width, cudaMemcpyDeviceToHost, stream);
          measures.copiedBytes[1] += shard.size() * width;
        }
        if (gradientListener && p >= 0)
          MT_CUDA_CHECK(cudaLaunchHostFunc(stream, gradientLanded, &notices[command.results(r)]));
      }
    } else if (command.op() == "mt.call") {
      std::vector<DeviceTensor> arguments;
      for (int id : command.operands())
        arguments.push_back(values[id]);
      int64_t workspace = step->workspace[c];
      runTemplate(static_cast<int>(command.attributes().at("template").i()), arguments,
                  arena.data() + workspace, results, stream);
    } else {
      runCommand(command, values, results, stream);
    }
    startClock(); // a copy of nothing
    if (options.timeCommands)
      MT_CUDA_CHECK(cudaEventRecord(clock.commandEnds[c], stream));
    if (command.record() >= 0 && !options.serialize)
      MT_CUDA_CHECK(cudaEventRecord(events.at(command.record()), stream));
  }
  for (int s = 0; s < 3; ++s)
    MT_CUDA_CHECK(cudaEventRecord(clock.streamEnds[s], streams[s]));
  for (int s = 0; s < 3; ++s)
    MT_CUDA_CHECK(cudaStreamSynchronize(streams[s]));
  persistentFilled = true;
  measures.hostEnd = std::chrono::steady_clock::now();
  // A constant gradient is ready from the start; its update is queued once the step's
  // uploads have finished, so that none of them reads the weights it writes.
  if (gradientListener)
    for (int p : constantGradients)
      gradientListener(p);
  deviceMemory.scratchUsed = static_cast<int64_t>(scratch->peak());
  deviceMemory.cudnnBeside = cudnn ? cudnn->ownBytes() : 0;

  for (int s = 0; s < 3; ++s) {
    float ms = 0;
    MT_CUDA_CHECK(cudaEventElapsedTime(&ms, clock.begin, clock.streamEnds[s]));
    measures.ms = std::max<double>(measures.ms, ms);
  }
  if (options.timeCommands)
    for (int c = 0; c < program.commands_size(); ++c) {
      CommandTiming timed{c, 0, 0, 0};
      streamOf(program.commands(c), &timed.stream);
      MT_CUDA_CHECK(cudaEventElapsedTime(&timed.start, clock.begin, clock.commandStarts[c]));
      MT_CUDA_CHECK(cudaEventElapsedTime(&timed.end, clock.begin, clock.commandEnds[c]));
      measures.busyMs[timed.stream] += timed.end - timed.start;
      measures.commands.push_back(timed);
      if (options.profileKernels && familyOf(program.commands(c).op()) == OpFamily::Copies)
        measures.profile.add(OpFamily::Copies, timed.end - timed.start, 0, 1);
    }
  if (options.profileKernels) {
    for (size_t k = 0; k < clock.kernelsRun; ++k) {
      float ms = 0;
      MT_CUDA_CHECK(cudaEventElapsedTime(&ms, clock.kernelStarts[k], clock.kernelEnds[k]));
      measures.profile.addKernel(*clock.kernels[k], ms);
    }
    measures.profile.add(OpFamily::Copies, 0,
                         static_cast<double>(measures.copiedBytes[0] + measures.copiedBytes[1]), 0);
    measures.profile.setStepMs(measures.ms);
  }

  const DeviceTensor &loss = values[program.loss()];
  if (loss.size() != 1)
    throw CudaError("the loss has " + std::to_string(loss.size()) + " elements");
  if (loss.storage != Storage::F32)
    throw CudaError("the loss is not fp32 on the device; recompile the plan with this mtc");
  float x = 0;
  MT_CUDA_CHECK(cudaMemcpy(&x, loss.data, 4, cudaMemcpyDeviceToHost));
  measures.loss = x;
  return measures;
}

} // namespace mt::cuda
