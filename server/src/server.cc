#include "batchcast/server/server.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "batchcast/core/logging.h"
#include "batchcast/core/ring_layout.h"
#include "batchcast/core/runtime_dir.h"
#include "batchcast/core/sampler.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/sources/make_source.h"
#include "ring_memory.h"
#include "core/src/protocol.h"
#include "scheduler.h"

namespace batchcast {

namespace {

// An eventfd the producer side writes to wake the control loop's zmq_poll.
class WakeFd {
 public:
  WakeFd() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~WakeFd() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void Signal() const {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
  }
  void Drain() const {
    uint64_t v;
    [[maybe_unused]] ssize_t n = read(fd_, &v, sizeof(v));
  }

 private:
  int fd_;
};

std::string IpcPath(const std::string& endpoint) {
  return endpoint.starts_with("ipc://") ? endpoint.substr(6) : std::string();
}

}  // namespace

struct Server::Impl {
  ServerOptions options;
  std::optional<InstanceLock> lock;
  std::string endpoint;
  std::unique_ptr<Source> source;  // null for external production
  std::vector<FieldSpec> fields;
  std::optional<RingLayout> layout;
  std::unique_ptr<RingMemory> memory;
  std::unique_ptr<Scheduler> scheduler;
  std::optional<Sampler> sampler;
  // Device ring (--device cuda:N): the producer's stream, and pinned staging
  // buffers for sources that fill host memory (Note [Device ring ordering]).
  int cuda_device = -1;
  std::optional<cuda::Stream> stream;
  cuda::PinnedBuffer staging[2];
  cuda::Event staging_done[2];
  WakeFd wake;
  zmq::context_t context{1};
  std::optional<zmq::socket_t> router;
  std::thread control_thread;
  std::thread pipeline_thread;
  std::atomic<bool> stopping{false};

  mutable std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;
  Status final_status;

  ~Impl() { Shutdown(); }

  Status Init(std::vector<FieldSpec> specs, uint64_t epoch_len);
  void ControlLoop();
  void HandleMessage(const std::string& identity, std::span<const uint8_t> payload);
  void SendTo(const std::string& identity, const proto::Message& message);
  void FlushOutbox();
  void PipelineLoop();
  Status PrepareStaging();
  Status PublishDeviceSlot(uint32_t slot, size_t count, int staging_index);
  void Finish(Status status);
  void Shutdown();
  std::string StatsJson() const;

  // Malformed-message logging is rate limited per peer.
  std::unordered_map<std::string, uint64_t> bad_messages;
  std::string send_buffer;
};

Status Server::Impl::Init(std::vector<FieldSpec> specs, uint64_t epoch_len) {
  BATCHCAST_ASSIGN_OR_RETURN(InstanceLock l, InstanceLock::Acquire(options.name));
  lock.emplace(std::move(l));
  if (options.endpoint.empty()) {
    BATCHCAST_ASSIGN_OR_RETURN(endpoint, DefaultEndpoint(options.name));
  } else {
    BATCHCAST_ASSIGN_OR_RETURN(endpoint, ResolveEndpoint(options.endpoint));
  }
  // --device cuda:N puts every field (labels too) in one device allocation.
  const std::string device_name = DeviceName(options.source.device);
  if (options.source.device.is_cuda()) {
    if (!cuda::BuiltWithCuda()) {
      return InvalidArgumentError("--device " + device_name +
                                  ": this build of batchcast has no CUDA support (use --device cpu)");
    }
    cuda_device = options.source.device.index;
    BATCHCAST_RETURN_IF_ERROR(
        cuda::CheckDevice(cuda_device).WithContext("--device " + device_name));
  }
  const MemoryKind kind = cuda_device >= 0 ? MemoryKind::kCuda : MemoryKind::kHost;
  for (FieldSpec& f : specs) f.memory = kind;
  fields = specs;
  BATCHCAST_ASSIGN_OR_RETURN(RingLayout l2, RingLayout::Make(specs, options.window, options.batch_size));
  layout.emplace(std::move(l2));
  BATCHCAST_ASSIGN_OR_RETURN(memory, RingMemory::Create(*layout, options.name, cuda_device));
  if (cuda_device >= 0) {
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Stream st, cuda::Stream::Create(cuda_device));
    stream.emplace(std::move(st));
    BC_LOG_INFO("ring of {} MiB on {}: {}", layout->allocation_bytes(MemoryKind::kCuda) >> 20,
                device_name, cuda::DeviceDescription(cuda_device));
  }

