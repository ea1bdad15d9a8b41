// Scheduler: the state shared by the producer and the control loop: the ring's
// slot table, every consumer's window position and leases, and the rules that
// decide when a slot may be rewritten and what a consumer's next batch is.
// Time and process liveness come from a SchedulerEnv, so every rule below is
// unit-tested with a fake clock (tests/server/scheduler_test.cc).
//
// Note [Leases]
// A slot may be rewritten only when (a) no lease pins it and (b) every attached
// consumer's cursor (the next seq it will be served) is past the slot's last
// sample, and no group needs it (its frontier, or a chunk a rank was not
// served yet: Note [Consumer groups]). Of the slots that may be rewritten the
// oldest is. A lease is taken when a BATCH is sent and ends on RELEASE or when the
// consumer is removed (BYE with no leases left, pid gone, heartbeats stopped).
// Eviction and BYE only *detach* a consumer (it loses its window position);
// its leases stay until released or until it dies, so memory that a live
// consumer may still read is never overwritten. The client releases on Batch
// destruction (Note [Client leases], client/src/lease_ledger.h) and, for gathered batches, right
// after the copy. The lag policies move cursors, never leases. Bounds: a consumer holding
// max_leases unreleased batches has its next NEXT refused (ResourceExhausted); one whose own leases
// pin every slot while it waits for data that is not written yet is answered ResourceExhausted
// after it stayed so for 1 s (releases ride on later messages, so a shorter state is normal).
//
// Note [Consumer epochs]
// Consumer epoch k covers seqs [start + k*L, start + (k+1)*L) clipped to the
// stream end, where L = epoch_len and `start` is fixed at join (an epoch start
// for join=next_epoch, the first seq of the newest unbroken run of batches in
// the ring for join=immediate). Some seqs may be holes (dropped files, Note
// [Holes] in slot_table.h). A NEXT is answered with the next B samples of the
// epoch, holes skipped, once they are published; when the epoch's end is
// published and fewer than B samples are left, with the rest (a short batch)
// or, with drop_last or when none is left, END_OF_EPOCH. With drop_last a
// remainder known to hold fewer than B samples (fewer than B seqs, or all
// published) is passed over at once, so it pins nothing; the cursor passes
// over holes at once too. So an epoch with d dropped samples has at most d
// batches fewer than announced (batches_per_epoch stays floor(L/B) or
// ceil(L/B)). A batch never crosses the epoch end. If the ring is full of
// seqs a waiting consumer still needs and holds fewer than B of its samples
// (more than half of them holes), only that consumer can move: it gets the
// samples there as a short batch, or with drop_last passes over them
// (counted in its stats as samples_passed_over). A skip jump may move the
// cursor over epoch ends: each one crossed is still reported as
// END_OF_EPOCH. An epoch that would start at or after the stream end does
// not exist: NEXT then gets OutOfRange. (Arithmetic: consumer_cursor.h.)
//
// Note [Consumer groups]
// Consumers that name a group (HELLO group, rank, world_size W; docs/semantics.md
// "Groups, several GPUs, several nodes") split the stream; other groups and
// ungrouped consumers each get all of it. A group reads like one consumer of
// batch W*B with drop_last (its *frontier*, consumer_group.h): group epoch k
// is seqs [start + kL, start + (k+1)L), holes skipped, and is cut into
// *rounds* of W*B samples; round r is cut into W chunks of B consecutive
// samples and rank i gets chunk i (so chunk k of the epoch goes to rank
// k mod W). A round is handed out only once all its W*B samples are
// published, so every rank gets the same rounds: R = floor(L' / (W*B))
// batches per epoch (WELCOME's batches_per_epoch), where L' is the smallest
// shard's epoch length when the server serves one of several shards (so that
// every rank of every node gets the same count; the larger shards' extra
// samples are dropped like the remainder). The last incomplete round of each
// epoch is dropped for all ranks (drop_last is required); with holes an
// epoch holds fewer samples, so a rank may get fewer than R batches, but
// never one its peers do not get. The frontier determines rounds and
// END_OF_EPOCH markers (*entries*) as ranks ask for them; every rank gets
// the same entries in the same order.
// Forming: the first rank's HELLO creates the group: its start is that
// rank's join point (immediate or next_epoch; every rank must use the same
// join, batch size and world size, else InvalidArgument) and it pins the ring
// from there, so no sample is lost while the other ranks connect; ranks may
// read as they join. If not every rank joined within group_timeout, the
// joined ranks get DeadlineExceeded naming the missing ranks. A rank that is
// already connected is refused (after checking that its previous process is
// alive). A forming group is exempt from the lag policies.
// Pins (Note [Leases] (b)): the frontier pins everything from it on; a chunk
// pins its seqs until its rank was served it. A rank may be at most
// max_ahead() entries (its prefetch + 2) ahead of its slowest peer, so a
// stalled or late rank pins at most that many of its chunks.
// Departure: a rank that leaves (BYE, eviction, death) ends the group for new
// joins; its peers still get every entry it got, then, instead of a batch it
// did not get, Cancelled ("group 'g' is broken: rank r ... left"): a DDP job
// cannot go on without a rank, and its peers fail clearly instead of hanging.
// A HELLO naming an ended group starts a new group of that name. Lag
// policies act on whole groups: `skip` moves the frontier to the head (each
// rank still gets the rounds its peers got, so counts stay equal), `evict`
// evicts every rank. Other consumers and groups are never held up by a group
// for longer than the lag policy (or group_timeout while it forms) allows.
//
// Note [Unconfirmed consumers]
// A consumer is *unconfirmed* from its HELLO until it says anything else
// (the client sends a HEARTBEAT as soon as it has its WELCOME). An
// unconfirmed consumer pins nothing: its cursor (or, in a group whose ranks
// are all unconfirmed, the group's frontier) does not hold the producer
// back, it does not count for min_consumers, and it is no laggard for the
// lag policy. So HELLOs that are never followed by anything (a flood, a
// crashed client) cannot stall the stream while they wait out their
// probation (Note [Peer limits], peer_guard.h). When it is confirmed, a
// consumer that has been served nothing yet whose start the producer has
// overwritten meanwhile starts again from the join point of that moment
// (ConsumerCursor::JoinStart); a group likewise, if nothing was determined
// for it yet. It got nothing before, so nothing it saw changes.
//
// Note [Lag policy]
// The producer is *blocked* from its first attempt that found no writable
// slot (TryBeginBatch) until it gets one, or until it pauses because nobody
// reads the stream (Note [Producer start and stream end]): a consumer that
// joins after a pause is not charged for the wait before it. When it has been
// blocked for lag_timeout, Tick applies the policy to every attached consumer
// whose cursor pins the oldest unleased slot: `skip` moves its cursor to the
// head of the stream and marks it skipping (its cursor pins nothing until its
// next NEXT; then, if the data it jumped to was overwritten meanwhile, it
// moves to the join floor), counting the samples passed over; `evict` sends
// it ResourceExhausted ("evicted ...") and detaches it. The clock restarts,
// so a producer that stays blocked applies the policy again every
// lag_timeout. `block` never applies anything. A group is a laggard when it
// needs the oldest unleased slot; the policy then acts on the whole group
// (Note [Consumer groups]). A group that is still forming is exempt under
// `block` (it may hold the producer until group_timeout); under `skip` and
// `evict` it holds it at most lag_timeout, then its frontier skips to the
// head as under `skip` (its ranks lose the same samples, so counts stay
// equal; it is not evicted, since waiting for its ranks is not its fault).
// A broken group (a rank left) serves no round beyond its leaver's, so under
// `skip` and `evict` it ends instead: its ranks get the Cancelled they would
// get after their last batch (a rank waiting in a collective for its dead
// peer asks for nothing, and would hold everyone up until it gave up).
// A ring still writing the stream's next batch, the batches after it filling
// the window (they publish in order), holds the producer up by itself: no
// consumer pins an unleased slot then, so none is skipped or evicted, and
// the log names the ring.
//
// Note [Producer start and stream end]
// The producer writes its first batch once min_consumers consumers are
// attached, and afterwards only while at least one is (it pauses rather than
// overwrite the ring for nobody). The stream ends at config.stream_end or
// where EndStream cuts it. The server is finished once the stream ended, no
// consumer is left, and the stream was either published to its end or read
// to its end by a consumer that left (with drop_last the last samples may
// never be written, since the producer pauses with nobody attached).
//
// Note [Placement]
// A server may hold several rings (one per GPU, Note [Rings per GPU] in
// device_list.h) and still has one Scheduler: one slot table of `window`
// slots, whose every slot index exists on every ring's memory; the copy that
// is valid is the one on the ring the batch was *placed* on (SlotTable::Slot::
// ring, a Segment's `ring`). So counts, groups, leases, lag policies and
// min/max consumers are the server's, and each sample of the stream is
// written once, on one ring. Each consumer has a *home ring* (its HELLO
// device's, RingForConsumer): it reads a batch placed there zero-copy and
// one placed elsewhere through a device-to-device copy (client/src/batch.cc).
// One producer per ring asks what to write next (BeginWork(ring)); the
// Scheduler places the stream's next producer batch when asked:
//  - candidates: the rings that are some attached consumer's home (every
//    ring while none is), so decode follows readers: with readers only on
//    GPU 0, GPU 0 decodes everything;
//  - a live group whose ranks sit on more than one ring: the rank that reads
//    the batch's first seq is predicted from the group's round arithmetic
//    (a round is world_size x B samples from the group's epoch start; rank =
//    offset in the round / B) and the batch goes to that rank's home ring
//    (rank r's that has not joined yet is taken to be ring r mod rings: one
//    rank per GPU, and the producer may start before every rank joined).
//    Holes shift the real chunks, so the prediction may miss: a miss costs a
//    copy, never correctness. With one rank per GPU and B equal to the
//    producer batch (and no holes) every rank reads only its own ring;
//  - otherwise, with Placement::kRoundRobin, round robin over the
//    candidates (the batch number mod their count), so G single-GPU jobs
//    each decode a G-th of the stream; the node then goes at its slowest
//    ring's pace, since each ring waits for its turn. With
//    Placement::kDemand (the default) the rings' shares follow their
//    speeds: a plan, a cycle of kPlanBatchesPerRing batches per candidate
//    in which each ring's share is its measured rate over theirs (at least
//    one batch; equal shares until every candidate committed a batch), its
//    batches spread evenly (smooth weighted round robin, so equal shares
//    are the round robin). A ring's rate is one over its mean batch time,
//    from begin to commit (an exponential mean), which waiting for its turn
//    does not count. The plan is drawn again only at a cycle's end, and only
//    when a ring's planned share lies kPlanHysteresis batches or more from
//    the share its rate gives, unrounded (noise in the times would redraw
//    it all the time), or at once when the candidates change. Against the
//    unrounded share, not the rounded one: a plan of 7 and 9 drawn while
//    one ring was faster goes back to 8 and 8 once the rates are equal
//    again, where a move of two rounded batches never came, and one of two
//    trainers decoding their own rings (attached producers) was left with
//    9/16 of the decode.
// The producer of the chosen ring begins the batch; the others wait for
// theirs. Commits may come out of order (the slot table publishes in order),
// begins may not: a ring late to its batch would hold back the begins of the
// rings after it, even with slots free, so busy rings get their batches begun
// ahead (Note [Begun ahead]). How long each ring's producer still waited for
// its turn is its stats' turn_wait_s (RingWaitsForTurnLocked).
// A producer's read-ahead hint is the batch predicted to be its ring's next
// (PredictNextBatch), not the stream's next, which is mostly another ring's.
// The prediction follows the plan, so it comes true unless readers come or
// go, a group's prediction moves, or the plan is drawn again before that
// batch: then a wrong hint costs a read (the ring's read_ahead_misses). By
// demand a shard reader that the rings share (Note [Shard reads]) keeps a
// copy of what is read ahead (ReadAhead::guess, SampleReader::Peek) for
// whichever ring gets the batch, so that ring need not open the shard again.
//
// Note [Begun ahead]
// The stream's batches are begun in its order (SlotTable::Begin takes the
// next seqs). Were each begun only when its ring's producer asks, a ring
// back late from its last batch would hold back every ring after it, each
// idle with a slot free: on the fake clock, four rings of equal speed whose
// batch times varied by up to 40 % wrote about a tenth less than four rings
// on their own. So when a ring's producer asks, the stream's next batches are
// begun at once for the rings they are placed on that are busy writing and
// have none begun ahead, in order, until one is placed on the asking ring or
// on a ring not busy (it begins its own when it asks), or no slot is free
// (BeginAheadLocked). A ring takes the batch begun for it before anything
// else, and its read-ahead hint is that batch (PredictNextBatch); the
// producers are woken when batches are begun ahead and when a ring takes its
// own (busy then, its next batch may be begun by a ring waiting behind it).
// One per ring: a slow ring holds at most two slots being written. Not with
// one ring (nothing to wait for), nor while the resume lane has an owner
// (the lane takes spare capacity, Note [Resume]), nor where the rings read
// one sequential reader (SchedulerConfig::begin_ahead false: tar shards,
// Note [Shard reads]). There the asking ring would read its own next batch
// ahead before the busy ring read the one begun for it: the reader would see
// the stream out of order and, across an epoch's end, hold samples whose
// reads for both epochs were done, for nobody.
//
// Why a plan and not the first ring that asks: a ring reads its next batch
// ahead while it writes one, so it must know which batch that is. With the
// first asker taking the batch, the rings' order of asking decided it: on
// four GPUs of equal speed most hints missed, and the node decoded less
// than by round robin (docs/design.md, "GPU path"). Why the plan is the
// default: rings of one kind on one node differ in speed from run to run,
// and by round robin every ring waits for the slowest (the same section).
// A slower ring's batches take longer, so it must begin them further ahead
// of their turn: with too few slots the others fill the window and wait
// for its batch. Hence the default window of 4 slots per ring
// (ServerOptions::window_for; PlacementTest.ByDemandASlowRingNeedsSlotsAhead).
// A batch of a resume lane (Note [Resume]) goes to its owner's home ring (a
// group's: that of the rank predicted to read it), written by that ring's
// producer when it has nothing of the shared stream to write.
//
// Note [Resume]
// A consumer's place is a few integers (batchcast::ConsumerPosition, client
// consumer.h): its epoch k, the batches it got in it (a group's rounds), the
// seq its epoch starts at, the seq it continues from, its skipped count, its
// group's world size. Seqs are absolute: seq s is sample EpochOrder(s/L)[s%L]
// of producer epoch s/L (producer epochs span L seqs, Note [Holes]) and a
// sample's pixels are a function of (seed, epoch, index), so a place means
// the same samples on every server with the same stream identity
// (core/src/stream_identity.h: dataset listing, shard, seed, shuffle,
// transform, fields, normalization...; WELCOME carries it, a place records
// it). RESUME, before the consumer's first NEXT, puts its cursor (a group's
// frontier) exactly there: the batches that follow are those it would have
// got (another batch size continues from the same sample in batches of the
// new size; a group's interrupted epoch then holds the rounds of the new size
// left after the ranks' saved batches, counted up: ConsumerGroup::Resume).
// Refused, naming what is wrong, and nothing moves: another
// identity, another world size, a place outside its epoch, a rank whose
// group resumed at another place (the first rank's RESUME places the group,
// every later rank must bring the same place; a group that already cut a
// round cannot be moved), or a place the server cannot serve (below).
// Where a resumed reader (consumer or group) reads:
// - *In the stream*: its place lies in the ring's newest unbroken run
//   (JoinFloor) or in the producer batch written next: it reads the shared
//   stream from there like any reader (waiting if ahead).
// - *Outside* (behind the ring: a job restarted while the others went on;
//   ahead of it: a server restarted with its jobs): when nothing else pins
//   the shared stream (no other attached reader, no slot being written or
//   leased), the shared stream *moves* there (SlotTable::Restart at the
//   producer batch of the lowest such place), so a restarted server's stream
//   starts where its jobs resume. Otherwise the reader waits in line for
//   the *lane* (lane.h): resume_slots ring slots after the window's, which
//   the built-in producer fills with the producer batches of the stream from
//   the owner's place on (the same seqs as the shared stream's, so the same
//   samples), from spare capacity only: when the shared stream may not be
//   written (no slot free: the producer would wait; nobody reads it; it
//   ended), plus, when the producer never has to wait, one lane batch after
//   every kLaneShare shared ones, so a catch-up always ends (the only cost
//   the others can see: at most 1/(kLaneShare + 1) of the producer's
//   batches, only then). The lane pins no shared slot, so the window, the
//   lag policy and the other readers are as without it; readers in line pin
//   nothing at all. A lane owner's batch (a group's round) must fit in the
//   lane at once (Lane::SlotsFor), else its RESUME is refused naming the
//   slots it needs; one accepted because the stream would move, which others
//   began reading before it could (a slot still leased), gets that refusal
//   as an error then (ReviewResumersLocked), not a wait while they read.
// - *Merge*: once the lane's next seq q lies in the shared run (it caught up
//   from behind, or the shared stream reached it from below), merge_at = q
//   and the owner pins the shared stream from q (Note [Leases] (b)), so q
//   stays; the lane writes on only while the owner's next batch (round) is
//   not whole in it; when the owner's cursor passes q it reads the shared
//   stream and the lane goes to the next in line (once its slots are
//   unleased). A batch is never cut across the lane and the ring: a group's
//   rounds cut from the lane are served from it until every rank has them.
// External producers (not config.replay) write the next seqs in order: the
// stream never moves and there is no lane, so a place behind the ring is
// refused and one ahead waits for the stream.
//
// Thread-safety: every method locks mu_. BeginBatch blocks its caller (the
// producer thread, or an external producer's) on a condition variable; every
// other method is non-blocking. Time-based rules (Note [Lag policy], the
// hoarding answer, liveness) run only in Tick, which the control thread calls
// every 100 ms. Replies are queued in an outbox drained by the control
// thread; `wakeup` is called (without the lock held) when a producer-side
// call (Commit, EndStream) queued something.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/server/server_options.h"
#include "consumer_cursor.h"
#include "consumer_group.h"
#include "core/src/mutex.h"
#include "core/src/protocol.h"
#include "scheduler_env.h"
#include "slot_table.h"

