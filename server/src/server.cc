// Server: the public API (server.h) over Server::Impl (server_impl.h), which
// wires the scheduler, the control loop, the slot publisher and the producer
// loop together (Note [Server threads]): the server's lifecycle. Its stats
// are built in server_stats.cc.
#include "batchcast/server/server.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>

#include "batchcast/cuda/hardware_queues.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/server/option_table.h"
#include "batchcast/sources/make_source.h"
#include "batchcast/sources/source_options.h"
#include "core/src/catch_all.h"
#include "core/src/logging.h"
#include "core/src/reclaim.h"
#include "core/src/sampler.h"
#include "core/src/stream_identity.h"
#include "core/src/thread_name.h"
#include "device_list.h"
#include "metrics_render.h"
#include "open_file_limit.h"
#include "server_impl.h"
#include "server_stats.h"

namespace batchcast {
namespace {

// Now + timeout, saturated at Clock::time_point::max() (= no deadline).
Clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  const Clock::time_point now = Clock::now();
  if (timeout >=
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)) {
    return Clock::time_point::max();
  }
  return now + timeout;
}

// The device of each ring (Note [Rings per GPU]); CUDA is asked for the
// device count only for cuda:all.
Result<std::vector<int>> ResolveRingDevices(const ServerOptions& options) {
  return RingDevices(options, options.all_gpus ? cuda::DeviceCount() : Result<int>(0));
}

}  // namespace

// ---- Server::Impl ----