  SchedulerConfig sc;
  sc.window = options.window;
  sc.batch_size = options.batch_size;
  sc.epoch_len = epoch_len;
  if (options.epochs > 0) sc.stream_end = options.epochs * epoch_len;
  sc.lag_policy = options.lag_policy;
  sc.lag_timeout = options.lag_timeout;
  sc.min_consumers = options.min_consumers;
  sc.max_consumers = options.max_consumers;
  sc.max_leases = options.max_leases;
  scheduler = std::make_unique<Scheduler>(sc);
  if (!wake.ok()) return InternalError("eventfd failed");
  scheduler->set_wakeup([this] { wake.Signal(); });

  router.emplace(context, zmq::socket_type::router);
  router->set(zmq::sockopt::router_mandatory, 1);
  router->set(zmq::sockopt::linger, 0);
  router->set(zmq::sockopt::sndhwm, 100000);
  router->set(zmq::sockopt::rcvhwm, 100000);
  router->set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
  std::string bind_endpoint = endpoint;
  if (const std::string path = IpcPath(endpoint); !path.empty()) {
    unlink(path.c_str());  // a leftover of a dead server (we hold the instance lock)
  }
  try {
    router->bind(bind_endpoint);
  } catch (const zmq::error_t& e) {
    return UnavailableError("cannot bind " + endpoint + ": " + e.what());
  }
  if (const std::string path = IpcPath(endpoint); !path.empty()) chmod(path.c_str(), 0600);
  // tcp://*:port binds every interface: say so, since the ring is local anyway.
  if (endpoint.starts_with("tcp://*") || endpoint.starts_with("tcp://0.0.0.0")) {
    BC_LOG_WARN("{} listens on every interface; consumers must still run on this machine",
                endpoint);
  }
  return Status::Ok();
}

void Server::Impl::SendTo(const std::string& identity, const proto::Message& message) {
  send_buffer.clear();
  proto::EncodeTo(message, send_buffer);
  try {
    auto r1 = router->send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    auto r2 = r1 ? router->send(zmq::buffer(send_buffer), zmq::send_flags::dontwait)
                 : zmq::send_result_t{};
    if (!r1 || !r2) {
      scheduler->Remove(identity, "its connection is not reading (send queue full)");
    }
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) {
      scheduler->Remove(identity, "its connection is gone");
    } else {
      BC_LOG_WARN("send to a consumer failed: {}", e.what());
    }
  }
}

void Server::Impl::FlushOutbox() {
  std::vector<Outgoing> out;
  scheduler->TakeOutbox(out);
  for (const Outgoing& o : out) SendTo(o.identity, o.message);
}

