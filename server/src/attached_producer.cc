#include "batchcast/server/attached_producer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "batchcast/cuda/runtime.h"
#include "batchcast/server/option_table.h"
#include "batchcast/sources/make_source.h"
#include "core/src/catch_all.h"
#include "core/src/endpoint.h"
#include "core/src/host_shm.h"
#include "core/src/logging.h"
#include "core/src/mutex.h"
#include "core/src/protocol.h"
#include "core/src/ring_layout.h"
#include "core/src/runtime_dir.h"
#include "core/src/thread_name.h"
#include "slot_publisher.h"

namespace batchcast {

// Note [Attached producers] (attach_point.h) is the server's side of this.
struct AttachedProducer::Impl {
  ~Impl() { Stop(); }

  // Sends `m` to the server; false when the socket refused it.
  bool Send(const proto::Message& m);
  // The next message from the server within `wait`; nullopt when none came.
  std::optional<Result<proto::Message>> Receive(std::chrono::milliseconds wait);
  // ATTACHED: builds the source and maps the ring.
  Status Prepare(const proto::Attached& a);
  // The thread: WORK -> DONE until stopped.
  void Run();
  Status Fill(const proto::Work& work, uint32_t& valid);
  void End(Status why);
  void Stop();

  uint32_t ring = 0;
  std::string ring_name;
  int device = -1;
  zmq::context_t context{1};
  std::optional<zmq::socket_t> socket;  // the thread's once it runs
  std::unique_ptr<Source> source;
  std::optional<RingLayout> layout;
  std::vector<FieldSpec> fields;
  std::unique_ptr<HostSharedMemory> host;
  std::shared_ptr<cuda::IpcMapping> mapping;
  std::vector<cuda::Event> slot_events;  // a device ring's, opened from their handles
  std::optional<cuda::Stream> stream;
  RingBases bases;
  std::vector<int64_t> indices;  // the slot in hand's
  std::string buffer;

  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<bool> running{false};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> samples{0};
  mutable Mutex mu;
  Status status BC_GUARDED_BY(mu);
};

bool AttachedProducer::Impl::Send(const proto::Message& m) {
  buffer.clear();
  proto::EncodeTo(m, buffer);
  try {
    return socket->send(zmq::buffer(buffer), zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t&) {
    return false;
  }
}

std::optional<Result<proto::Message>> AttachedProducer::Impl::Receive(
    std::chrono::milliseconds wait) {
  zmq::pollitem_t item{static_cast<void*>(*socket), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, wait) == 0) return std::nullopt;
  zmq::message_t payload;
  if (!socket->recv(payload, zmq::recv_flags::dontwait)) return std::nullopt;
  return proto::Decode(
      std::span<const uint8_t>(static_cast<const uint8_t*>(payload.data()), payload.size()));
}

Status AttachedProducer::Impl::Prepare(const proto::Attached& a) {
  // The server's source, on the ring's device.
  ServerOptions options;
  for (const std::string& line : a.options) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return InvalidArgumentError("malformed server option " + line);
    BATCHCAST_RETURN_IF_ERROR(SetServerOption(options, line.substr(0, eq), line.substr(eq + 1))
                                  .WithContext("the server's options"));
  }
  device = a.ring.device;
  // The caller's current device (a trainer's) is left as it was.
  std::optional<cuda::DeviceGuard> guard;
  if (device >= 0) {
    guard.emplace(device);
    BATCHCAST_RETURN_IF_ERROR(guard->status());
  }
  SourceOptions so = options.source;
  so.device = device >= 0 ? Device::Cuda(device) : Device::Cpu();
  so.listing_file = a.listing;  // Note [Shared listing]: not listed or scanned again
  BATCHCAST_RETURN_IF_ERROR(so.Validate());
  BATCHCAST_ASSIGN_OR_RETURN(source, MakeSource(so));
  if (source->size() != a.dataset_size || source->listing_digest() != a.listing_digest) {
    const std::string what = source->size() != a.dataset_size
                                 ? std::to_string(source->size()) + " samples, the server's " +
                                       std::to_string(a.dataset_size)
                                 : "the same number of samples, other files or labels";
    return InvalidArgumentError("the dataset here is not the server's (" + what +
                                "): it changed since the server listed it, or is another one");
  }
  if ((source->output_memory() == MemoryKind::kCuda) != a.device_output) {
    return InvalidArgumentError("the source here does not decode where the server's does (" +
                                std::string(a.device_output ? "on the GPU" : "on the CPU") +
                                "): a build or a GPU without nvJPEG?");
  }
  std::vector<FieldSpec> mine = source->fields();
  fields = a.fields;
  bool same = mine.size() == fields.size();
  for (size_t f = 0; same && f < mine.size(); ++f) {
    same = mine[f].name == fields[f].name && mine[f].dtype == fields[f].dtype &&
           mine[f].shape == fields[f].shape;
  }
  if (!same) return InvalidArgumentError("the source here makes other fields than the server's");
  BATCHCAST_ASSIGN_OR_RETURN(RingLayout l,
                             RingLayout::Make(fields, a.window, a.batch_size, a.resume_slots));
  layout = std::move(l);
  // The ring's memory: read-write, since this process writes granted slots.
  for (const proto::Allocation& alloc : a.ring.allocations) {
    if (alloc.bytes < layout->allocation_bytes(alloc.kind)) {
      return InvalidArgumentError("the ring's allocation is smaller than its layout");
    }
    if (alloc.kind == MemoryKind::kHost) {
      BATCHCAST_ASSIGN_OR_RETURN(host, HostSharedMemory::Open(alloc.shm_name, /*writable=*/true));
      bases.host = host->data();
      continue;
    }
    BATCHCAST_ASSIGN_OR_RETURN(mapping, cuda::OpenIpcMemory(alloc.mem_handle, device));
    bases.cuda = mapping->data();
    if (alloc.event_handles.size() != layout->slots()) {
      return InvalidArgumentError("the ring's events do not match its slots");
    }
    for (const proto::IpcHandle& h : alloc.event_handles) {
      BATCHCAST_ASSIGN_OR_RETURN(cuda::Event e, cuda::Event::OpenIpc(h, device));
      slot_events.push_back(std::move(e));
    }
  }
  if (device >= 0) {
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Stream s,
                               cuda::Stream::Create(device, options.source.gpu_priority));
    stream = std::move(s);
  }
  return Status::Ok();
}

