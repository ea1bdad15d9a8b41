// ServerOptions: everything that configures a batchcast server, one struct.
//
// The option table (batchcast/server/option_table.h) names every field once:
// snake_case for Python keyword arguments, kebab-case on the command line
// (--batch-size). What the source is made of (data, transforms, decode, device,
// seed, workers) is `source`; the rest configures the ring and the consumers.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/sources/source_options.h"

namespace batchcast {

enum class LagPolicy : uint8_t {
  kBlock = 0,  // the slowest consumer paces everyone
  kSkip = 1,   // a consumer that blocks the producer longer than lag_timeout jumps forward
  kEvict = 2,  // ... is disconnected with an error
};
Result<LagPolicy> ParseLagPolicy(std::string_view text);
std::string_view LagPolicyName(LagPolicy policy);

// Which ring writes the stream's next batch on a server of several rings
// (docs/semantics.md, "Several GPUs"); a DDP group's batches go to the ring
// of the rank that reads them either way.
enum class Placement : uint8_t {
  kRoundRobin = 0,  // in turn over the rings with readers: each decodes an equal share
  kDemand = 1,      // shares that follow the rings' measured speeds: a slower ring decodes
                    // less; rings of equal speed are placed as by round robin (the default)
};
Result<Placement> ParsePlacement(std::string_view text);
std::string_view PlacementName(Placement placement);

struct ServerOptions {
  // The samples: a dataset or synthetic data, its transforms, where it is
  // decoded, the ring's device (source.device) and the seed.
  SourceOptions source;

  // Several GPUs (--device cuda:0,1,... or cuda:all): one ring, source and
  // producer per GPU sharing one stream (each sample decoded once, on one
  // GPU), each consumer reading from its own GPU's ring and copying what was
  // placed on another (docs/semantics.md, "Several GPUs"). `gpus` lists them
  // in order (source.device is the first); empty with one device.
  // `all_gpus`: cuda:all, every visible GPU, resolved when the server starts.
  std::vector<int> gpus;
  bool all_gpus = false;
  // With device cpu: this many host rings (1..64) standing in for GPUs (a
  // consumer names its ring with the device "cpu:N"). For tests of the
  // several-ring paths without GPUs; no command-line option.
  uint32_t host_rings = 1;

  std::string name = "batchcast";  // names the endpoint, lock and shared memory
  std::string endpoint;            // "" = ipc://<runtime dir>/<name>.sock
  // tcp:// endpoints (always CURVE: docs/security.md): the key file; "" =
  // $BATCHCAST_KEY_FILE, else the user's key <runtime dir>/curve.key (made
  // at first use). Binding beyond loopback (tcp://*, a non-loopback address)
  // needs allow_remote.
  std::string key_file;
  bool allow_remote = false;

  // The Prometheus metrics endpoint (docs/metrics.md): an HTTP server on
  // threads of its own answering GET /metrics. metrics_port 0 = none,
  // kAnyMetricsPort = a free port the system picks (the log and the stats'
  // metrics_endpoint say which). It listens on metrics_host, 127.0.0.1 when
  // empty; an address beyond loopback (0.0.0.0: every interface) needs
  // allow_remote. The option table writes both as one value, [HOST:]PORT.
  static constexpr uint32_t kAnyMetricsPort = 65536;
  uint32_t metrics_port = 0;
  std::string metrics_host;

  uint32_t batch_size = 64;  // producer batch (one ring slot)
  // Ring slots; 0 (the default): window_for(rings), which a started server
  // writes here (Server::options()).
  uint32_t window = 0;
  // Ring slots after the window's for consumers that resume outside the
  // stream (their catch-up lane: docs/semantics.md, "Resume"); 0 = none.
  uint32_t resume_slots = 4;
  // Several rings: which ring writes the stream's next batch.
  Placement placement = Placement::kDemand;
  // Whether another process of the node may take over a ring's decode
  // (Note [Attached producers], server/src/attach_point.h).
  bool attach = true;

  // Order (the seed is source.seed).
  bool shuffle = true;
  uint64_t epochs = 0;  // 0 = no limit
  // This server's shard of the dataset (docs/semantics.md, "Sharding"; one server per
  // node serves the node's shard). Unset fields are 0 and 1, or with
  // shard_from_env this node's rank and the number of nodes from the
  // launcher's variables (GROUP_RANK/GROUP_WORLD_SIZE or NNODES under
  // torchrun, PET_NODE_RANK/PET_NNODES, SLURM_NODEID/SLURM_NNODES); set
  // fields win. See Shard().
  std::optional<uint32_t> shard_rank;
  std::optional<uint32_t> num_shards;
  bool shard_from_env = false;

  // Consumers.
  LagPolicy lag_policy = LagPolicy::kBlock;
  std::chrono::milliseconds lag_timeout{1000};
  uint32_t min_consumers = 1;
  std::chrono::milliseconds heartbeat_timeout{2000};
  // 0 = heartbeat_timeout / 8 (at least 10 ms); see heartbeat_period().
  std::chrono::milliseconds heartbeat_interval{0};
  uint32_t max_leases = 16;  // unreleased batches one consumer may hold
  uint32_t max_consumers = 256;
  // How long a consumer group may take to form (all its ranks connected)
  // before its joined ranks get an error (docs/semantics.md, "Groups").
  std::chrono::milliseconds group_timeout{60000};

  // The shard in effect (shard_rank of num_shards) and what said so:
  // "options", "default", or the variables read ("SLURM_NODEID/SLURM_NNODES").
  struct ShardChoice {
    uint32_t rank = 0;
    uint32_t count = 1;
    std::string source;
  };
  // InvalidArgument when rank >= count, or shard_from_env finds unusable
  // variables, or none while a field is still unset.
  Result<ShardChoice> Shard() const;

  // metrics_host and metrics_port as the option table writes them:
  // "[HOST:]PORT", PORT a number or "any"; "0" when off.
  std::string metrics_address() const;
  // The window in effect on a server of `rings` rings: `window`, or by
  // default 8, and 4 per ring on a server of several rings (they share the
  // window's slots, and by demand a slower ring's longer batches need slots
  // ahead: Note [Placement]).
  uint32_t window_for(size_t rings) const;
  // The heartbeat interval in effect (heartbeat_interval, or its default).
  std::chrono::milliseconds heartbeat_period() const;
  // Checks the server's own fields; InvalidArgument naming the option
  // otherwise. The source's are checked where a source is made from them
  // (SourceOptions::Validate, called by MakeSource).
  Status Validate() const;
};

}  // namespace batchcast
