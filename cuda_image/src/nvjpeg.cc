// NvJpegDecoder (batchcast/cuda_image/nvjpeg.h), built when nvJPEG is found.
#include "batchcast/cuda_image/nvjpeg.h"

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "batchcast/cuda/check.h"
#include "batchcast/cuda/runtime.h"
#include "core/src/logging.h"

namespace batchcast::cuda {

namespace {

// The name of each nvjpegStatus_t and the StatusCode it maps to (Internal
// unless it says more).
struct NvJpegStatusInfo {
  int status;
  const char* name;
  StatusCode code;
};
#define BC_NVJPEG_STATUS(status, code) \
  { status, #status, StatusCode::code }
constexpr NvJpegStatusInfo kNvJpegStatuses[] = {
    BC_NVJPEG_STATUS(NVJPEG_STATUS_NOT_INITIALIZED, kInternal),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_INVALID_PARAMETER, kInvalidArgument),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_BAD_JPEG, kDataLoss),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_JPEG_NOT_SUPPORTED, kDataLoss),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_ALLOCATOR_FAILURE, kResourceExhausted),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_EXECUTION_FAILED, kInternal),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_ARCH_MISMATCH, kUnavailable),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_INTERNAL_ERROR, kInternal),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED, kUnavailable),
    BC_NVJPEG_STATUS(NVJPEG_STATUS_INCOMPLETE_BITSTREAM, kDataLoss),
};
#undef BC_NVJPEG_STATUS

}  // namespace

namespace internal {

Status NvJpegStatus(int error, const char* expression, const char* file, int line) {
  if (error == NVJPEG_STATUS_SUCCESS) return Status::Ok();
  const char* name = "unknown nvJPEG status";
  StatusCode code = StatusCode::kInternal;
  for (const NvJpegStatusInfo& s : kNvJpegStatuses) {
    if (s.status == error) {
      name = s.name;
      code = s.code;
    }
  }
  return Status(code, CheckMessage(expression, name, file, line));
}

}  // namespace internal

// Note [nvJPEG batch states]: nvjpegDecodeBatchedInitialize fixes a state's
// batch size, and re-initializing it costs about as much as decoding the
// batch; the hardware batch of a slot is the slot minus the files the engine
// refuses or that were dropped, so its size may change from batch to batch.
// Each state slot therefore keeps a few states, one per batch size recently
// used (least recently used one re-initialized when all are taken). States
// are created when first needed: each holds engine resources, and creating
// many at once (several decoders in one process, several processes) failed
// on an H100 with NVJPEG_STATUS_ALLOCATOR_FAILURE. Since progressive files
// are transcoded (Note [Transcoded progressive files]) the size is almost
// always the slot's, so few are needed.
struct BatchState {
  nvjpegJpegState_t state = nullptr;
  int batch = 0;      // batch size it was initialized for (0: none)
  uint64_t used = 0;  // last use (Impl::clock)
};

struct NvJpegDecoder::Impl {
  static constexpr size_t kStatesPerSlot = 4;
  nvjpegHandle_t handle = nullptr;
  std::vector<std::vector<BatchState>> states;  // per state slot
  uint64_t clock = 0;
  std::mutex probe_mu;
  nvjpegJpegStream_t probe = nullptr;
  std::vector<const unsigned char*> data;
  std::vector<size_t> lengths;
  std::vector<nvjpegImage_t> images;
  // Per-image decode parameters of region batches (Note [Region decode]),
  // created when first needed and kept.
  std::vector<nvjpegDecodeParams_t> params;

  ~Impl() {
    for (nvjpegDecodeParams_t p : params) nvjpegDecodeParamsDestroy(p);
    if (probe != nullptr) nvjpegJpegStreamDestroy(probe);
    for (const std::vector<BatchState>& slot : states) {
      for (const BatchState& b : slot) {
        if (b.state != nullptr) nvjpegJpegStateDestroy(b.state);
      }
    }
    if (handle != nullptr) nvjpegDestroy(handle);
  }
};