namespace batchcast {

// Why a consumer that sent BYE was detached (what its group's peers are told).
inline constexpr std::string_view kSaidGoodbye = "said goodbye";

struct SchedulerConfig {
  uint32_t window = 8;
  uint32_t batch_size = 64;
  uint64_t epoch_len = 0;
  uint64_t stream_end = UINT64_MAX;  // epochs * epoch_len, or unknown
  LagPolicy lag_policy = LagPolicy::kBlock;
  std::chrono::milliseconds lag_timeout{1000};
  std::chrono::milliseconds heartbeat_timeout{2000};
  uint32_t min_consumers = 1;
  uint32_t max_consumers = 256;
  uint32_t max_leases = 16;
  // Note [Consumer groups]: how long a group may take to form, and the
  // epoch length its rounds per epoch come from (the smallest shard's; 0 =
  // epoch_len).
  std::chrono::milliseconds group_timeout{60000};
  uint64_t group_epoch_len = 0;
  // Note [Placement]: the rings the batches are placed on, and the bytes of
  // one sample over every field (for the stats' peer_bytes).
  uint32_t rings = 1;
  uint64_t sample_bytes = 0;
  // Note [Resume]: the stream's identity (stream_identity.h; WELCOME's);
  // whether the producer writes what BeginWork says (the built-in one: it
  // can write any seq, so the stream may move and the lane be filled) rather
  // than the next seqs in order (an external producer); and the lane's slots
  // (numbered from `window`; 0: no lane).
  std::string stream;
  bool replay = false;
  uint32_t resume_slots = 0;
  // Note [Placement]: who writes the stream's next batch.
  Placement placement = Placement::kDemand;
  // Note [Begun ahead]: whether busy rings get their next batches begun
  // ahead; false where the rings read one sequential reader (tar shards).
  bool begin_ahead = true;
};

// A reply for the control thread to send to the peer `identity`.
struct Outgoing {
  std::string identity;
  proto::Message message;
};

class Scheduler {
 public:
  // A consumer whose own leases pin every slot while it waits is answered
  // with an error after this long (Note [Leases]).
  static constexpr std::chrono::milliseconds kHoardTimeout{1000};
  // Note [Resume]: while the lane wants a batch and the producer never has
  // to wait, one lane batch after every kLaneShare shared ones.
  static constexpr uint32_t kLaneShare = 16;
  // Note [Placement]: by demand, a cycle of the plan has this many batches
  // per ring, and a ring's planned share must lie kPlanHysteresis batches
  // or more from the share its measured rate gives to redraw the plan: a
  // plan a whole batch off is drawn again, also where the mean batch times
  // differ by the clock's rounding alone.
  static constexpr uint32_t kPlanBatchesPerRing = 8;
  static constexpr double kPlanHysteresis = 0.9;