Status Server::Impl::Init(std::vector<FieldSpec> specs, uint64_t epoch_len,
                          uint64_t group_epoch_len, const std::vector<int>& devices,
                          const std::string& stream, bool replay, bool begin_ahead) {
  options.window = options.window_for(devices.size());  // what Server::options() says
  BATCHCAST_ASSIGN_OR_RETURN(InstanceLock l, InstanceLock::Acquire(options.name));
  lock.emplace(std::move(l));
  // What dead servers of this user left (Note [Server instance lock]).
  const std::vector<Reclaimed> reclaimed = ReclaimDeadServers();
  uint64_t reclaimed_bytes = 0;
  for (size_t i = 0; i < reclaimed.size(); ++i) {
    const Reclaimed& r = reclaimed[i];
    reclaimed_bytes += r.ring_bytes;
    if (i >= 5) continue;
    if (r.orphan) {
      BC_LOG_INFO(
          "reclaimed the ring ({} bytes) of a dead server '{}' whose runtime directory "
          "is gone",
          r.ring_bytes, r.name);
      continue;
    }
    BC_LOG_INFO("reclaimed what server '{}' (pid {}) left when it died:{}{}", r.name, r.pid,
                r.ring_bytes > 0 ? " its ring (" + std::to_string(r.ring_bytes) + " bytes)" : "",
                r.socket ? " its socket" : "");
  }
  if (reclaimed.size() > 5) {
    BC_LOG_INFO("reclaimed what {} dead servers left in all ({} MiB of rings)", reclaimed.size(),
                reclaimed_bytes >> 20);
  }
  if (options.endpoint.empty()) {
    BATCHCAST_ASSIGN_OR_RETURN(endpoint, DefaultEndpoint(options.name));
  } else {
    BATCHCAST_ASSIGN_OR_RETURN(endpoint, ResolveEndpoint(options.endpoint, EndpointUse::kBind));
  }
  // Note [Transport security]: tcp:// is CURVE with the server's key.
  std::optional<KeyFile> curve_key;
  if (endpoint.starts_with("tcp://")) {
    BATCHCAST_ASSIGN_OR_RETURN(curve_key, LoadServerKey(options.key_file));
  }
  // --device cuda:N puts every field (labels too) in one device allocation
  // per ring.
  const bool on_cuda = devices.front() >= 0;
  for (int device : devices) {
    if (device < 0) continue;
    const std::string name = DeviceName(Device::Cuda(device));
    if (!cuda::BuiltWithCuda()) {
      return InvalidArgumentError(
          "--device " + name + ": this build of batchcast has no CUDA support (use --device cpu)");
    }
    BATCHCAST_RETURN_IF_ERROR(cuda::CheckDevice(device).WithContext("--device " + name));
  }
  if (options.placement != ServerOptions{}.placement && devices.size() == 1) {
    BC_LOG_WARN(
        "placement (--placement): only a server of several rings (--device cuda:0,1,...) places "
        "batches; ignored on one ring");
  }
  if (const std::string ignored = CudaOnlyOptionsSet(options); !on_cuda && !ignored.empty()) {
    BC_LOG_WARN("{}: only a CUDA ring (--device cuda:N) uses {}; ignored on this host ring",
                ignored, ignored.find(',') == std::string::npos ? "it" : "them");
  }
  const MemoryKind kind = on_cuda ? MemoryKind::kCuda : MemoryKind::kHost;
  for (FieldSpec& f : specs) f.memory = kind;
  fields = specs;
  // Note [Resume]: the lane's slots follow the window's.
  const uint32_t resume_slots = replay ? options.resume_slots : 0;
  BATCHCAST_ASSIGN_OR_RETURN(
      RingLayout l2, RingLayout::Make(specs, options.window, options.batch_size, resume_slots));
  layout.emplace(std::move(l2));

  SchedulerConfig sc;
  sc.window = options.window;
  sc.batch_size = options.batch_size;
  sc.epoch_len = epoch_len;
  if (options.epochs > 0) sc.stream_end = options.epochs * epoch_len;
  sc.lag_policy = options.lag_policy;
  sc.lag_timeout = options.lag_timeout;
  sc.heartbeat_timeout = options.heartbeat_timeout;
  sc.min_consumers = options.min_consumers;
  sc.max_consumers = options.max_consumers;
  sc.max_leases = options.max_leases;
  sc.group_timeout = options.group_timeout;
  sc.group_epoch_len = group_epoch_len;
  sc.rings = static_cast<uint32_t>(devices.size());
  for (const FieldSpec& f : fields) sc.sample_bytes += f.bytes_per_sample();
  sc.stream = stream;
  sc.replay = replay;
  sc.resume_slots = resume_slots;
  sc.placement = options.placement;
  sc.begin_ahead = begin_ahead;
  sched = std::make_unique<Scheduler>(sc);

  ControlLoopOptions co;
  co.endpoint = endpoint;
  co.curve_key = std::move(curve_key);
  co.server_name = options.name;
  co.heartbeat_period = options.heartbeat_period();
  // Note [Admission]: an unconfirmed consumer gets the heartbeat timeout to
  // say something while others wait, as any consumer does to stay (a real
  // client confirms at once, but a loaded machine may hold it back); it
  // pins nothing meanwhile, so any consumer may be one.
  co.peer_limits.probation = options.heartbeat_timeout;
  co.peer_limits.max_unconfirmed = options.max_consumers;
  co.scheduler = sched.get();
  proto::Welcome& w = co.welcome;
  w.server_pid = static_cast<uint32_t>(getpid());
  w.server_name = options.name;
  w.window = options.window;
  w.producer_batch_size = options.batch_size;
  w.fields = fields;
  w.epoch_len = epoch_len;
  w.heartbeat_interval_ms = static_cast<uint32_t>(options.heartbeat_period().count());
  w.heartbeat_timeout_ms = static_cast<uint32_t>(options.heartbeat_timeout.count());
  w.stream = stream;
  w.resume_slots = resume_slots;
  for (int device : devices) {
    Ring& ring = rings.emplace_back();
    ring.device = device;
    BATCHCAST_ASSIGN_OR_RETURN(
        ring.memory,
        RingMemory::Create(*layout, options.name, device, static_cast<uint32_t>(rings.size() - 1)));
    if (device >= 0) {
      BC_LOG_INFO("ring of {} MiB on cuda:{}: {}",
                  layout->allocation_bytes(MemoryKind::kCuda) >> 20, device,
                  cuda::DeviceDescription(device));
      if (!mps) {
        mps = ProbeMps();  // mps_probe.h: a heuristic, said as such
        BC_LOG_INFO("MPS {} ({})", mps->name(), mps->reason);
        // Note [Hardware queues]: as this process's CUDA start read it
        // (unless the variable changed since): 8 suits a server process, 32
        // a server in the trainer's process.
        BC_LOG_INFO("CUDA hardware queues: {} (CUDA_DEVICE_MAX_CONNECTIONS)",
                    cuda::HardwareQueues());
      }
    }
    w.rings.push_back(proto::RingInfo{device, ring.memory->allocations()});
  }
  co.stats_json = [this] { return ServerStatsJson(*this); };
  co.finish = [this](Status s) { Finish(std::move(s)); };
  BATCHCAST_ASSIGN_OR_RETURN(control, ControlLoop::Create(std::move(co)));
  endpoint = control->endpoint();  // tcp:// port 0 or *: the port it got
  return Status::Ok();
}