void Server::Impl::HandleMessage(const std::string& identity, std::span<const uint8_t> payload) {
  Result<proto::Message> decoded = proto::Decode(payload);
  if (!decoded.ok()) {
    uint64_t& n = bad_messages[identity];
    if (n++ < 20 || n % 1000 == 0) {
      BC_LOG_WARN("ignored a message from a peer ({} so far from it): {}", n,
                  decoded.status().message());
    }
    SendTo(identity, proto::Error{0, StatusCode::kInvalidArgument, decoded.status().message()});
    return;
  }
  proto::Message& m = *decoded;
  if (auto* hello = std::get_if<proto::Hello>(&m)) {
    if (!hello->device.empty() && hello->device != DeviceName(options.source.device)) {
      SendTo(identity, proto::Error{0, StatusCode::kInvalidArgument,
                                    "this server's ring is on " + DeviceName(options.source.device) +
                                        ", the consumer asked for " + hello->device});
      return;
    }
    const bool local = endpoint.starts_with("ipc://");
    const bool pid_visible = local && ProcessAlive(static_cast<int>(hello->pid));
    Result<Scheduler::Admission> a = scheduler->AddConsumer(identity, *hello, pid_visible);
    if (!a.ok()) {
      BC_LOG_WARN("refused consumer '{}' (pid {}): {}", hello->name, hello->pid,
                  a.status().message());
      SendTo(identity, proto::Error{0, a.status().code(), a.status().message()});
      return;
    }
    proto::Welcome w;
    w.consumer_id = a->consumer_id;
    w.server_pid = static_cast<uint32_t>(getpid());
    w.server_name = options.name;
    w.window = options.window;
    w.producer_batch_size = options.batch_size;
    w.fields = fields;
    w.allocations = memory->allocations();
    w.epoch_len = scheduler->config().epoch_len;
    w.batches_per_epoch = a->batches_per_epoch;
    w.heartbeat_interval_ms = static_cast<uint32_t>(options.heartbeat_period().count());
    w.heartbeat_timeout_ms = static_cast<uint32_t>(options.heartbeat_timeout.count());
    SendTo(identity, w);
    return;
  }
  if (std::holds_alternative<proto::Stats>(m)) {
    SendTo(identity, proto::StatsReply{StatsJson()});
    return;
  }
  if (!scheduler->HasConsumer(identity)) {
    if (!std::holds_alternative<proto::Bye>(m) && !std::holds_alternative<proto::Release>(m) &&
        !std::holds_alternative<proto::Heartbeat>(m)) {
      SendTo(identity, proto::Error{0, StatusCode::kNotFound,
                                    "unknown consumer: say HELLO first (or the server dropped "
                                    "this consumer after missed heartbeats)"});
    }
    return;
  }
  std::visit(
      [&](auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, proto::Next>) {
          // Release, answer, and only then wake the producer, so that its
          // work does not delay the reply.
          if (!msg.releases.empty()) scheduler->Release(identity, msg.releases, false);
          scheduler->Next(identity, msg.request_id);
          FlushOutbox();
          scheduler->WakeProducer();
        } else if constexpr (std::is_same_v<T, proto::Release>) {
          scheduler->Release(identity, msg.lease_ids);
        } else if constexpr (std::is_same_v<T, proto::Heartbeat>) {
          scheduler->Touch(identity);
        } else if constexpr (std::is_same_v<T, proto::Bye>) {
          scheduler->Bye(identity, msg.kept_leases);
        } else {
          SendTo(identity, proto::Error{0, StatusCode::kInvalidArgument,
                                        std::string("a consumer may not send ") +
                                            std::string(proto::MessageName(proto::Message(msg)))});
        }
      },
      m);
}

void Server::Impl::ControlLoop() {
  auto next_heartbeat = Clock::now();
  auto next_liveness = Clock::now();
  std::vector<zmq::pollitem_t> items = {{router->handle(), 0, ZMQ_POLLIN, 0},
                                        {nullptr, wake.fd(), ZMQ_POLLIN, 0}};
  while (!stopping.load()) {
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(20));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      Finish(InternalError(std::string("zmq_poll failed: ") + e.what()));
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) wake.Drain();
    // Drain every pending message (bounded so the outbox gets flushed too).
    for (int i = 0; i < 1024; ++i) {
      zmq::message_t identity, payload;
      auto r = router->recv(identity, zmq::recv_flags::dontwait);
      if (!r) break;
      bool extra = false;
      if (identity.more()) {
        (void)router->recv(payload, zmq::recv_flags::none);
        while (payload.more()) {  // more frames than the protocol has: drain them
          zmq::message_t rest;
          (void)router->recv(rest, zmq::recv_flags::none);
          extra = true;
          if (!rest.more()) break;
        }
      }
      std::string id(static_cast<const char*>(identity.data()), identity.size());
      if (extra) {
        SendTo(id, proto::Error{0, StatusCode::kInvalidArgument,
                                "malformed message: more than one frame"});
        continue;
      }
      HandleMessage(id, std::span<const uint8_t>(static_cast<const uint8_t*>(payload.data()),
                                                 payload.size()));
    }
    FlushOutbox();
    const auto now = Clock::now();
    if (now >= next_heartbeat) {
      for (const std::string& id : scheduler->Identities()) SendTo(id, proto::Heartbeat{});
      next_heartbeat = now + options.heartbeat_period();
    }
    if (now >= next_liveness) {
      scheduler->CheckLiveness(options.heartbeat_timeout);
      FlushOutbox();
      next_liveness = now + std::chrono::milliseconds(100);
    }
    if (scheduler->Finished()) {
      BC_LOG_INFO("the stream ended and every consumer left: server '{}' is done", options.name);
      Finish(Status::Ok());
      break;
    }
  }
  // Tell every consumer, so that nobody waits for a heartbeat timeout.
  for (const std::string& id : scheduler->Identities()) {
    SendTo(id, proto::Error{0, StatusCode::kUnavailable,
                            "server '" + options.name + "' stopped"});
  }
}