  // `env` must outlive the Scheduler.
  explicit Scheduler(SchedulerConfig config, SchedulerEnv* env = SchedulerEnv::Default());

  // REQUIRES: called before any other thread uses the Scheduler.
  void set_wakeup(std::function<void()> wakeup) { wakeup_ = std::move(wakeup); }
  const SchedulerConfig& config() const { return config_; }

  // ---- consumer messages (control thread) ----
  struct Admission {
    uint64_t consumer_id = 0;
    uint64_t batches_per_epoch = 0;
    uint64_t start = 0;  // where its epoch 0 starts (a group rank: ConsumerGroup::welcome_start)
  };
  // Registers a consumer behind ZeroMQ identity `identity`. `same_host`: the
  // peer came over ipc://, so its HELLO pid is one of this machine's; if that
  // process exists now, Tick drops the consumer when it is gone.
  // InvalidArgument for bad HELLO values, ResourceExhausted when
  // max_consumers are connected. `home_ring`: the ring of its device (Note
  // [Placement]); REQUIRES: home_ring < config().rings.
  Result<Admission> AddConsumer(const std::string& identity, const proto::Hello& hello,
                                bool same_host, uint32_t home_ring = 0) BC_EXCLUDES(mu_);
  bool HasConsumer(const std::string& identity) const BC_EXCLUDES(mu_);
  // Queues a NEXT; answers it (and earlier ones) when it can.
  void Next(const std::string& identity, uint64_t request_id) BC_EXCLUDES(mu_);
  // Ends leases. With wake_producer=false the caller wakes it later
  // (WakeProducer), e.g. after sending a reply that should not wait for it.
  void Release(const std::string& identity, const std::vector<uint64_t>& lease_ids,
               bool wake_producer = true) BC_EXCLUDES(mu_);
  void WakeProducer() { producer_cv_.SignalAll(); }
  // Detaches the consumer; the leases in `kept_leases` stay, all others end.
  void Bye(const std::string& identity, const std::vector<uint64_t>& kept_leases) BC_EXCLUDES(mu_);
  // The consumer is alive (any message, heartbeats included).
  void Touch(const std::string& identity) BC_EXCLUDES(mu_);
  // Drops a consumer at once (its peer is unreachable). Counted as lost.
  void Remove(const std::string& identity, const std::string& reason) BC_EXCLUDES(mu_);
  // Note [Resume]: moves the consumer behind `identity`, which has asked for
  // nothing yet, to `place` (its group too, or checks that its group is
  // there). InvalidArgument naming what is wrong (another stream, another
  // world size, a place outside its epoch, a group resumed elsewhere, a
  // place the server cannot serve); the consumer then stays where it was.
  // NotFound for an unknown consumer.
  [[nodiscard]] Status Resume(const std::string& identity, const proto::Resume& place)
      BC_EXCLUDES(mu_);

