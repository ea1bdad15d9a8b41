// DLPack conversion, written once for the project: the client's
// Batch::ToDLPack and the bindings' WriteSlot.field_dlpack both use it, so a
// field reaches a framework with the same type whichever side made the view.
//
// Private to the project ("core/src/dlpack.h"): it includes <dlpack/dlpack.h>
// (Debian libdlpack-dev), which batchcast_core and batchcast_internal add as a
// private include directory; no installed header mentions it except through
// the forward declaration `struct DLManagedTensor` (batchcast/client/batch.h).
//
// Thread-safety: pure functions.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <span>

#include "batchcast/core/dtype.h"
#include "batchcast/core/field_spec.h"

namespace batchcast {

// True when this build's DLPack header has a boolean type code (kDLBool,
// DLPack >= 0.8). Without it a kBool field travels as 8-bit unsigned
// integers, and readers view it back as bool (batchcast.Loader does).
bool DLPackHasBool();

// The DLPack type of `dtype` (one lane).
DLDataType ToDLDataType(DType dtype);
// kDLCPU for host memory, {kDLCUDA, N} for device N.
DLDevice ToDLDevice(Device device);

// A DLManagedTensor viewing `data`: dense row-major (no strides), `shape`,
// `dtype`, on `device`. It holds `keep_alive` (whatever keeps `data` valid:
// a batch and its lease, a server and its ring) until its deleter runs. The
// caller owns the tensor and must call its deleter exactly once.
DLManagedTensor* MakeDLManagedTensor(void* data, std::span<const int64_t> shape, DType dtype,
                                     Device device, std::shared_ptr<const void> keep_alive);

}  // namespace batchcast