// Note [Device ring ordering]
// With the ring in device memory nothing on the hot path waits on the host:
//  1. The producer queues every write of a slot on its stream: a source whose
//     output_memory() is kCuda writes the slot itself on BatchTarget::cuda_stream
//     (nvJPEG decode + the fused kernel); any other source fills a pinned
//     staging buffer that is then copied to the slot (cudaMemcpyAsync).
//  2. It records the slot's interprocess event on that stream, and only then
//     commits the slot (Scheduler::Commit), which lets BATCH messages name it.
//  3. A consumer makes its stream wait on the event (cudaStreamWaitEvent)
//     before it hands the batch to the user (client/src/connection.cc).
//  4. The slot is rewritten only after every lease on it ended (Note [Leases]),
//     and a consumer ends a lease only after the GPU work that read the batch
//     completed (Note [Device leases], client/src/connection.h). So the
//     producer's next writes never race with readers.
// A staging buffer is refilled only after the copy out of it completed (an
// event per buffer, two buffers so the copy of one overlaps filling the other).

Status Server::Impl::PrepareStaging() {
  size_t bytes = 0;
  for (const FieldSpec& f : fields) bytes += f.bytes_per_sample() * options.batch_size;
  for (int k = 0; k < 2; ++k) {
    BATCHCAST_ASSIGN_OR_RETURN(staging[k], cuda::PinnedBuffer::Create(bytes));
    BATCHCAST_ASSIGN_OR_RETURN(staging_done[k], cuda::Event::Create(cuda_device, false, true));
    BATCHCAST_RETURN_IF_ERROR(staging_done[k].Record(stream->ref()));
  }
  return Status::Ok();
}

// Steps 1 (copy from staging, when staging_index >= 0) and 2 (record) of
// Note [Device ring ordering]; the caller then commits.
Status Server::Impl::PublishDeviceSlot(uint32_t slot, size_t count, int staging_index) {
  if (staging_index >= 0) {
    size_t off = 0;
    for (size_t f = 0; f < fields.size(); ++f) {
      const size_t bytes = fields[f].bytes_per_sample() * count;
      uint8_t* dst = memory->base(MemoryKind::kCuda) + layout->SampleOffset(f, slot, 0);
      BATCHCAST_RETURN_IF_ERROR(
          cuda::CopyAsync(dst, staging[staging_index].data() + off, bytes, stream->ref()));
      off += fields[f].bytes_per_sample() * options.batch_size;
    }
    BATCHCAST_RETURN_IF_ERROR(staging_done[staging_index].Record(stream->ref()));
  }
  return memory->slot_event(slot).Record(stream->ref());
}