Status Server::Impl::StartThreads(SlotWriter writer, std::optional<Sampler> sampler) {
  if (options.metrics_port != 0) {
    // Note [Metrics endpoint]: rendered from the stats object, on its own
    // threads; everything it reads is set by now.
    const uint32_t port =
        options.metrics_port == ServerOptions::kAnyMetricsPort ? 0 : options.metrics_port;
    BATCHCAST_ASSIGN_OR_RETURN(
        metrics, MetricsEndpoint::Start(
                     options.metrics_host.empty() ? "127.0.0.1" : options.metrics_host, port));
    metrics->Serve([this] {  // `metrics` is set: ServerStats reads its url
      return CatchAll("the metrics", [this]() -> Result<std::string> {
        return RenderMetrics(ServerStats(*this));
      });
    });
    BC_LOG_INFO("metrics for Prometheus on {}", metrics->url());
  }
  // The rings share the stream: one order of each epoch for all (Note [Rings per GPU]).
  if (sampler) orders = std::make_unique<EpochOrders>(std::move(*sampler), options.epochs);
  for (size_t i = 0; i < rings.size(); ++i) {
    Ring& ring = rings[i];
    BATCHCAST_ASSIGN_OR_RETURN(ring.publisher,
                               MakeSlotPublisher(*ring.memory, *layout, fields, *sched, writer,
                                                 options.source.gpu_priority));
    if (orders) {
      if (options.attach) ring.attach = BindAttachPoint(i);
      ring.producer = std::make_unique<ProducerLoop>(
          orders.get(), static_cast<uint32_t>(i), ring.source.get(), sched.get(),
          ring.publisher.get(), options.batch_size, ring.attach.get());
    }
  }
  MutexLock l(&shutdown_mu);
  control_thread = std::thread([this] {
    SetThreadName("bc-control");
    control->Run();  // catches what escapes it
  });
  for (Ring& ring : rings) {
    if (!ring.producer) continue;
    producer_threads.emplace_back([this, &ring] {
      SetThreadName(rings.size() > 1 ? "bc-producer-" + std::to_string(&ring - rings.data())
                                     : std::string("bc-producer"));
      Status s = CatchAll("the producer thread", [&ring]() -> Status {
        // The ring's device is this thread's for its life: the source's
        // kernels launch on its streams (Note [Server threads]).
        std::optional<cuda::DeviceGuard> device;
        if (ring.device >= 0) {
          device.emplace(ring.device);
          BATCHCAST_RETURN_IF_ERROR(device->status());
        }
        return ring.producer->Run();
      });
      if (s.ok() || s.code() == StatusCode::kCancelled) return;
      if (rings.size() > 1) {
        s = s.WithContext("the producer of " +
                          (ring.device >= 0 ? DeviceName(Device::Cuda(ring.device))
                                            : "host ring " + std::to_string(&ring - rings.data())));
      }
      BC_LOG_ERROR("producer stopped: {}", s.ToString());
      Finish(std::move(s));
    });
  }
  return Status::Ok();
}

