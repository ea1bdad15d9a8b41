// The --device option with several GPUs, and which ring serves a consumer.
// Pure functions (no CUDA): the device count is passed in, so every rule is
// unit-tested without a GPU (tests/server/device_list_test.cc).
//
// Note [Rings per GPU]
// `--device cuda:0,1` (or `cuda:all`: every visible GPU) gives the server one
// ring per GPU, each with its own source decoding on that GPU (its own JPEG
// engines, its own producer thread and stream) and its own Scheduler (slot
// table, window, cursors, leases, lag policy). Every ring produces the same
// stream: the same sampler (seed, shard) and the same augmentation
// parameters, which are a pure function of (seed, epoch, index), so sample
// seq s is the same sample with the same pixels on every ring. A consumer
// tells its GPU in HELLO (ConsumerOptions::device) and is served from that
// GPU's ring (RingForConsumer); one without a GPU, or on a GPU without a
// ring, from the first ring. A ring produces only while one of its own
// consumers is attached (Note [Producer start and stream end]): a GPU
// without consumers stays idle. min_consumers, max_consumers and the lag
// policy apply per ring; consumer ids are unique over the server. The server
// is finished when every ring that started is finished and no consumer is
// left anywhere. Stats: the first ring's counters at the top level (as with
// one ring), every consumer in `consumers`, and each ring's own in `rings`.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/server/server_options.h"

namespace batchcast {

// Sets options.source.device, options.gpus and options.all_gpus from the
// --device text: "cpu", "cuda:N", "cuda:N,M,..." (distinct, at most 64) or
// "cuda:all". InvalidArgument otherwise (without the option's name).
Status ParseDeviceOption(std::string_view text, ServerOptions& options);
// The text ParseDeviceOption accepts for `options` ("cuda:0,1", "cuda:all", ...).
std::string DeviceOptionName(const ServerOptions& options);

// The device of each ring, in order: {-1} for a host ring, the GPUs
// otherwise. `visible` is the number of visible GPUs (or why none is: no
// driver, no CUDA build), consulted only for cuda:all. InvalidArgument
// naming --device for cuda:all without a GPU.
Result<std::vector<int>> RingDevices(const ServerOptions& options, const Result<int>& visible);

// The ring (an index into `ring_devices`) that serves a consumer whose HELLO
// names `device` ("cuda:M", "cpu" or ""): the ring on M, else the first.
// InvalidArgument for text that names no device.
Result<size_t> RingForConsumer(std::string_view device, std::span<const int> ring_devices);

}  // namespace batchcast