void Server::Impl::PipelineLoop() {
  const uint64_t L = sampler->epoch_len();
  const uint32_t B = options.batch_size;
  const bool device_ring = memory->has_device_memory();
  const bool direct = !device_ring || source->output_memory() == MemoryKind::kCuda;
  if (device_ring && !direct) {
    if (Status s = PrepareStaging(); !s.ok()) {
      BC_LOG_ERROR("producer stopped: {}", s.ToString());
      Finish(s);
      return;
    }
  }
  int next_staging = 0;
  std::vector<int64_t> next_order;
  for (uint64_t epoch = 0; options.epochs == 0 || epoch < options.epochs; ++epoch) {
    // The next epoch's order is computed during this one's last batch (for
    // the read-ahead hint) and kept.
    std::vector<int64_t> order =
        next_order.empty() ? sampler->EpochOrder(epoch) : std::move(next_order);
    next_order.clear();
    for (uint64_t off = 0; off < L; off += B) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(B, L - off));
      Result<SlotGrant> grant = scheduler->BeginBatch(
          static_cast<uint32_t>(epoch), std::span<const int64_t>(order.data() + off, n),
          Clock::time_point::max());
      if (!grant.ok()) {
        if (grant.status().code() != StatusCode::kCancelled) Finish(grant.status());
        return;
      }
      SlotView target;
      target.slot = grant->slot;
      target.first_seq = grant->first_seq;
      target.epoch = static_cast<uint32_t>(epoch);
      target.indices = std::span<int64_t>(grant->indices, n);
      ReadAhead next;
      const int staging_index = direct ? -1 : next_staging;
      Status s;
      if (staging_index >= 0) s = staging_done[staging_index].Synchronize();
      size_t staging_off = 0;
      for (size_t f = 0; f < fields.size(); ++f) {
        if (direct) {
          target.field_data.push_back(memory->base(fields[f].memory) +
                                      layout->SampleOffset(f, grant->slot, 0));
        } else {
          target.field_data.push_back(staging[staging_index].data() + staging_off);
          staging_off += fields[f].bytes_per_sample() * B;
        }
        target.field_bytes.push_back(fields[f].bytes_per_sample());
      }
      if (device_ring && direct) {
        target.device = Device{MemoryKind::kCuda, cuda_device};
        target.stream = stream->ref();
      }
      if (off + B < L) {  // lookahead for sources that read ahead
        const size_t next_n = static_cast<size_t>(std::min<uint64_t>(B, L - off - B));
        next.indices = std::span<const int64_t>(order.data() + off + B, next_n);
        next.epoch = static_cast<uint32_t>(epoch);
      } else if (source->output_memory() == MemoryKind::kCuda &&
                 (options.epochs == 0 || epoch + 1 < options.epochs)) {
        next_order = sampler->EpochOrder(epoch + 1);
        next.indices = std::span<const int64_t>(
            next_order.data(), static_cast<size_t>(std::min<uint64_t>(B, next_order.size())));
        next.epoch = static_cast<uint32_t>(epoch + 1);
      }
      if (s.ok()) s = source->FillBatch(target, next);
      if (s.ok() && device_ring) s = PublishDeviceSlot(grant->slot, n, staging_index);
      if (!s.ok()) {
        BC_LOG_ERROR("producer stopped: {}", s.ToString());
        Finish(s);
        return;
      }
      next_staging ^= 1;
      scheduler->Commit(grant->slot);
    }
  }
  scheduler->EndStream();
}

void Server::Impl::Finish(Status status) {
  {
    std::lock_guard lock(done_mu);
    if (done) return;
    done = true;
    final_status = std::move(status);
  }
  stopping = true;
  scheduler->Stop();
  wake.Signal();
  done_cv.notify_all();
}

void Server::Impl::Shutdown() {
  if (scheduler) Finish(Status::Ok());
  if (pipeline_thread.joinable()) pipeline_thread.join();
  if (control_thread.joinable()) control_thread.join();
  if (stream) (void)stream->Synchronize();  // no queued write outlives the ring
  if (router) {
    router->close();
    router.reset();
    if (const std::string path = IpcPath(endpoint); !path.empty()) unlink(path.c_str());
  }
}

std::string Server::Impl::StatsJson() const {
  nlohmann::json j = scheduler->Stats();
  j["name"] = options.name;
  j["endpoint"] = endpoint;
  j["device"] = DeviceName(options.source.device);
  j["pid"] = getpid();
  if (source) {
    j["source"] = source->description();
    nlohmann::json counters = nlohmann::json::object();
    for (const auto& [k, v] : source->counters()) counters[k] = v;
    j["source_counters"] = counters;
  }
  return j.dump();
}