namespace {

// `data` (paths joined by "::") with each path made absolute against this
// process's working directory.
std::string AbsolutePaths(std::string_view data) {
  std::string out;
  size_t start = 0;
  while (start <= data.size()) {
    const size_t end = std::min(data.find("::", start), data.size());
    const std::string path(data.substr(start, end - start));
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    if (!out.empty()) out += "::";
    out += path.empty() || ec ? path : absolute.string();
    start = end + 2;
  }
  return out;
}

}  // namespace

std::unique_ptr<AttachPoint> Server::Impl::BindAttachPoint(size_t i) {
  const Ring& ring = rings[i];
  AttachPointOptions o;
  o.ring = static_cast<uint32_t>(i);
  o.ring_name =
      ring.device >= 0 ? DeviceName(Device::Cuda(ring.device)) : "host ring " + std::to_string(i);
  Result<std::string> endpoint = AttachEndpoint(options.name, o.ring);
  if (!endpoint.ok()) {
    BC_LOG_WARN("{} takes no attached producer: {}", o.ring_name, endpoint.status().ToString());
    return nullptr;
  }
  o.endpoint = *endpoint;
  // The holder builds the source from these (the order group holds the
  // seed); an unset option ("") keeps its default there too. Its process
  // may run elsewhere in the tree: the dataset's paths go absolute.
  for (const ServerOption& option : ServerOptionTable()) {
    if (option.group != OptionGroup::kSource && option.group != OptionGroup::kOrder) continue;
    std::string value = option.get(options);
    if (option.name == "data") value = AbsolutePaths(value);
    if (!value.empty()) o.attached.options.push_back(std::string(option.name) + "=" + value);
  }
  o.attached.ring.device = ring.device;
  o.attached.ring.allocations = ring.memory->allocations();
  o.attached.fields = fields;
  o.attached.window = layout->window();
  o.attached.resume_slots = layout->slots() - layout->window();
  o.attached.batch_size = layout->batch_size();
  o.attached.dataset_size = ring.source->size();
  o.attached.listing_digest = ring.source->listing_digest();
  o.attached.device_output = ring.source->output_memory() == MemoryKind::kCuda;
  if (!ring.source->sample_groups().empty()) {
    o.refusal =
        "this server reads tar shards, which its rings read once, through one reader: "
        "an attached producer decodes image folders and synthetic data";
  } else if (ring.device >= 0 && !o.attached.device_output) {
    o.refusal = o.ring_name +
                " is filled on the CPU (CPU decode or synthetic data), which a trainer's process "
                "would do no better";
  }
  const Source* source = ring.source.get();
  o.listing = [this, source] { return SharedListing(*source); };
  const std::string ring_name = o.ring_name;
  Result<std::unique_ptr<AttachPoint>> point = AttachPoint::Bind(std::move(o));
  if (!point.ok()) {
    BC_LOG_WARN("{} takes no attached producer: {}", ring_name, point.status().ToString());
    return nullptr;
  }
  return std::move(*point);
}

