// The --device option with several GPUs, and which ring serves a consumer.
// Pure functions (no CUDA): the device count is passed in, so every rule is
// unit-tested without a GPU (tests/server/device_list_test.cc).
//
// Note [Rings per GPU]
// `--device cuda:0,1` (also `cuda:0,cuda:1`, or `cuda:all`: every visible
// GPU) gives the server one ring per GPU, each with its own source decoding
// on that GPU (its own JPEG engines, its own producer thread and stream);
// the sources share one scan of the dataset and one reader of its shards,
// and decode alike (MakeSources, batchcast/sources/make_source.h).
// The rings share one stream and one Scheduler (Note [Placement],
// scheduler.h): each producer batch is decoded once, on the ring it is
// placed on; the sampler's order (seed, shard) is computed once for all
// (EpochOrders), and the augmentation parameters are a pure function of
// (seed, epoch, index), so a sample has the same pixels whichever GPU
// decoded it. A consumer tells its GPU in HELLO (ConsumerOptions::device):
// that GPU's ring is its home ring (RingForConsumer; one without a GPU, or
// on a GPU without a ring, gets the first). It reads what was placed there
// zero-copy and copies what was placed on another ring onto its own GPU.
// min_consumers, max_consumers, groups and the lag policy are the server's.
// Stats: the server's counters at the top level, each ring's in `rings`.
#pragma once

#include <optional>
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

// The home ring (an index into `ring_devices`) of a consumer whose HELLO
// names `device` ("cuda:M", "cpu" or ""): the ring on M, else the first;
// "cpu:N" names host ring N of a server with several host rings
// (ServerOptions::host_rings). InvalidArgument for text that names no
// device, or a host ring the server does not have.
Result<size_t> RingForConsumer(std::string_view device, std::span<const int> ring_devices);
// N for "cpu:N", else nullopt.
std::optional<size_t> HostRingIndex(std::string_view device);

}  // namespace batchcast
