// NvJpegDecoder: batched JPEG decoding on the GPU with nvJPEG (no CUDA or
// nvJPEG headers here).
//
// Backend: the hardware JPEG engines (NVJPEG_BACKEND_HARDWARE: A100, H100, ...)
// when the GPU has them, else the GPU-assisted hybrid backend
// (NVJPEG_BACKEND_GPU_HYBRID). The hardware takes baseline (sequential
// Huffman) JPEGs with 1 or 3 components; Supports() asks nvJPEG about one file
// (nvjpegJpegStreamParseHeader + nvjpegDecodeBatchedSupported) so that the
// caller can send the others (progressive, CMYK, ...) to the CPU decoder.
//
// nvJPEG is optional at build time: without it (BuiltWithNvJpeg() false)
// Create() fails with Unavailable.
//
// Thread-safety: one thread at a time per decoder, except Supports().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/status.h"

namespace batchcast::cuda {

class NvJpegDecoder {
 public:
  enum class Backend { kHardware, kGpuHybrid };
  // What DecodeBatch writes. kRgbInterleaved is what the fused kernel reads;
  // kYuvPlanar (the Y, Cb and Cr planes as decoded, no colour conversion) and
  // kNv12 (Y, then Cb and Cr interleaved at half height; 4:2:0 colour files
  // only, JpegInfo::yuv420: nvJPEG fails a batch with any other file) are
  // for measuring the decoder alone. Neither takes nvJPEG's per-image work
  // away: it copies the planes out (three device copies per image) instead of
  // a conversion kernel, so the server decodes to kRgbInterleaved.
  enum class Format { kRgbInterleaved, kYuvPlanar, kNv12 };

  // How a decoder is made (one options struct: most callers take the defaults).
  struct Options {
    // Independent decode states (so that batch n+1 can be submitted while
    // batch n is still decoding). At least 1 (Create: InvalidArgument).
    int states = 2;
    // false: the hybrid backend even where the hardware engine exists.
    bool allow_hardware = true;
    Format format = Format::kRgbInterleaved;
    // false creates the hardware backend with NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE:
    // slower than nvJPEG's default on an H100, and it still waits once per
    // image (docs/design.md, "GPU path", MPS).
    bool hardware_pipeline = true;
    // true: the hardware backend that takes the JPEG bytes in device memory
    // (NVJPEG_BACKEND_HARDWARE_DEVICE); DecodeBatch's jpegs must then point
    // into device memory of the decoder's device. Supports() still takes
    // host bytes. For measuring the decoder alone (slower than from
    // page-locked host memory on an H100, so the server passes host bytes);
    // without the hardware engine Create fails with Unavailable.
    bool device_bitstreams = false;
  };
  // A decoder on `device`. InvalidArgument for states < 1; Unavailable
  // without nvJPEG or the device.
  static Result<std::unique_ptr<NvJpegDecoder>> Create(int device, const Options& options);
  static Result<std::unique_ptr<NvJpegDecoder>> Create(int device) { return Create(device, {}); }
  ~NvJpegDecoder();
  NvJpegDecoder(const NvJpegDecoder&) = delete;
  NvJpegDecoder& operator=(const NvJpegDecoder&) = delete;

  Backend backend() const { return backend_; }
  std::string backend_name() const;
  int device() const { return device_; }

  // True when DecodeBatch can take this JPEG (its header suffices).
  // Thread-safe (serialized internally).
  bool Supports(std::span<const uint8_t> jpeg);

  // Where one image goes, in device memory of the decoder's device:
  // kRgbInterleaved: interleaved RGB, `pitch` bytes per row (at least
  // pitch * height bytes). kYuvPlanar: three planes of `pitch` bytes per row
  // and `height` rows each, Y at data, Cb and Cr after it (subsampled chroma
  // fills the top left of its plane; a gray image writes Y only). kNv12: Y,
  // then CbCr interleaved in the top half of the second plane; the output
  // needs room for three planes all the same (nvjpeg.cc says why), and an
  // even pitch (a CbCr row holds 2 * ceil(width / 2) bytes).
  //
  // A region (region_w > 0; kRgbInterleaved with the hardware backend only,
  // takes_regions()): only the region_w x region_h pixels at (region_x,
  // region_y) of the image are written, the region's top left at data
  // (nvjpegDecodeBatchedEx with a region per image; Note [Region decode]).
  struct Output {
    uint8_t* data = nullptr;
    size_t pitch = 0;
    size_t height = 0;  // kYuvPlanar and kNv12 only
    int32_t region_x = 0;
    int32_t region_y = 0;
    int32_t region_w = 0;  // 0: the whole image
    int32_t region_h = 0;
  };
  // Whether DecodeBatch takes outputs with a region.
  bool takes_regions() const {
    return backend_ == Backend::kHardware && format_ == Format::kRgbInterleaved;
  }
  // Decodes jpegs[i] into outputs[i] with decode state `state`, queued on
  // `stream` (a cudaStream_t of the decoder's device). The JPEG bytes must
  // stay untouched until the stream's work queued by the call has completed
  // (nvJPEG copies bytes in page-locked memory asynchronously). Before a
  // state is reused, the caller must make sure that the work of its previous
  // batch has completed (e.g. an event recorded after the kernels that read
  // its outputs). DataLoss when nvJPEG rejects the batch (a corrupt file):
  // the caller then decodes it file by file. InvalidArgument for a region
  // when !takes_regions() or outside the image is the caller's to avoid.
  Status DecodeBatch(int state, std::span<const std::span<const uint8_t>> jpegs,
                     std::span<const Output> outputs, CudaStreamRef stream);

  struct Impl;

 private:
  NvJpegDecoder() = default;
  std::unique_ptr<Impl> impl_;
  Backend backend_ = Backend::kGpuHybrid;
  Format format_ = Format::kRgbInterleaved;
  int device_ = -1;
};

}  // namespace batchcast::cuda
