// The fused augmentation kernel (batchcast/cuda_image/augment.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "batchcast/cuda/check.h"
#include "batchcast/cuda_image/augment.h"

namespace batchcast::cuda {
namespace {

constexpr int kCoefBits = 11;  // OpenCV's INTER_RESIZE_COEF_BITS
constexpr int kCoefScale = 1 << kCoefBits;

struct KernelParams {
  int size;
  float mean[3];
  float std[3];
};

// Pixel (px, py) of the scaled image (src averaged over box x box blocks, the
// stand-in for libjpeg's 1/box DCT scaling), channels in v[0..2].
__device__ __forceinline__ void ScaledPixel(const AugmentSample& s, int px, int py, int v[3]) {
  if (s.box == 1) {
    const uint8_t* p = s.src + static_cast<int64_t>(py) * s.pitch + 3 * px;
    v[0] = p[0];
    v[1] = p[1];
    v[2] = p[2];
    return;
  }
  const int x0 = px * s.box, y0 = py * s.box;
  const int x1 = min(x0 + s.box, s.src_w), y1 = min(y0 + s.box, s.src_h);
  int sum[3] = {0, 0, 0};
  for (int y = y0; y < y1; ++y) {
    const uint8_t* row = s.src + static_cast<int64_t>(y) * s.pitch;
    for (int x = x0; x < x1; ++x) {
      sum[0] += row[3 * x];
      sum[1] += row[3 * x + 1];
      sum[2] += row[3 * x + 2];
    }
  }
  const int n = (x1 - x0) * (y1 - y0);
  for (int c = 0; c < 3; ++c) v[c] = (sum[c] + n / 2) / n;
}

// OpenCV INTER_LINEAR for one output coordinate: source index and the two
// fixed-point weights.
__device__ __forceinline__ void LinearTap(int d, int dst_size, int src_size, int& i0, int& i1,
                                          int& w0, int& w1) {
  const double scale = static_cast<double>(src_size) / dst_size;
  float f = static_cast<float>((d + 0.5) * scale - 0.5);
  int i = __float2int_rd(f);
  f -= i;
  if (i < 0) {
    f = 0.f;
    i = 0;
  }
  if (i >= src_size - 1) {
    f = 0.f;
    i = src_size - 1;
  }
  i0 = i;
  i1 = min(i + 1, src_size - 1);
  w0 = __float2int_rn((1.f - f) * kCoefScale);
  w1 = __float2int_rn(f * kCoefScale);
}

// The resized 8-bit pixel at output position (x, y), before flip.
__device__ __forceinline__ void ResizedPixel(const AugmentSample& s, int size, int x, int y,
                                             int out[3]) {
  if (!s.area) {
    int x0, x1, wx0, wx1, y0, y1, wy0, wy1;
    LinearTap(x, size, s.rect_w, x0, x1, wx0, wx1);
    LinearTap(y, size, s.rect_h, y0, y1, wy0, wy1);
    int p00[3], p01[3], p10[3], p11[3];
    ScaledPixel(s, s.rect_x + x0, s.rect_y + y0, p00);
    ScaledPixel(s, s.rect_x + x1, s.rect_y + y0, p01);
    ScaledPixel(s, s.rect_x + x0, s.rect_y + y1, p10);
    ScaledPixel(s, s.rect_x + x1, s.rect_y + y1, p11);
    for (int c = 0; c < 3; ++c) {
      const int r0 = p00[c] * wx0 + p01[c] * wx1;
      const int r1 = p10[c] * wx0 + p11[c] * wx1;
      const int v = (r0 * wy0 + r1 * wy1 + (1 << (2 * kCoefBits - 1))) >> (2 * kCoefBits);
      out[c] = min(max(v, 0), 255);
    }
    return;
  }
  // Area: each source pixel weighted by its overlap with the output pixel's footprint.
  const float sx = static_cast<float>(s.rect_w) / size;
  const float sy = static_cast<float>(s.rect_h) / size;
  const float fx0 = x * sx, fx1 = (x + 1) * sx, fy0 = y * sy, fy1 = (y + 1) * sy;
  const int ix0 = static_cast<int>(floorf(fx0)), ix1 = min(static_cast<int>(ceilf(fx1)), s.rect_w);
  const int iy0 = static_cast<int>(floorf(fy0)), iy1 = min(static_cast<int>(ceilf(fy1)), s.rect_h);
  float acc[3] = {0.f, 0.f, 0.f};
  for (int iy = iy0; iy < iy1; ++iy) {
    const float wy = fminf(fy1, iy + 1.f) - fmaxf(fy0, static_cast<float>(iy));
    for (int ix = ix0; ix < ix1; ++ix) {
      const float w = wy * (fminf(fx1, ix + 1.f) - fmaxf(fx0, static_cast<float>(ix)));
      int p[3];
      ScaledPixel(s, s.rect_x + ix, s.rect_y + iy, p);
      acc[0] += w * p[0];
      acc[1] += w * p[1];
      acc[2] += w * p[2];
    }
  }
  const float norm = 1.f / (sx * sy);
  for (int c = 0; c < 3; ++c) out[c] = min(max(__float2int_rn(acc[c] * norm), 0), 255);
}

template <typename T>
__device__ __forceinline__ T Convert(int v, int c, const KernelParams& p);

template <>
__device__ __forceinline__ uint8_t Convert<uint8_t>(int v, int, const KernelParams&) {
  return static_cast<uint8_t>(v);
}
template <>
__device__ __forceinline__ float Convert<float>(int v, int c, const KernelParams& p) {
  // Exactly the CPU path's float32 arithmetic (IEEE division, no FMA contraction).
  const float t = __fdiv_rn(static_cast<float>(v), 255.0f);
  return __fdiv_rn(__fsub_rn(t, p.mean[c]), p.std[c]);
}
template <>
__device__ __forceinline__ __half Convert<__half>(int v, int c, const KernelParams& p) {
  return __float2half_rn(Convert<float>(v, c, p));
}
template <>
__device__ __forceinline__ __nv_bfloat16 Convert<__nv_bfloat16>(int v, int c,
                                                                const KernelParams& p) {
  return __float2bfloat16_rn(Convert<float>(v, c, p));
}

template <typename T, bool kNchw>
__global__ void AugmentKernel(const AugmentSample* __restrict__ samples, int count,
                              KernelParams params) {
  const int size = params.size;
  const int pixels = size * size;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= pixels) return;
  const int y = i / size;
  const int x = i - y * size;
  for (int n = blockIdx.y; n < count; n += gridDim.y) {
    const AugmentSample s = samples[n];
    int v[3];
    ResizedPixel(s, size, s.flip ? size - 1 - x : x, y, v);
    T* out = static_cast<T*>(s.out);
    if (kNchw) {
      out[i] = Convert<T>(v[0], 0, params);
      out[pixels + i] = Convert<T>(v[1], 1, params);
      out[2 * pixels + i] = Convert<T>(v[2], 2, params);
    } else {
      out[3 * i] = Convert<T>(v[0], 0, params);
      out[3 * i + 1] = Convert<T>(v[1], 1, params);
      out[3 * i + 2] = Convert<T>(v[2], 2, params);
    }
  }
}

template <typename T>
void Launch(bool nchw, dim3 grid, dim3 block, cudaStream_t stream, const AugmentSample* samples,
            int count, const KernelParams& p) {
  if (nchw) {
    AugmentKernel<T, true><<<grid, block, 0, stream>>>(samples, count, p);
  } else {
    AugmentKernel<T, false><<<grid, block, 0, stream>>>(samples, count, p);
  }
}

// The launch of the kernel that writes `dtype`; null for a dtype it does not
// write.
using LaunchFn = void (*)(bool nchw, dim3 grid, dim3 block, cudaStream_t stream,
                          const AugmentSample* samples, int count, const KernelParams& p);
LaunchFn LaunchFor(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return &Launch<float>;
    case DType::kFloat16:
      return &Launch<__half>;
    case DType::kBFloat16:
      return &Launch<__nv_bfloat16>;
    case DType::kUInt8:
      return &Launch<uint8_t>;
    default:
      return nullptr;
  }
}

}  // namespace

Status AugmentAsync(const AugmentSample* device_samples, int count, const AugmentParams& params,
                    CudaStreamRef stream) {
  if (count <= 0) return Status::Ok();
  if (params.size < 1) return InvalidArgumentError("augment: size must be positive");
  KernelParams p;
  p.size = params.size;
  for (int c = 0; c < 3; ++c) {
    p.mean[c] = params.mean[c];
    p.std[c] = params.std[c];
  }
  const int pixels = params.size * params.size;
  const dim3 block(256);
  const dim3 grid((pixels + 255) / 256, count < 65535 ? count : 65535);
  auto s = static_cast<cudaStream_t>(stream.handle());
  const LaunchFn launch = LaunchFor(params.dtype);
  if (launch == nullptr) {
    return InvalidArgumentError("augment: dtype must be float32, float16, bfloat16 or uint8");
  }
  launch(params.nchw, grid, block, s, device_samples, count, p);
  return BATCHCAST_CUDA_CHECK(cudaGetLastError());
}

}  // namespace batchcast::cuda