  // ---- time (control thread, about every 100 ms) ----
  // Applies the time-based rules at env->Now(): drops consumers whose process
  // is gone or that sent nothing for heartbeat_timeout (their leases end),
  // applies Note [Lag policy], and answers NEXTs of consumers that pinned
  // every slot for kHoardTimeout.
  void Tick() BC_EXCLUDES(mu_);

  // ---- control thread ----
  // Identities of every connected consumer (for heartbeats).
  std::vector<std::string> Identities() const BC_EXCLUDES(mu_);
  // Moves the queued replies to `out` (which is cleared first).
  void TakeOutbox(std::vector<Outgoing>& out) BC_EXCLUDES(mu_);
  // True once the server may exit (Note [Producer start and stream end]).
  bool Finished() const BC_EXCLUDES(mu_);
  nlohmann::json Stats() const BC_EXCLUDES(mu_);

  // ---- producer (one thread at a time) ----
  // Begins the next batch, `indices.size()` samples of producer epoch
  // `epoch`, if a slot may be written now (Note [Leases], Note [Producer
  // start and stream end]); nullopt when the producer must wait (it is then
  // blocked, Note [Lag policy]). Errors: Cancelled after Stop(), OutOfRange
  // after the stream end, InvalidArgument (count, or a batch crossing an
  // epoch end).
  Result<std::optional<SlotGrant>> TryBeginBatch(uint32_t epoch, std::span<const int64_t> indices)
      BC_EXCLUDES(mu_);
  // TryBeginBatch, waiting until it grants or fails, or until `deadline` (a
  // real steady_clock time; DeadlineExceeded then).
  Result<SlotGrant> BeginBatch(uint32_t epoch, std::span<const int64_t> indices,
                               Clock::time_point deadline) BC_EXCLUDES(mu_);
  // The first seq of the next batch that would be placed on `ring` if the
  // readers stayed as they are (the producer's read-ahead hint: with several
  // rings the stream's next batch is mostly another ring's); nullopt when
  // none is in sight. Kept as the ring's hint: the shared batch it begins
  // next counts a miss when it is another (the stats' read_ahead_misses).
  std::optional<uint64_t> PredictNextBatch(uint32_t ring) BC_EXCLUDES(mu_);
  // Whether batches go by demand (Note [Placement]): several rings and
  // Placement::kDemand. When the plan is drawn again another ring may take
  // the batch PredictNextBatch named: a hint to read ahead without taking.
  bool PlacesByDemand() const {
    return config_.placement == Placement::kDemand && config_.rings > 1;
  }
  // Publishes a slot granted by (Try)BeginBatch: consumers may be served
  // from it. `valid`: its first `valid` seqs are samples, the rest holes
  // (Note [Holes]); nullopt: every seq is a sample. InvalidArgument when
  // `slot` is not being written or `valid` exceeds its seqs.
  [[nodiscard]] Status Commit(uint32_t slot, std::optional<uint32_t> valid = std::nullopt)
      BC_EXCLUDES(mu_);
  // Note [Resume]: the built-in producer's (config.replay) next batch for
  // ring `ring` (the producer of that ring, Note [Placement]): of the shared
  // stream (at its next seq, when placed on `ring`) or of the lane (`lane`,
  // when its owner's batch goes to `ring`). The
  // producer writes the dataset indices of seqs [grant.first_seq,
  // + grant.count) of producer epoch `epoch` into grant.indices, fills the
  // slot and commits it. nullopt when there is nothing to write now;
  // Cancelled after Stop().
  struct Work {
    SlotGrant grant;
    uint32_t epoch = 0;
    bool lane = false;
  };
  Result<std::optional<Work>> TryBeginWork(uint32_t ring = 0) BC_EXCLUDES(mu_);
  // TryBeginWork, waiting until it grants or fails, or until `deadline`.
  Result<Work> BeginWork(uint32_t ring, Clock::time_point deadline) BC_EXCLUDES(mu_);
  // How many times BeginWork and BeginBatch have begun to wait: lets a test
  // act once a producer thread waits, without sleeping.
  uint64_t ProducerWaitsForTesting() const BC_EXCLUDES(mu_);
  // No batch follows the ones begun so far.
  void EndStream() BC_EXCLUDES(mu_);
  // BeginBatch fails with Cancelled from now on (and wakes up if waiting).
  void Stop() BC_EXCLUDES(mu_);

