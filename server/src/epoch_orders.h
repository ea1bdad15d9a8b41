// EpochOrders: the sampler's order of each producer epoch, computed once and
// shared by the producers of every ring (Note [Placement], scheduler.h): each
// producer is handed a batch of seqs by the Scheduler and reads its dataset
// indices here. It also says when an epoch ended with no sample at all (every
// file dropped: DataLoss, never an empty stream).
//
// Thread-safety: thread-safe (one mutex; an epoch's order is computed under
// it, so a producer asking for the same epoch waits for that one computation).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "batchcast/core/status.h"
#include "core/src/mutex.h"
#include "core/src/sampler.h"

namespace batchcast {

class EpochOrders {
 public:
  // `epochs` = 0: no end.
  EpochOrders(Sampler sampler, uint64_t epochs);

  uint64_t epoch_len() const { return sampler_.epoch_len(); }
  uint64_t epochs() const { return epochs_; }
  // The order of producer epoch `epoch` (computed on first use). At most
  // kKept orders are kept (the one farthest from `epoch` goes): the shared
  // stream's current and next, and a resume lane's (Note [Resume]) current
  // and next.
  std::shared_ptr<const std::vector<int64_t>> Order(uint64_t epoch) BC_EXCLUDES(mu_);
  // The seqs [offset, offset + seqs) of `epoch` (offsets in the epoch) were
  // written with `valid` samples among them. DataLoss once each of the
  // epoch's seqs was written and none was a sample. A seq written again (the
  // stream moved back to a resumed place: Note [Resume]) counts once; of more
  // than kKept epochs begun and not done, the farthest from the one written
  // is forgotten (the stream moved away from it).
  Status Record(uint64_t epoch, uint64_t offset, uint64_t seqs, uint64_t valid) BC_EXCLUDES(mu_);

 private:
  static constexpr size_t kKept = 4;
  const Sampler sampler_;
  const uint64_t epochs_;
  Mutex mu_;
  std::map<uint64_t, std::shared_ptr<const std::vector<int64_t>>> orders_ BC_GUARDED_BY(mu_);
  struct Written {
    std::vector<bool> seq;  // by offset in the epoch
    uint64_t distinct = 0;  // seqs written at least once
    uint64_t samples = 0;
  };
  std::map<uint64_t, Written> written_ BC_GUARDED_BY(mu_);
};

}  // namespace batchcast
