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
// Measured on the H100, MPS off, fed ResNet-18 / synthetic, medians of three
// pairs (benchmarks/RESULTS.md, "Hardware queues"):
//   server in the trainer's process, 8 queues: 0.91 and 0.90, the trainer's
//     Next() waited 22 % and 61 % of the time, the server's nvJPEG loop
//     (hw_decode) busy 93-99 % of its time;
//   the same, 32 queues: 0.93, 0.92 and 0.88, Next() never waited, hw_decode
//     50-53 % (the server ahead, waiting for free slots the rest);
//   server in its own process: 8 queues 0.70 and 0.68, 32 queues 0.62;
//     server -> one Loader 0.81-0.93 of decode-only with 8, 0.68 with 32;
//   under MPS (server process): 0.94-0.95 with either.
// A probe for a stream blocked behind another stream's waiting kernel (not
// kept) found none with 8 queues or with 32, so how the queues couple the
// two is not pinned down beyond these measurements.
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
