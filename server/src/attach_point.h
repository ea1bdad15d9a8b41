// AttachPoint: one ring's attach socket, where another process on the node
// may take over the decode of that ring (batchcast::AttachedProducer,
// server/include/batchcast/server/attached_producer.h).
//
// Note [Attached producers]
// Without MPS a GPU time-slices the CUDA contexts of different processes, so
// a server process decoding on GPU r slows the trainer on GPU r more than
// the same decode run inside the trainer's own context would. A trainer's
// process may therefore *hold* ring r: its AttachedProducer builds the same
// source as the server's ring r (from the server's source options, checked
// against the dataset's size and listing digest), maps the ring's memory
// (the WELCOME allocations: host shared memory or CUDA IPC) and fills the
// slots the Scheduler grants to ring r. What the stream is does not change:
// the Scheduler places and grants exactly as before, and a slot's samples
// are a function of (seed, epoch, index) wherever they are made.
//  1. The ring's producer thread (ProducerLoop) keeps its place: it still
//     asks the Scheduler for ring r's work (BeginWork), and when a holder is
//     attached it hands the granted slot over (WORK: slot, seqs, dataset
//     indices, read-ahead hint) instead of filling it, and waits for DONE.
//  2. The holder fills the slot on its own stream and, for a device ring,
//     records the slot's interprocess event on that stream before it sends
//     DONE (an event opened from its IPC handle may be recorded by the
//     importing process). So Note [Device ring ordering] (slot_publisher.h)
//     holds as for the server's own writes: the producer thread commits the
//     slot (Scheduler::Commit) only after DONE, and consumers wait on the
//     event.
//  3. A holder that leaves (BYE), fails (ERROR) or dies (its pid, read from
//     the socket's peer credentials, is gone) is detached, and the
//     producer thread writes the slot it held itself, with the ring's own
//     source: the grant is still this thread's, so nothing is placed again
//     and no sample is lost or repeated. A holder that is alive but does
//     not answer is waited for, never written under (its late writes would
//     land in a slot that may hold a newer batch by then); the log names it
//     every `work_timeout`. For the same reason a holder whose fill failed
//     waits for its stream before it sends ERROR.
//  4. One holder per ring; another ATTACH gets an ERROR naming the holder.
//     A tar-shard dataset is refused (its shards are read once, through one
//     reader the rings share: MakeSources).
// The socket is polled by the producer thread between batches (and while it
// waits for work, every 100 ms), so ATTACH is answered within about 100 ms.
//
// Thread-safety: the producer thread of the ring alone calls Poll and
// Delegate; Cancel and the stats accessors may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "batchcast/core/status.h"
#include "batchcast/sources/source.h"
#include "core/src/protocol.h"
#include "scheduler.h"

namespace batchcast {

struct AttachPointOptions {
  std::string endpoint;  // ipc:// (AttachEndpoint, core/src/runtime_dir.h)
  uint32_t ring = 0;
  std::string ring_name;     // "cuda:1", "host ring 1": for logs
  proto::Attached attached;  // the answer to every ATTACH
  std::string refusal;       // not empty: every ATTACH gets this error instead
  // Called for each ATTACH answered: where the dataset's scan is saved
  // (proto::Attached::listing; Note [Shared listing]), "" for none.
  std::function<std::string()> listing;
  std::chrono::milliseconds work_timeout{60000};  // between warnings of a silent holder
};

class AttachPoint {
 public:
  static Result<std::unique_ptr<AttachPoint>> Bind(AttachPointOptions options);
  ~AttachPoint();

  // Answers what came on the socket: ATTACH, READY, BYE, ERROR; detaches a
  // holder whose process is gone. Never blocks.
  void Poll();
  // Whether a holder is attached and ready for work.
  bool attached() const { return holder_ready_; }
  // Hands the slot of `grant` (producer epoch `epoch`) to the holder and
  // waits for it: the number of samples written (grant.indices rewritten to
  // name them, as Source::FillBatch does) and in `dropped` the granted
  // samples it left out, or nullopt when there is no holder or it was
  // detached meanwhile (the caller then writes the slot). Cancelled once
  // Cancel() was called.
  Result<std::optional<uint32_t>> Delegate(const SlotGrant& grant, uint32_t epoch,
                                           const ReadAhead& next, std::vector<int64_t>& dropped);
  // Makes a waiting or later Delegate return Cancelled (the server stops).
  void Cancel() { cancelled_ = true; }

  // For stats: the holder's pid (0: none) and the batches it wrote.
  uint32_t holder_pid() const { return stats_pid_; }
  uint64_t holder_batches() const { return stats_batches_; }
  uint64_t detached_count() const { return stats_detached_; }

 private:
  explicit AttachPoint(AttachPointOptions options);
  struct Received {
    std::string identity;
    proto::Message message;
    uint32_t peer_pid = 0;  // from the socket's peer credentials, 0 if unknown
  };
  // The next message, waiting up to `wait` (0: none); nullopt when none came.
  std::optional<Received> Receive(std::chrono::milliseconds wait);
  void Send(const std::string& identity, const proto::Message& message);
  // Handles a message that is not the DONE being waited for.
  void Handle(const Received& r);
  void Detach(const std::string& why, bool warn);
  bool HolderAlive() const;

  const AttachPointOptions options_;
  zmq::context_t context_;
  std::optional<zmq::socket_t> socket_;
  std::string send_buffer_;
  // The holder (attached or between ATTACHED and READY).
  std::optional<std::string> holder_;
  uint32_t holder_pid_ = 0;
  bool holder_ready_ = false;
  std::atomic<bool> cancelled_{false};
  std::atomic<uint32_t> stats_pid_{0};
  std::atomic<uint64_t> stats_batches_{0};
  std::atomic<uint64_t> stats_detached_{0};
};

}  // namespace batchcast
