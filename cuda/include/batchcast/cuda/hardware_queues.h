// The number of hardware work queues ("connections") of this process's CUDA
// contexts (Note [Hardware queues]).
//
// Note [Hardware queues]
// ~~~~~~~~~~~~~~~~~~~~~~
// A CUDA context submits work to the GPU through a fixed number of hardware
// queues, CUDA_DEVICE_MAX_CONNECTIONS (1-32, default 8), read when the
// process starts CUDA. Streams are spread over the queues; with more streams
// than queues several share one, and work of one stream waits behind work
// queued before it on another, although the streams are independent. A GPU
// server in the trainer's process (batchcast.Server) shares the trainer's
// context: with 8 queues one of the server's many streams (the producer's,
// the nvJPEG side streams, the read-ahead's copies) shares the trainer's
// queue, and nvJPEG's per-image conversion kernel waits behind the training
// kernels queued ahead of it, once per image. With 32 queues it does not.
//
// Measured on the H100 (benchmarks/RESULTS.md, "Hardware queues"), fed
// ResNet-18 / synthetic, MPS off:
//   server in the trainer's process: 8 queues 0.90-0.91 (the trainer's Next()
//     waited 22-61 % of the time), 32 queues 0.92-0.93 (it never waited);
//   server in its own process: 8 queues 0.70, 32 queues 0.62, and server ->
//     one Loader 0.93 against 0.68 of decode-only: time-sliced contexts with
//     more queues cost more.
// So 32 only where the server shares its context: batchcast.Server on a GPU
// sets CUDA_DEVICE_MAX_CONNECTIONS=32 for the CUDA start it makes, when the
// variable is unset and CUDA has not started in the process
// (python/batchcast/_queues.py), and warns when CUDA started before it with
// fewer; batchcast-server leaves the variable as it finds it and logs the
// number (HardwareQueues). A value the user set is kept: 1 (Megatron-LM's
// setting, which orders all kernels) puts an in-process server's work in the
// trainer's one queue; run the server as its own process there. Only the
// number of queues changes, not the order of work within a stream nor any
// synchronization.
#pragma once

namespace batchcast::cuda {

// CUDA's range and default for CUDA_DEVICE_MAX_CONNECTIONS; an in-process
// server asks for the most.
inline constexpr int kMaxHardwareQueues = 32;
inline constexpr int kDefaultHardwareQueues = 8;

// The queues a context created now would get: CUDA_DEVICE_MAX_CONNECTIONS
// when it is a number in [1, 32], else CUDA's default 8.
int HardwareQueues();

}  // namespace batchcast::cuda