std::string Server::Impl::SharedListing(const Source& source) {
  MutexLock l(&listing_mu);
  // Saved once; again if it went meanwhile (a cleaner of old files in /tmp).
  if (listing_path && (listing_path->empty() || access(listing_path->c_str(), R_OK) == 0)) {
    return *listing_path;
  }
  listing_path = "";
  if (source.listing_digest() == 0) return "";  // synthetic data: nothing to list
  Result<std::string> path = ListingPath(options.name);
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = path.ok() ? source.SaveListing(*path) : path.status();
  if (!s.ok()) {
    BC_LOG_WARN("attached producers scan the dataset themselves: {}", s.ToString());
    return "";
  }
  BC_LOG_INFO("saved the dataset's listing to {} in {:.2f} s, for attached producers", *path,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  listing_path = *path;
  return *path;
}

void Server::Impl::Finish(Status status) {
  Status why;
  {
    MutexLock l(&done_mu);
    if (done) return;
    done = true;
    final_status = std::move(status);
    why = final_status;
  }
  sched->Stop();
  for (Ring& ring : rings) {
    if (ring.source) ring.source->Cancel();  // e.g. a read waiting to retry
    if (ring.attach) ring.attach->Cancel();  // a batch handed to an attached producer
  }
  control->RequestStop(std::move(why));
  done_cv.SignalAll();
}

bool Server::Impl::WaitDone(Clock::time_point deadline) {
  MutexLock l(&done_mu);
  while (!done) {
    if (Clock::now() >= deadline) return false;
    done_cv.WaitUntil(&done_mu, deadline);
  }
  return true;
}

void Server::Impl::Shutdown() {
  MutexLock l(&shutdown_mu);
  if (metrics) metrics->Stop();  // before what it reads goes
  if (!rings.empty() && control) Finish(Status::Ok());
  for (std::thread& t : producer_threads) {
    if (t.joinable()) t.join();
  }
  if (control_thread.joinable()) control_thread.join();
  MutexLock m(&listing_mu);  // no producer thread saves it any more
  if (listing_path && !listing_path->empty()) unlink(listing_path->c_str());
}

// ---- Server ----
// The Start functions run inside CatchAll (core/src/catch_all.h): whatever the
// code below them throws (a source's, a file system's) is a Status.

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Stop(); }

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  return CatchAll("Server::Start", [&]() -> Result<std::unique_ptr<Server>> {
    RaiseOpenFileLimit();
    BATCHCAST_RETURN_IF_ERROR(options.Validate());
    BATCHCAST_ASSIGN_OR_RETURN(std::vector<int> devices, ResolveRingDevices(options));
    if (devices.size() == 1) {
      BATCHCAST_ASSIGN_OR_RETURN(std::unique_ptr<Source> source, MakeSource(options.source));
      return Start(std::move(options), std::move(source));
    }
    // Note [Rings per GPU]: a source per GPU, decoding there, over one dataset.
    std::vector<Device> ring_devices;
    for (int device : devices) {
      ring_devices.push_back(device >= 0 ? Device::Cuda(device) : Device::Cpu());
    }
    BATCHCAST_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Source>> sources,
                               MakeSources(options.source, ring_devices));
    return StartRings(std::move(options), devices, std::move(sources));
  });
}

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options,
                                              std::unique_ptr<Source> source) {
  return CatchAll("Server::Start", [&]() -> Result<std::unique_ptr<Server>> {
    RaiseOpenFileLimit();
    BATCHCAST_RETURN_IF_ERROR(options.Validate());
    BATCHCAST_ASSIGN_OR_RETURN(std::vector<int> devices, ResolveRingDevices(options));
    if (devices.size() != 1) {
      return InvalidArgumentError("--device " + DeviceOptionName(options) +
                                  ": a server given its Source serves one device");
    }
    std::vector<std::unique_ptr<Source>> sources;
    sources.push_back(std::move(source));
    return StartRings(std::move(options), devices, std::move(sources));
  });
}

// "image:float32[3,224,224] label:int64[]": names, dtypes and shapes (not
// where they live: a resume may move from a host ring to a device one).
static std::string FieldsText(const std::vector<FieldSpec>& fields) {
  std::string s;
  for (const FieldSpec& f : fields) {
    s += (s.empty() ? "" : " ") + f.name + ":" + std::string(DTypeName(f.dtype)) + "[";
    for (size_t i = 0; i < f.shape.size(); ++i) {
      s += (i == 0 ? "" : ",") + std::to_string(f.shape[i]);
    }
    s += "]";
  }
  std::replace(s.begin(), s.end(), ';', ',');  // an identity component holds no ';'
  return s;
}

