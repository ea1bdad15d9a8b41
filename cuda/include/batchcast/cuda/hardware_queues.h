// The number of hardware work queues ("connections") of this process's CUDA
// contexts, and the server's preference for many of them.
//
// Note [Hardware queues]
// ~~~~~~~~~~~~~~~~~~~~~~
// A CUDA context submits work to the GPU through a fixed number of hardware
// queues, CUDA_DEVICE_MAX_CONNECTIONS (1-32, default 8), read once when the
// process creates its context. Streams are spread over the queues; with more
// streams than queues, several streams share one, and work of one waits
// behind work of another queued before it although the streams are
// independent. The server creates more than 8 streams (the producer's, the
// nvJPEG side streams, the read-ahead's copies), so in a process of its own
// with 8 queues its streams share queues with each other; and a server in the
// trainer's process (batchcast.Server) shares them with the trainer's
// stream: nvJPEG's per-image conversion kernel then waits behind the training
// kernels queued ahead of it (milliseconds), once per image. Measured on the
// H100 with the server in the trainer's process (benchmarks/RESULTS.md,
// "Hardware queues"): 8 queues, the trainer's Next() waited 22 % of the time
// and a fed ResNet-18 ran at 0.91 of synthetic; 32 queues, it never waited,
// 0.93.
//
// So batchcast asks for 32 where it can: batchcast-server's main() and
// `import batchcast` set CUDA_DEVICE_MAX_CONNECTIONS=32 unless it is set
// (PreferManyHardwareQueues); it takes effect only when no CUDA context
// exists yet in the process. batchcast.Server warns when its process's
// context has, or may have, fewer (python/batchcast/_queues.py). A value the
// user set is kept: 1 (Megatron-LM's setting, which orders all kernels) puts
// an in-process server's work in the trainer's one queue; run the server as
// its own process there. Only the number of queues changes, not the order of
// work within a stream nor any synchronization.
#pragma once

namespace batchcast::cuda {

// CUDA's range and default for CUDA_DEVICE_MAX_CONNECTIONS, and what the
// server asks for.
inline constexpr int kMaxHardwareQueues = 32;
inline constexpr int kDefaultHardwareQueues = 8;

// Sets CUDA_DEVICE_MAX_CONNECTIONS to kMaxHardwareQueues unless it is set
// (Note [Hardware queues]). Takes effect only for a CUDA context created
// afterwards in this process. Not thread-safe (setenv): call it first in main().
void PreferManyHardwareQueues();

// The queues a context created now would get: CUDA_DEVICE_MAX_CONNECTIONS
// when it is a number in [1, 32], else CUDA's default 8.
int HardwareQueues();

}  // namespace batchcast::cuda