 private:
  struct Consumer {
    explicit Consumer(ConsumerCursor c) : cursor(c) {}
    uint64_t id = 0;
    std::string identity;
    std::string name;
    int pid = 0;
    bool pid_visible = false;  // Tick probes `pid`
    JoinPolicy join = JoinPolicy::kImmediate;
    uint32_t home_ring = 0;  // Note [Placement]
    ConsumerCursor cursor;
    bool attached = true;  // false after BYE or eviction (Note [Leases])
    // Note [Unconfirmed consumers]: it said something since its HELLO.
    bool confirmed = false;
    // Skipped by the lag policy and not asking for data: its cursor pins
    // nothing until its next NEXT (Note [Lag policy]).
    bool skipping = false;
    std::deque<uint64_t> pending;  // NEXT request ids, answered in order
    std::unordered_map<uint64_t, std::vector<uint32_t>> leases;  // lease id -> slots
    uint64_t next_lease = 1;
    uint64_t batches = 0;
    uint64_t samples = 0;
    uint64_t passed_over = 0;  // drop_last samples passed over in a starved ring
    // docs/stats.md `wait_s`: since when a NEXT of it has been parked
    // without data (unset: none is), and the total of the waits that ended.
    std::optional<Clock::time_point> waiting_since;
    Clock::duration waited{0};
    // Since when its own leases pin every slot while it waits (Note [Leases]).
    std::optional<Clock::time_point> hoarding_since;
    Clock::time_point last_seen;
    Clock::time_point joined;
    // Note [Consumer groups]: its group (then `cursor` is unused: the
    // group's frontier and entries say what it gets) and rank.
    ConsumerGroup* group = nullptr;
    uint32_t rank = 0;
    // Note [Resume]: it sent a NEXT (RESUME comes before); RESUME placed it
    // (its start is never moved again); where it reads (a rank: its group's).
    bool asked = false;
    bool resumed = false;
    LaneState lane = LaneState::kNone;
    // Whether its cursor holds back the producer (Note [Leases] (b)); a
    // rank's pins are its group's, a reader of the lane's are Note [Resume]'s.
    bool PinsCursor() const {
      return attached && confirmed && group == nullptr && lane == LaneState::kNone &&
             !(skipping && pending.empty());
    }
  };