// The samples of the smallest shard over all servers of `options`' shard
// count (tar shards split whole files, so shards may differ by a file).
static uint64_t SmallestShard(uint64_t dataset_size, SamplerOptions options) {
  uint64_t smallest = dataset_size / std::max<uint64_t>(1, options.num_shards);
  if (options.groups.empty()) return smallest;
  smallest = dataset_size;
  for (uint32_t r = 0; r < options.num_shards; ++r) {
    options.shard_rank = r;
    if (Result<Sampler> s = Sampler::Make(dataset_size, options); s.ok()) {
      smallest = std::min(smallest, s->epoch_len());
    }
  }
  return smallest;
}

// Note [Resume]: what shapes the built-in pipeline's samples and their order.
static std::string StreamOf(const ServerOptions& o, const Source& source, const SamplerOptions& so,
                            uint64_t epoch_len) {
  StreamIdentity id;
  const bool dataset = o.source.synthetic == 0;
  id.Add("source", dataset ? "dataset" : "synthetic");
  id.Add("samples", std::to_string(source.size()));
  if (dataset) {
    uint64_t h = source.listing_digest();
    for (uint64_t g : so.groups) h = Fnv1a64(std::to_string(g) + ",", h);
    id.Add("listing", Hex64(h));
  }
  id.Add("epoch_len", std::to_string(epoch_len));
  id.Add("shard", std::to_string(so.shard_rank) + "/" + std::to_string(so.num_shards));
  id.Add("seed", std::to_string(so.seed));
  id.Add("shuffle", so.shuffle ? "on" : "off");
  if (!so.groups.empty() && so.shuffle) id.Add("shuffle_buffer", std::to_string(so.shuffle_buffer));
  if (dataset) {
    id.Add("transform", std::string(TransformKindName(o.source.transform)));
    auto triple = [](const std::array<float, 3>& v) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.9g,%.9g,%.9g", v[0], v[1], v[2]);
      return std::string(buf);
    };
    id.Add("mean", triple(o.source.mean));
    id.Add("std", triple(o.source.std));
    id.Add("max_pixels", std::to_string(o.source.max_pixels));
  }
  id.Add("fields", FieldsText(source.fields()));
  return id.ToString();
}