// ---- Server ----

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Stop(); }

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  BATCHCAST_RETURN_IF_ERROR(options.Validate());
  BATCHCAST_ASSIGN_OR_RETURN(std::unique_ptr<Source> source, MakeSource(options.source));
  return Start(std::move(options), std::move(source));
}

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options,
                                              std::unique_ptr<Source> source) {
  BATCHCAST_RETURN_IF_ERROR(options.Validate());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  SamplerOptions so{options.source.seed, options.shuffle, options.shard_rank, options.num_shards};
  BATCHCAST_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Make(source->size(), so));
  impl->sampler.emplace(sampler);
  BATCHCAST_RETURN_IF_ERROR(impl->Init(source->fields(), sampler.epoch_len()));
  impl->source = std::move(source);
  BC_LOG_INFO("server '{}' on {}: {}, epoch of {} samples, batch {}, window {}, lag policy {}",
              options.name, impl->endpoint, impl->source->description(), sampler.epoch_len(),
              options.batch_size, options.window, LagPolicyName(options.lag_policy));
  Impl* p = impl.get();
  impl->control_thread = std::thread([p] { p->ControlLoop(); });
  impl->pipeline_thread = std::thread([p] { p->PipelineLoop(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Result<std::unique_ptr<Server>> Server::StartExternal(ServerOptions options,
                                                      std::vector<FieldSpec> fields,
                                                      uint64_t epoch_len) {
  BATCHCAST_RETURN_IF_ERROR(options.Validate());
  if (epoch_len == 0) return InvalidArgumentError("epoch_len must be positive");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  BATCHCAST_RETURN_IF_ERROR(impl->Init(std::move(fields), epoch_len));
  BC_LOG_INFO("server '{}' on {}: external producer, epoch of {} samples, batch {}, window {}",
              options.name, impl->endpoint, epoch_len, options.batch_size, options.window);
  Impl* p = impl.get();
  impl->control_thread = std::thread([p] { p->ControlLoop(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

const std::string& Server::endpoint() const { return impl_->endpoint; }
const ServerOptions& Server::options() const { return impl_->options; }
uint64_t Server::epoch_len() const { return impl_->scheduler->config().epoch_len; }
std::string Server::StatsJson() const { return impl_->StatsJson(); }

Result<SlotView> Server::BeginBatch(uint32_t epoch, std::span<const int64_t> indices,
                                     std::chrono::milliseconds timeout) {
  BATCHCAST_ASSIGN_OR_RETURN(SlotGrant g,
                             impl_->scheduler->BeginBatch(epoch, indices, Clock::now() + timeout));
  SlotView w;
  w.slot = g.slot;
  w.first_seq = g.first_seq;
  w.epoch = epoch;
  w.indices = std::span<int64_t>(g.indices, g.count);
  for (size_t f = 0; f < impl_->fields.size(); ++f) {
    w.field_data.push_back(impl_->memory->base(impl_->fields[f].memory) +
                           impl_->layout->SampleOffset(f, g.slot, 0));
    w.field_bytes.push_back(impl_->fields[f].bytes_per_sample());
  }
  if (impl_->cuda_device >= 0) w.device = Device{MemoryKind::kCuda, impl_->cuda_device};
  return w;
}

Status Server::CommitBatch(const SlotView& slot, CudaStreamRef cuda_stream) {
  if (slot.slot >= impl_->options.window) return InvalidArgumentError("bad slot");
  if (impl_->memory->has_device_memory()) {
    // Note [Device ring ordering], step 2.
    BATCHCAST_RETURN_IF_ERROR(impl_->memory->slot_event(slot.slot).Record(cuda_stream));
  }
  impl_->scheduler->Commit(slot.slot);
  return Status::Ok();
}

void Server::EndStream() { impl_->scheduler->EndStream(); }

bool Server::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->done_mu);
  return impl_->done_cv.wait_for(lock, timeout, [&] { return impl_->done; });
}

Status Server::status() const {
  std::lock_guard lock(impl_->done_mu);
  return impl_->final_status;
}

void Server::Stop() {
  if (impl_) impl_->Shutdown();
}

}  // namespace batchcast