  Consumer* Find(const std::string& identity) BC_REQUIRES(mu_);
  // Finds the consumer behind `identity` and notes that it is alive (and
  // confirmed: Note [Unconfirmed consumers]); nullptr when there is none.
  Consumer* Heard(const std::string& identity) BC_REQUIRES(mu_);
  const Consumer* Find(const std::string& identity) const BC_REQUIRES(mu_);
  void Send(const Consumer& c, proto::Message m) BC_REQUIRES(mu_);
  // Answers the pending NEXTs of `c` in order, as far as they can be.
  void ServeLocked(Consumer& c) BC_REQUIRES(mu_);
  void ServeAllLocked() BC_REQUIRES(mu_);
  // Starts or ends `c`'s wait (Consumer::waiting_since) by whether a NEXT of
  // it is parked now; called whenever its pending NEXTs change.
  void UpdateWaitLocked(Consumer& c) BC_REQUIRES(mu_);
  // Answers the head NEXT of `c`; false when it must wait.
  bool ServeOneLocked(Consumer& c) BC_REQUIRES(mu_);
  // Moves `c`'s cursor over what needs no reading (Note [Consumer epochs]):
  // published holes, and with drop_last a remainder known to be short; `t`
  // is the table `c` reads (TableOf).
  void SettleLocked(Consumer& c, const SlotTable& t) BC_REQUIRES(mu_);
  // Every slot of `t` is ready and still needed by `c`'s cursor, so nothing
  // but `c` moving lets the producer write (Note [Consumer epochs]).
  bool StarvedLocked(const Consumer& c, const SlotTable& t) const BC_REQUIRES(mu_);
  // For the head NEXT of `c`, which must wait for data in `t`: the error of
  // Note [Leases] once `c`'s own leases pinned every slot of `t` for
  // kHoardTimeout (true), else false (it waits).
  bool AnswerHoardingLocked(Consumer& c, const SlotTable& t) BC_REQUIRES(mu_);
  // True when `c` has pinned every slot of `t` with its own leases for
  // kHoardTimeout (Note [Leases]); tracks since when.
  bool HoardingTooLongLocked(Consumer& c, const SlotTable& t) BC_REQUIRES(mu_);
  // The batch fields of an answer to `c`'s head NEXT.
  struct BatchInfo {
    uint32_t epoch = 0;
    uint32_t step = 0;
    uint64_t skipped = 0;
    uint64_t epoch_start = 0;  // Note [Resume]
    uint64_t next_seq = 0;
  };
  // Leases from `t` and sends the next `n` samples from seq `from` as the
  // answer to `c`'s head NEXT.
  void SendBatchLocked(Consumer& c, SlotTable& t, uint64_t from, uint32_t n, const BatchInfo& info)
      BC_REQUIRES(mu_);
  // Answers `c`'s head NEXT with an error when it holds max_leases batches.
  bool RefuseOverLeasesLocked(Consumer& c) BC_REQUIRES(mu_);
  void DropLeasesLocked(Consumer& c) BC_REQUIRES(mu_);
  // Ends a lease on each of `slots` (shared or lane slots).
  void UnpinLocked(const std::vector<uint32_t>& slots) BC_REQUIRES(mu_);
  // Takes `c` off the stream (Note [Leases]); `why` for its group's peers.
  void DetachLocked(Consumer& c, const std::string& why) BC_REQUIRES(mu_);
  // Tells `c` `message` (an Error with `code` that ends its session) and
  // detaches it for that reason.
  void FailConsumerLocked(Consumer& c, StatusCode code, const std::string& message)
      BC_REQUIRES(mu_);

  // ---- groups (scheduler_groups.cc, Note [Consumer groups]) ----
  // The group a HELLO joins (found or created), or why it may not.
  Result<ConsumerGroup*> JoinGroupLocked(const proto::Hello& hello) BC_REQUIRES(mu_);
  // ServeOneLocked for a rank of a group.
  bool ServeRankLocked(Consumer& c) BC_REQUIRES(mu_);
  // `c` leaves its group (if it is still in it), for `why`.
  void LeaveGroupLocked(Consumer& c, const std::string& why) BC_REQUIRES(mu_);
  // Tells every rank still in `g` `message` (Error with `code`) and detaches
  // them; `g` may be gone afterwards.
  void FailGroupLocked(ConsumerGroup& g, StatusCode code, const std::string& message)
      BC_REQUIRES(mu_);
  // Fails the groups that did not form within group_timeout.
  void ExpireFormingGroupsLocked(Clock::time_point now) BC_REQUIRES(mu_);
  // Whether `g`'s frontier pins (not skipping, or a rank waits for data).
  bool FrontierPinsLocked(const ConsumerGroup& g) const BC_REQUIRES(mu_);
  // Note [Unconfirmed consumers]: whether some rank of `g` is confirmed.
  bool GroupConfirmedLocked(const ConsumerGroup& g) const BC_REQUIRES(mu_);
  // Moves `g`'s frontier over `target - frontier` seqs (the lag policy's
  // skip, or the bound on a forming group).
  void SkipGroupLocked(ConsumerGroup& g, uint64_t target, std::string_view why) BC_REQUIRES(mu_);
  // The consumer behind rank `rank` of `g` (nullptr if none).
  Consumer* RankConsumerLocked(const ConsumerGroup& g, uint32_t rank) BC_REQUIRES(mu_);
  const Consumer* RankConsumerLocked(const ConsumerGroup& g, uint32_t rank) const BC_REQUIRES(mu_);
  // Lag policy for a group that needs the oldest unleased slot (Note [Lag
  // policy]): a broken one ends.
  void ApplyLagPolicyToGroupLocked(ConsumerGroup& g, uint64_t target) BC_REQUIRES(mu_);
  // "rank 2 (consumer 7 'x', pid 12)".
  static std::string RankName(const Consumer& c);
  nlohmann::json GroupStatsLocked() const BC_REQUIRES(mu_);

