// BATCHCAST_CUDA_CHECK: turns a CUDA runtime call's cudaError_t into a Status
// that names the call and where it was made.
//
//   BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaMalloc(&p, n)));
//
// The macro only adds the expression text, file and line; the work is done by
// CudaStatus(), which also clears CUDA's last-error state. Usable only in files
// under core/.../cuda (the only ones that include CUDA headers).
// BATCHCAST_NVJPEG_CHECK does the same for nvjpegStatus_t.
//
// NotBuiltError is the error of every call of a stub (a build without CUDA,
// or without nvJPEG).
#pragma once

#include <string>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast::cuda::internal {

// "<expression>: <what> (<file>:<line>)": the message of a failed check.
inline std::string CheckMessage(const char* expression, std::string_view what, const char* file,
                                int line) {
  return std::string(expression) + ": " + std::string(what) + " (" + file + ":" +
         std::to_string(line) + ")";
}

// Unavailable: "this build of batchcast has no <what>".
inline Status NotBuiltError(std::string_view what) {
  return UnavailableError("this build of batchcast has no " + std::string(what));
}

// `error` is a cudaError_t value; OK for cudaSuccess. The code is
// ResourceExhausted for out-of-memory, Unavailable when no usable device or
// driver exists, InvalidArgument for invalid values and handles, Internal
// otherwise; the message reads
//   "<expression>: <cudaErrorName>: <description> (<file>:<line>)".
Status CudaStatus(int error, const char* expression, const char* file, int line);
// The same for an nvjpegStatus_t value.
Status NvJpegStatus(int error, const char* expression, const char* file, int line);

}  // namespace batchcast::cuda::internal

#define BATCHCAST_CUDA_CHECK(expr) \
  ::batchcast::cuda::internal::CudaStatus(static_cast<int>(expr), #expr, __FILE__, __LINE__)
#define BATCHCAST_NVJPEG_CHECK(expr) \
  ::batchcast::cuda::internal::NvJpegStatus(static_cast<int>(expr), #expr, __FILE__, __LINE__)
