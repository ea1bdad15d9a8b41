// The number of hardware work queues ("connections") of this process's CUDA
// contexts (Note [Hardware queues]).
//
// Note [Hardware queues]
// ~~~~~~~~~~~~~~~~~~~~~~
// A CUDA process submits work to the GPU through a fixed number of hardware
// queues, CUDA_DEVICE_MAX_CONNECTIONS (1-32, default 8), read when the
// process starts CUDA. Streams are spread over the queues; with more streams
// than queues several share one, and work of one stream can wait behind work
// of another queued before it. A GPU server in the trainer's process
// (batchcast.Server) shares the trainer's queues with its own many streams
// (the producer's, the nvJPEG side streams, the read-ahead's copies).
//
// Measured on an H100 with a fed ResNet-18, MPS off: with the server in the
// trainer's process and 8 queues, the trainer waited for data while the
// server's nvJPEG loop was busy nearly all the time; with 32 it never waited
// and the server ran ahead. A server in its own process fed the trainer, and
// one Loader, worse with 32 than with 8. Under MPS the number made no
// difference (docs/design.md, "GPU path"). No stream was found blocked behind
// another stream's waiting kernel with 8 queues or with 32, so how the queues
// couple the two is not pinned down beyond these measurements.
//
// So 32 only where the server shares its process: batchcast.Server on a GPU
// sets CUDA_DEVICE_MAX_CONNECTIONS=32 for the CUDA start it makes, when the
// variable is unset and CUDA has not started in the process, and restores it
// afterwards, so that processes started later keep CUDA's default
// (python/batchcast/_queues.py); it warns when CUDA started before it with
// fewer (the number read by HardwareQueuesFor, through
// batchcast._core.hardware_queues). batchcast-server leaves the variable as
// it finds it and logs the number (HardwareQueues). A value the user set is
// kept: 1 (Megatron-LM's setting, which orders all kernels) puts an
// in-process server's work in the trainer's one queue; run the server as its
// own process there. Only the number of queues changes, not the order of
// work within a stream nor any synchronization.
#pragma once

#include <optional>
#include <string_view>

namespace batchcast::cuda {

// CUDA's range and default for CUDA_DEVICE_MAX_CONNECTIONS; an in-process
// server asks for the most.
inline constexpr int kMaxHardwareQueues = 32;
inline constexpr int kDefaultHardwareQueues = 8;

// The queues a context gets when CUDA_DEVICE_MAX_CONNECTIONS is `value`
// (nullopt: unset): the value when it is a number in [1, 32] with nothing
// around it, else CUDA's default 8. The one reading of the variable (C++
// and Python).
int HardwareQueuesFor(std::optional<std::string_view> value);

// The queues a context created now would get (HardwareQueuesFor the
// variable's value now).
int HardwareQueues();

}  // namespace batchcast::cuda