  // ---- resume (scheduler_resume.cc, Note [Resume]) ----
  // The slots `c` reads: the lane's while it owns it, else the ring's.
  SlotTable& TableOf(const Consumer& c) BC_REQUIRES(mu_);
  // The shared stream holds, or writes next, the samples from `seq` on.
  bool InStreamLocked(uint64_t seq) const BC_REQUIRES(mu_);
  // The first seq of the shared stream's next batch, and its length.
  uint32_t NextSharedCountLocked() const BC_REQUIRES(mu_);
  // Why a reader of `samples` per batch (a round, in a group) at `seq`
  // cannot be served there ("" when it can: in the stream, or outside it
  // with a lane that holds its batches).
  // `reader` is the one asking (its own reading does not count).
  std::string UnservablePlaceLocked(uint64_t seq, uint64_t samples, const Lane::Owner& reader) const
      BC_REQUIRES(mu_);
  // Puts a resumed reader in the stream or in the lane's line (then tries
  // to give it the lane).
  void PlaceLocked(Consumer& c) BC_REQUIRES(mu_);
  void PlaceGroupLocked(ConsumerGroup& g) BC_REQUIRES(mu_);
  // The place (next seq) of a lane owner or a reader waiting for the lane.
  std::optional<uint64_t> PlaceOfLocked(const Lane::Owner& o) const BC_REQUIRES(mu_);
  // Sets where `o` reads.
  void SetLaneStateLocked(const Lane::Owner& o, LaneState state) BC_REQUIRES(mu_);
  // Jumps, merges, hands the lane on: true when a reader moved (then the
  // caller serves everyone and wakes the control thread).
  bool ReviewResumersLocked() BC_REQUIRES(mu_);
  // Moves the shared stream to the lowest place of the readers outside it
  // when nobody else reads it (Note [Resume]); true when it did.
  bool MoveStreamLocked() BC_REQUIRES(mu_);
  // Readers that pin the shared stream (consumers, groups, merging owners),
  // other than `except` (a consumer, or every rank of a group).
  bool SharedReadLocked(const Lane::Owner* except = nullptr) const BC_REQUIRES(mu_);
  // `o` reads the shared stream from now on, or left: the lane goes to the
  // next one waiting, once free.
  void LeaveLaneLocked(const Lane::Owner& o) BC_REQUIRES(mu_);
  // The lane owner reached its merge point: it reads the shared stream.
  bool MergeOwnerLocked() BC_REQUIRES(mu_);
  // What the shared stream needs no longer pinned from the lane owner:
  // once merging, it pins the shared stream from merge_at.
  std::optional<uint64_t> MergePinLocked() const BC_REQUIRES(mu_);
  // The lane's next batch, when the owner needs one and a lane slot may be
  // written.
  std::optional<Work> LaneWorkLocked(uint32_t ring) BC_REQUIRES(mu_);
  Result<std::optional<Work>> TryBeginWorkLocked(uint32_t ring) BC_REQUIRES(mu_);
  void RemoveLocked(const std::string& identity, const std::string& reason) BC_REQUIRES(mu_);
  void RemoveDeadLocked(Clock::time_point now) BC_REQUIRES(mu_);
  Result<std::optional<SlotGrant>> TryBeginLocked(uint32_t epoch, std::span<const int64_t> indices)
      BC_REQUIRES(mu_);
  // The slot the stream's next batch may be written into: none before
  // min_consumers joined (said once in the log when `log_wait`), none while
  // every slot is pinned (the producer is blocked from then on).
  std::optional<uint32_t> SharedSlotLocked(bool log_wait) BC_REQUIRES(mu_);
  // The bookkeeping of a batch of the stream begun (not the lane's).
  void BeganSharedLocked() BC_REQUIRES(mu_);
  // ---- placement (scheduler_placement.cc, Note [Placement]) ----
  // The ring of the stream's next batch (by demand, after PlanLocked).
  uint32_t PlaceNextLocked() BC_REQUIRES(mu_);
  // By demand: draws the plan over `candidates` (CandidateRingsLocked) again
  // when a cycle ended and the shares moved, or the candidates changed (Note
  // [Placement]); the shares of `candidates` in a cycle as their rates give
  // them, not rounded (kPlanBatchesPerRing each until every one has a
  // measured batch time).
  void PlanLocked(const std::vector<uint32_t>& candidates) BC_REQUIRES(mu_);
  std::vector<double> SharesLocked(const std::vector<uint32_t>& candidates) const BC_REQUIRES(mu_);
  // Ring `ring` began work (BeginWork) / committed it.
  void RingBusyLocked(uint32_t ring, bool busy) BC_REQUIRES(mu_);
  // Ring `ring`'s producer waits for its turn (`waits`) or not, as its last
  // BeginWork found (RingWork::turn_since).
  void RingWaitsForTurnLocked(uint32_t ring, bool waits) BC_REQUIRES(mu_);
  // PredictNextBatch's answer.
  std::optional<uint64_t> PredictLocked(uint32_t ring) const BC_REQUIRES(mu_);
  // Ring `ring`'s producer begins work: the shared batch from `shared_seq`
  // (its read-ahead hint came true or missed: RingWork::hint_misses), or the
  // lane's (nullopt: it read the lane's next ahead). Its wait for its turn
  // ends, and it is busy (RingBusyLocked).
  void RingBeginsLocked(uint32_t ring, std::optional<uint64_t> shared_seq) BC_REQUIRES(mu_);
  // Note [Begun ahead]: begins the stream's next batches for the busy rings
  // they are placed on, while ring `asking`'s producer asks for work.
  void BeginAheadLocked(uint32_t asking) BC_REQUIRES(mu_);
  // Begins the shared stream's next batch in slot `slot` (writable), placed
  // on `ring`.
  Work BeginSharedLocked(uint32_t slot, uint32_t ring) BC_REQUIRES(mu_);
  // Whether `ring` is among CandidateRingsLocked().
  bool IsCandidateLocked(uint32_t ring) const BC_REQUIRES(mu_);
  // The rings with readers (every ring while none has one), and the ring of
  // the batch from `seq` that is the stream's `batch`-th (from 0): its group
  // rank's, else by demand the plan's, else the round robin's over
  // `candidates`.
  std::vector<uint32_t> CandidateRingsLocked() const BC_REQUIRES(mu_);
  uint32_t PlaceAtLocked(uint64_t seq, uint64_t batch,
                         const std::vector<uint32_t>& candidates) const BC_REQUIRES(mu_);
  // The end of the producer batch that starts at `seq`: batch_size seqs, cut
  // at its producer epoch's end and at the stream end.
  uint64_t NextBatchEndLocked(uint64_t seq) const BC_REQUIRES(mu_);
  // The home ring of `rank` of `g`; for a rank that has not joined yet, ring
  // rank mod rings (Note [Placement]).
  uint32_t RankRingLocked(const ConsumerGroup& g, uint32_t rank) const BC_REQUIRES(mu_);
  // The home ring of the rank of a live group with ranks on several rings
  // that is predicted to read seq `seq`, if there is such a group.
  std::optional<uint32_t> GroupPlacementLocked(uint64_t seq) const BC_REQUIRES(mu_);
  // The same for group `g` alone.
  std::optional<uint32_t> GroupRingLocked(const ConsumerGroup& g, uint64_t seq) const
      BC_REQUIRES(mu_);
  // Counts a batch leased to `c` (its segments) in its home ring's stats.
  void CountReadLocked(const Consumer& c, std::span<const Segment> segments) BC_REQUIRES(mu_);
  nlohmann::json RingStatsLocked() const BC_REQUIRES(mu_);
  // Note [Producer start and stream end]: enough consumers are attached.
  bool MayWriteLocked() const BC_REQUIRES(mu_);
  std::optional<uint32_t> FindWritableSlotLocked() const BC_REQUIRES(mu_);
  void ApplyLagPolicyLocked(Clock::time_point now) BC_REQUIRES(mu_);
  void EndBlockedLocked(Clock::time_point now) BC_REQUIRES(mu_);
  uint64_t MinPinningCursor() const BC_REQUIRES(mu_);
  size_t AttachedCount() const BC_REQUIRES(mu_);
  void NotifyProducer() { producer_cv_.SignalAll(); }