namespace {

// NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE where the header has it.
#ifdef NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE
constexpr unsigned kHwDecodeNoPipeline = NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE;
#else
constexpr unsigned kHwDecodeNoPipeline = 1;
#endif

// NVJPEG_BACKEND_HARDWARE_DEVICE (JPEG bytes in device memory), named by its
// value so that headers without it build.
constexpr auto kBackendHardwareDevice = static_cast<nvjpegBackend_t>(5);

// nvJPEG's output format for `format`. NV12 is named by its value (8,
// NVJPEG_OUTPUT_NV12 in the headers that have it), so that older headers
// build; an nvJPEG without it refuses the format when a batch is set up.
nvjpegOutputFormat_t OutputFormat(NvJpegDecoder::Format format) {
  switch (format) {
    case NvJpegDecoder::Format::kYuvPlanar:
      return NVJPEG_OUTPUT_YUV;
    case NvJpegDecoder::Format::kNv12:
      return static_cast<nvjpegOutputFormat_t>(8);
    case NvJpegDecoder::Format::kRgbInterleaved:
      break;
  }
  return NVJPEG_OUTPUT_RGBI;
}

}  // namespace

Result<std::unique_ptr<NvJpegDecoder>> NvJpegDecoder::Create(int device, const Options& options) {
  const int states = options.states;
  if (states < 1) return InvalidArgumentError("NvJpegDecoder needs at least one state");
  BATCHCAST_RETURN_IF_ERROR(CheckDevice(device));
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  std::unique_ptr<NvJpegDecoder> d(new NvJpegDecoder());
  d->impl_ = std::make_unique<Impl>();
  d->device_ = device;
  d->format_ = options.format;
  Impl& impl = *d->impl_;
  nvjpegStatus_t st = NVJPEG_STATUS_ARCH_MISMATCH;
  if (options.allow_hardware || options.device_bitstreams) {
    st = nvjpegCreateEx(
        options.device_bitstreams ? kBackendHardwareDevice : NVJPEG_BACKEND_HARDWARE, nullptr,
        nullptr, options.hardware_pipeline ? NVJPEG_FLAGS_DEFAULT : kHwDecodeNoPipeline,
        &impl.handle);
  }
  if (st == NVJPEG_STATUS_SUCCESS) {
    d->backend_ = Backend::kHardware;
  } else if (options.device_bitstreams) {
    return UnavailableError("nvJPEG hardware backend for device bitstreams on cuda:" +
                            std::to_string(device) + ": " + BATCHCAST_NVJPEG_CHECK(st).message());
  } else {
    if (options.allow_hardware) {
      BC_LOG_INFO(
          "nvJPEG hardware backend unavailable on cuda:{} ({}); using the GPU hybrid backend",
          device, BATCHCAST_NVJPEG_CHECK(st).message());
    }
    impl.handle = nullptr;
    BATCHCAST_RETURN_IF_ERROR(BATCHCAST_NVJPEG_CHECK(nvjpegCreateEx(
        NVJPEG_BACKEND_GPU_HYBRID, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &impl.handle)));
    d->backend_ = Backend::kGpuHybrid;
  }
  impl.states.resize(static_cast<size_t>(states));
  for (std::vector<BatchState>& slot : impl.states) slot.resize(Impl::kStatesPerSlot);
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_NVJPEG_CHECK(nvjpegJpegStreamCreate(impl.handle, &impl.probe)));
  return d;
}

NvJpegDecoder::~NvJpegDecoder() {
  if (impl_) {
    DeviceGuard g(device_);
    impl_.reset();
  }
}

std::string NvJpegDecoder::backend_name() const {
  return backend_ == Backend::kHardware ? "nvJPEG hardware" : "nvJPEG GPU hybrid";
}

bool NvJpegDecoder::Supports(std::span<const uint8_t> jpeg) {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.probe_mu);
  if (nvjpegJpegStreamParseHeader(impl.handle, jpeg.data(), jpeg.size(), impl.probe) !=
      NVJPEG_STATUS_SUCCESS) {
    return false;
  }
  int not_supported = 1;  // nvJPEG reports 0 for "supported"
  if (nvjpegDecodeBatchedSupported(impl.handle, impl.probe, &not_supported) !=
      NVJPEG_STATUS_SUCCESS) {
    return false;
  }
  return not_supported == 0;
}