Status AttachedProducer::Impl::Fill(const proto::Work& work, uint32_t& valid) {
  if (work.slot >= layout->slots() || work.indices.size() > layout->batch_size()) {
    return InvalidArgumentError("WORK for a slot the ring does not have");
  }
  indices = work.indices;
  SlotGrant grant{work.slot, work.first_seq, static_cast<uint32_t>(indices.size()), indices.data()};
  SlotView view = RingSlotView(bases, *layout, fields, grant, work.epoch);
  view.device = device >= 0 ? Device::Cuda(device) : Device::Cpu();
  if (stream) view.stream = stream->ref();
  ReadAhead next;
  next.indices = work.next;
  next.epoch = work.next_epoch;
  next.guess = work.next_guess;
  BATCHCAST_ASSIGN_OR_RETURN(valid, source->FillBatch(view, next));
  if (valid > view.count())
    return InternalError("the source wrote more samples than the slot holds");
  // Note [Device ring ordering]: the slot's event follows its writes.
  if (stream) BATCHCAST_RETURN_IF_ERROR(slot_events[work.slot].Record(stream->ref()));
  return Status::Ok();
}

void AttachedProducer::Impl::End(Status why) {
  MutexLock l(&mu);
  if (status.ok()) status = std::move(why);
}

void AttachedProducer::Impl::Run() {
  std::optional<cuda::DeviceGuard> guard;
  if (device >= 0) guard.emplace(device);  // the ring's, for the thread's life
  while (!stop) {
    std::optional<Result<proto::Message>> m = Receive(std::chrono::milliseconds(100));
    if (!m) continue;
    if (!m->ok()) {
      End(m->status().WithContext("a message from the server"));
      break;
    }
    if (const auto* e = std::get_if<proto::Error>(&**m)) {
      End(UnavailableError("the server ended the attachment of ring " + ring_name + ": " +
                           e->message));
      break;
    }
    const auto* work = std::get_if<proto::Work>(&**m);
    if (work == nullptr) continue;
    uint32_t valid = 0;
    Status s = CatchAll("the attached producer", [&] { return Fill(*work, valid); });
    if (!s.ok()) {
      // Note [Attached producers], 3: the server writes this slot itself
      // once it reads ERROR, so what a failed Fill queued must land first.
      if (stream) (void)stream->Synchronize();
      Send(proto::Error{0, s.code(), s.message()});
      End(std::move(s));
      break;
    }
    proto::Done done{work->slot, work->first_seq,
                     std::vector<int64_t>(indices.begin(), indices.begin() + valid)};
    Send(done);
    batches += 1;
    samples += valid;
  }
  if (stream) (void)stream->Synchronize();  // nothing of ours is in flight after BYE
  if (stop && Send(proto::Bye{})) {
    // Until the server says the ring is free (work sent meanwhile is the
    // server's again: it writes that slot itself once it reads BYE).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < deadline) {
      std::optional<Result<proto::Message>> m = Receive(std::chrono::milliseconds(100));
      if (m && (!m->ok() || !std::holds_alternative<proto::Work>(**m))) break;
    }
  }
  running = false;
}