  const SchedulerConfig config_;
  SchedulerEnv* const env_;
  std::function<void()> wakeup_;  // set before the threads start

  mutable Mutex mu_;
  CondVar producer_cv_;  // with mu_: the producer's wait in BeginBatch

  SlotTable slots_ BC_GUARDED_BY(mu_);
  uint64_t stream_end_ BC_GUARDED_BY(mu_);
  // Note [Resume]: the lane (none without resume slots or replay), the
  // readers waiting for it in order, and the shared batches written since
  // the lane's last one while it wanted one (kLaneShare).
  std::optional<Lane> lane_ BC_GUARDED_BY(mu_);
  std::deque<Lane::Owner> lane_line_ BC_GUARDED_BY(mu_);
  uint32_t shared_since_lane_ BC_GUARDED_BY(mu_) = 0;
  // ReviewResumersLocked queued replies on the producer's thread: wake the
  // control thread once the lock is released.
  bool wake_pending_ BC_GUARDED_BY(mu_) = false;
  uint64_t producer_waits_ BC_GUARDED_BY(mu_) = 0;  // ProducerWaitsForTesting
  uint64_t stream_moves_ BC_GUARDED_BY(mu_) = 0;
  bool started_ BC_GUARDED_BY(mu_) = false;          // the first batch was begun
  uint64_t departed_cursor_ BC_GUARDED_BY(mu_) = 0;  // the furthest cursor of a consumer that left
  bool stopped_ BC_GUARDED_BY(mu_) = false;
  // Note [Lag policy]: since when the producer has been blocked.
  std::optional<Clock::time_point> blocked_since_ BC_GUARDED_BY(mu_);
  bool warned_all_leased_ BC_GUARDED_BY(mu_) = false;
  bool warned_waiting_ BC_GUARDED_BY(mu_) = false;

  std::map<std::string, Consumer> consumers_ BC_GUARDED_BY(mu_);  // by identity
  // Note [Consumer groups]: every group some consumer is in, by id; the group
  // of each name that new ranks join (forming or running, not ended).
  std::map<uint64_t, std::unique_ptr<ConsumerGroup>> groups_ BC_GUARDED_BY(mu_);
  std::map<std::string, ConsumerGroup*> open_groups_ BC_GUARDED_BY(mu_);
  uint64_t next_group_id_ BC_GUARDED_BY(mu_) = 1;
  // Note [Placement]: producer batches begun so far (the round robin's
  // batch number), and what each ring wrote and its consumers read.
  uint64_t batches_begun_ BC_GUARDED_BY(mu_) = 0;
  struct RingCounts {
    uint64_t batches_written = 0;
    uint64_t samples_decoded = 0;     // samples (holes left out) committed to the ring
    uint64_t batches_local = 0;       // batches its consumers read zero-copy from it
    uint64_t batches_from_peers = 0;  // batches its consumers read (partly) from other rings
    uint64_t peer_bytes = 0;          // bytes those copies moved onto this ring's device
  };
  std::vector<RingCounts> ring_counts_ BC_GUARDED_BY(mu_);
  // When each ring began what it writes now (unset while it has nothing
  // begun: not busy, Note [Begun ahead]) and, by demand, its mean batch time
  // (zero until it committed one).
  // Every placement: since when the ring's producer waits for its turn (a
  // slot free, the stream's next batch another ring's; unset while it does
  // not) and how long it waited so (the stats' turn_wait_s); the read-ahead
  // hint it was given last (PredictNextBatch; unset once a batch was begun)
  // and how many shared batches it began that were not the hint's; the batch
  // begun for it while it was busy (Note [Begun ahead]).
  struct RingWork {
    std::optional<Clock::time_point> began_at;
    Clock::duration mean{0};
    std::optional<Clock::time_point> turn_since;
    Clock::duration turn_wait{0};
    std::optional<uint64_t> hint;
    uint64_t hint_misses = 0;
    std::optional<Work> ahead;
  };
  std::vector<RingWork> ring_work_ BC_GUARDED_BY(mu_);
  // By demand: batch `start` + i goes to order[i % order.size()] (a cycle,
  // in which each ring comes as often as its share) while the candidates are
  // `rings`; the batch at which the plan was last reviewed (Note
  // [Placement]).
  struct Plan {
    uint64_t start = 0;
    std::vector<uint32_t> order;
    std::vector<uint32_t> rings;
    std::optional<uint64_t> checked;
  };
  Plan plan_ BC_GUARDED_BY(mu_);
  uint64_t next_consumer_id_ BC_GUARDED_BY(mu_) = 1;
  std::vector<Outgoing> outbox_ BC_GUARDED_BY(mu_);

  // Stats.
  const Clock::time_point created_;
  uint64_t batches_written_ BC_GUARDED_BY(mu_) = 0;
  uint64_t consumers_evicted_ BC_GUARDED_BY(mu_) = 0;
  uint64_t consumers_lost_ BC_GUARDED_BY(mu_) = 0;
  uint64_t skip_events_ BC_GUARDED_BY(mu_) = 0;
  Clock::duration blocked_total_ BC_GUARDED_BY(mu_){0};
};

}  // namespace batchcast