Status NvJpegDecoder::DecodeBatch(int state, std::span<const std::span<const uint8_t>> jpegs,
                                  std::span<const Output> outputs, CudaStreamRef stream) {
  Impl& impl = *impl_;
  if (state < 0 || static_cast<size_t>(state) >= impl.states.size()) {
    return InvalidArgumentError("bad nvJPEG state " + std::to_string(state));
  }
  if (jpegs.size() != outputs.size())
    return InvalidArgumentError("jpegs and outputs differ in count");
  if (jpegs.empty()) return Status::Ok();
  const bool regions =
      std::any_of(outputs.begin(), outputs.end(), [](const Output& o) { return o.region_w > 0; });
  if (regions && !takes_regions()) {
    return InvalidArgumentError("nvJPEG regions need the hardware backend and RGB output");
  }
  DeviceGuard g(device_);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  const int n = static_cast<int>(jpegs.size());
  // Note [nvJPEG batch states]: the state of this slot for batch size n.
  std::vector<BatchState>& slot = impl.states[static_cast<size_t>(state)];
  BatchState* b = nullptr;
  for (BatchState& c : slot) {
    if (c.batch == n) b = &c;
  }
  if (b == nullptr) {
    b = &*std::min_element(slot.begin(), slot.end(), [](const BatchState& x, const BatchState& y) {
      return x.used < y.used;
    });
    b->batch = 0;
    if (b->state == nullptr) {
      BATCHCAST_RETURN_IF_ERROR(
          BATCHCAST_NVJPEG_CHECK(nvjpegJpegStateCreate(impl.handle, &b->state)));
    }
    BATCHCAST_RETURN_IF_ERROR(BATCHCAST_NVJPEG_CHECK(
        nvjpegDecodeBatchedInitialize(impl.handle, b->state, n, 1, OutputFormat(format_))));
    b->batch = n;
  }
  b->used = ++impl.clock;
  nvjpegJpegState_t s = b->state;
  impl.data.resize(jpegs.size());
  impl.lengths.resize(jpegs.size());
  impl.images.assign(jpegs.size(), nvjpegImage_t{});
  // NV12 fills two planes, but CUDA 13.0's nvJPEG (hardware backend) copies
  // three per image and fails (EXECUTION_FAILED) when channel[2] is null:
  // NV12 outputs get room for three planes of pitch * height too.
  const int planes = format_ == Format::kRgbInterleaved ? 1 : 3;
  for (size_t i = 0; i < jpegs.size(); ++i) {
    impl.data[i] = jpegs[i].data();
    impl.lengths[i] = jpegs[i].size();
    for (int c = 0; c < planes; ++c) {
      impl.images[i].channel[c] = outputs[i].data + c * outputs[i].pitch * outputs[i].height;
      impl.images[i].pitch[c] = outputs[i].pitch;
    }
  }
  const auto cuda_stream = static_cast<cudaStream_t>(stream.handle());
  Status st;
  if (regions) {
    while (impl.params.size() < jpegs.size()) {
      nvjpegDecodeParams_t p = nullptr;
      BATCHCAST_RETURN_IF_ERROR(BATCHCAST_NVJPEG_CHECK(nvjpegDecodeParamsCreate(impl.handle, &p)));
      impl.params.push_back(p);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Output& o = outputs[i];
      BATCHCAST_RETURN_IF_ERROR(BATCHCAST_NVJPEG_CHECK(
          o.region_w > 0 ? nvjpegDecodeParamsSetROI(impl.params[i], o.region_x, o.region_y,
                                                    o.region_w, o.region_h)
                         : nvjpegDecodeParamsSetROI(impl.params[i], 0, 0, -1, -1)));
    }
    st = BATCHCAST_NVJPEG_CHECK(nvjpegDecodeBatchedEx(impl.handle, s, impl.data.data(),
                                                      impl.lengths.data(), impl.images.data(),
                                                      impl.params.data(), cuda_stream));
  } else {
    st = BATCHCAST_NVJPEG_CHECK(nvjpegDecodeBatched(
        impl.handle, s, impl.data.data(), impl.lengths.data(), impl.images.data(), cuda_stream));
  }
  if (!st.ok()) {
    b->batch = 0;  // re-initialize on the next use
    if (st.code() == StatusCode::kInternal || st.code() == StatusCode::kInvalidArgument) {
      return DataLossError(st.message());
    }
  }
  return st;
}

}  // namespace batchcast::cuda