void AttachedProducer::Impl::Stop() {
  stop = true;
  if (thread.joinable()) thread.join();
}

Result<std::unique_ptr<AttachedProducer>> AttachedProducer::Start(
    std::string_view server_name, uint32_t ring, std::chrono::milliseconds timeout) {
  return CatchAll("AttachedProducer::Start", [&]() -> Result<std::unique_ptr<AttachedProducer>> {
    BATCHCAST_ASSIGN_OR_RETURN(const std::string endpoint, AttachEndpoint(server_name, ring));
    struct stat st {};
    const std::string path = IpcPath(endpoint);
    if (stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      return NotFoundError("server '" + std::string(server_name) +
                           "' has no attach socket for ring " + std::to_string(ring) +
                           " here: it is not running on this node, has no such ring, serves an "
                           "external producer, or runs with --no-attach");
    }
    auto impl = std::make_unique<Impl>();
    impl->ring = ring;
    impl->ring_name = std::to_string(ring);
    impl->socket.emplace(impl->context, zmq::socket_type::dealer);
    impl->socket->set(zmq::sockopt::linger, 1000);
    impl->socket->set(zmq::sockopt::maxmsgsize, int64_t{64} << 20);
    impl->socket->connect(endpoint);
    if (!impl->Send(proto::Attach{ring, static_cast<uint32_t>(getpid())})) {
      return UnavailableError("cannot reach the attach socket " + endpoint);
    }
    std::optional<Result<proto::Message>> answer = impl->Receive(timeout);
    if (!answer) {
      return DeadlineExceededError("server '" + std::string(server_name) +
                                   "' did not answer an "
                                   "attach to ring " +
                                   std::to_string(ring) + " within " +
                                   std::to_string(timeout.count()) + " ms");
    }
    BATCHCAST_RETURN_IF_ERROR(answer->status());
    if (const auto* e = std::get_if<proto::Error>(&**answer)) return proto::ToStatus(*e);
    const auto* attached = std::get_if<proto::Attached>(&**answer);
    if (attached == nullptr)
      return InternalError("the server answered ATTACH with another message");
    Status s = impl->Prepare(*attached);
    if (!s.ok()) {
      impl->Send(proto::Error{0, s.code(), s.message()});
      return s.WithContext("attaching to ring " + std::to_string(ring) + " of '" +
                           std::string(server_name) + "'");
    }
    if (impl->device >= 0) impl->ring_name = DeviceName(Device::Cuda(impl->device));
    impl->Send(proto::Ready{});
    impl->running = true;
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] {
      SetThreadName("bc-attached");
      raw->Run();
    });
    BC_LOG_INFO("decoding ring {} of '{}' in this process", impl->ring_name,
                std::string(server_name));
    return std::unique_ptr<AttachedProducer>(new AttachedProducer(std::move(impl)));
  });
}

AttachedProducer::AttachedProducer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AttachedProducer::~AttachedProducer() { Stop(); }
void AttachedProducer::Stop() { impl_->Stop(); }
bool AttachedProducer::running() const { return impl_->running; }
Status AttachedProducer::status() const {
  MutexLock l(&impl_->mu);
  return impl_->status;
}
uint64_t AttachedProducer::batches() const { return impl_->batches; }
uint64_t AttachedProducer::samples() const { return impl_->samples; }
int AttachedProducer::device() const { return impl_->device; }

}  // namespace batchcast