// REQUIRES: options validated; one source per device, all of one dataset and
// decoding alike (MakeSources).
Result<std::unique_ptr<Server>> Server::StartRings(ServerOptions options,
                                                   const std::vector<int>& devices,
                                                   std::vector<std::unique_ptr<Source>> sources) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const Source& first = *sources.front();
  BATCHCAST_ASSIGN_OR_RETURN(ServerOptions::ShardChoice shard, options.Shard());
  SamplerOptions so{options.source.seed, options.shuffle,       shard.rank,
                    shard.count,         first.sample_groups(), options.source.shuffle_buffer};
  BATCHCAST_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Make(first.size(), so));
  // Note [Consumer groups]: a group's rounds per epoch come from the
  // smallest shard, so that every rank of every node gets the same count.
  BATCHCAST_RETURN_IF_ERROR(impl->Init(first.fields(), sampler.epoch_len(),
                                       SmallestShard(first.size(), so), devices,
                                       StreamOf(options, first, so, sampler.epoch_len()),
                                       /*replay=*/true,
                                       // Note [Begun ahead]: not over shards
                                       /*begin_ahead=*/first.sample_groups().empty()));
  impl->shard = shard;
  for (size_t i = 0; i < sources.size(); ++i) impl->rings[i].source = std::move(sources[i]);
  const Source& source = *impl->rings.front().source;
  BC_LOG_INFO(
      "server '{}' on {}: {}, epoch of {} samples (shard {} of {}: {}), batch {}, "
      "window {}, lag policy {}{}",
      options.name, impl->endpoint, source.description(), sampler.epoch_len(), shard.rank,
      shard.count, shard.source, options.batch_size, impl->options.window,
      LagPolicyName(options.lag_policy),
      devices.size() > 1
          ? ", a ring and a producer on each of " + std::to_string(devices.size()) +
                (devices.front() >= 0 ? " GPUs" : " host rings") +
                ", sharing one stream (each sample decoded once), batches placed " +
                (options.placement == Placement::kDemand ? "by demand" : "round robin")
          : std::string());
  const SlotWriter writer = source.output_memory() == MemoryKind::kCuda ? SlotWriter::kDeviceSource
                                                                        : SlotWriter::kHostSource;
  BATCHCAST_RETURN_IF_ERROR(impl->StartThreads(writer, std::move(sampler)));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Result<std::unique_ptr<Server>> Server::StartExternal(ServerOptions options,
                                                      std::vector<FieldSpec> fields,
                                                      uint64_t epoch_len) {
  return CatchAll("Server::StartExternal", [&]() -> Result<std::unique_ptr<Server>> {
    RaiseOpenFileLimit();
    BATCHCAST_RETURN_IF_ERROR(options.Validate());
    if (epoch_len == 0) return InvalidArgumentError("epoch_len must be positive");
    BATCHCAST_ASSIGN_OR_RETURN(std::vector<int> devices, ResolveRingDevices(options));
    if (devices.size() != 1) {
      return InvalidArgumentError("--device " + DeviceOptionName(options) +
                                  ": an external producer serves one device");
    }
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    // Note [Resume]: an external producer's samples are its own; the server
    // knows their shape and epoch only.
    StreamIdentity id;
    id.Add("source", "external");
    id.Add("epoch_len", std::to_string(epoch_len));
    id.Add("fields", FieldsText(fields));
    BATCHCAST_RETURN_IF_ERROR(impl->Init(std::move(fields), epoch_len, epoch_len, devices,
                                         id.ToString(), /*replay=*/false,
                                         /*begin_ahead=*/false));
    BC_LOG_INFO("server '{}' on {}: external producer, epoch of {} samples, batch {}, window {}",
                options.name, impl->endpoint, epoch_len, options.batch_size, impl->options.window);
    BATCHCAST_RETURN_IF_ERROR(impl->StartThreads(SlotWriter::kExternal, std::nullopt));
    return std::unique_ptr<Server>(new Server(std::move(impl)));
  });
}

const std::string& Server::endpoint() const { return impl_->endpoint; }
const ServerOptions& Server::options() const { return impl_->options; }
uint64_t Server::epoch_len() const { return impl_->scheduler().config().epoch_len; }
std::string Server::StatsJson() const { return ServerStatsJson(*impl_); }

Result<SlotView> Server::BeginBatch(uint32_t epoch, std::span<const int64_t> indices,
                                    std::chrono::milliseconds timeout) {
  if (impl_->rings.front().producer) {
    return InvalidArgumentError(
        "BeginBatch is for servers started with StartExternal; this one has its own source");
  }
  BATCHCAST_ASSIGN_OR_RETURN(SlotGrant g,
                             impl_->scheduler().BeginBatch(epoch, indices, DeadlineAfter(timeout)));
  return impl_->rings.front().publisher->Begin(g, epoch);
}

Status Server::CommitBatch(const SlotView& slot, CudaStreamRef cuda_stream) {
  if (impl_->rings.front().producer) {
    return InvalidArgumentError(
        "CommitBatch is for servers started with StartExternal; this one has its own source");
  }
  if (slot.slot >= impl_->options.window) return InvalidArgumentError("bad slot");
  SlotView filled = slot;
  filled.stream = cuda_stream;  // Note [Device ring ordering], step 2
  // An external producer's slot is all samples (no holes).
  return impl_->rings.front().publisher->Publish(filled, static_cast<uint32_t>(filled.count()));
}

void Server::EndStream() { impl_->scheduler().EndStream(); }

bool Server::WaitFor(std::chrono::milliseconds timeout) {
  return impl_->WaitDone(DeadlineAfter(timeout));
}

Status Server::status() const {
  MutexLock l(&impl_->done_mu);
  return impl_->final_status;
}

void Server::Stop() {
  if (impl_) impl_->Shutdown();
}

}  // namespace batchcast
