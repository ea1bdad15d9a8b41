#include "checked_reader.h"

#include <deque>
#include <string>

#include "tests/e2e/device_util.h"

namespace batchcast::stress {
namespace {

// A held batch and when to drop it.
struct Held {
  Batch batch;
  int64_t until_ms;
};

// Bytes of `batch` that differ from the formula, as a violation text ("" if none).
std::string ByteViolation(const Batch& batch, const char* when) {
  Result<int64_t> bad = testing::FormulaMismatches(batch, CudaStreamRef());
  if (!bad.ok()) return std::string("cannot read a batch ") + when + ": " + bad.status().ToString();
  if (*bad == 0) return "";
  return std::to_string(*bad) + " of " + std::to_string(batch.size()) +
         " samples differ from the synthetic formula " + when + " (batch at seq " +
         std::to_string(batch.first_seq()) + ")";
}

}  // namespace

Status ReadChecked(Consumer& consumer, const ConsumerOptions& consumer_options,
                   const CheckedReadOptions& options, Reporter& reporter) {
  EpochCheckerOptions co;
  co.dataset_size = options.dataset_size;
  co.sampler = options.sampler;
  co.batch_size = consumer_options.batch_size;
  co.drop_last = consumer_options.drop_last;
  co.join = consumer_options.join;
  co.batches_per_epoch = consumer.batches_per_epoch();
  Result<EpochChecker> checker = EpochChecker::Make(co);
  if (!checker.ok()) return checker.status();
  reporter.Connected(consumer.consumer_id(), consumer.batches_per_epoch());
  std::deque<Held> held;
  auto drop_held = [&](bool all) {
    const int64_t now = NowMs();
    while (!held.empty() && (all || held.front().until_ms <= now)) {
      if (std::string v = ByteViolation(held.front().batch, "while held"); !v.empty()) {
        reporter.Violation(v);
      }
      held.pop_front();
    }
  };
  int64_t read = 0;
  while (options.max_batches < 0 || read < options.max_batches) {
    if (options.stop != nullptr && options.stop->load()) break;
    drop_held(false);
    Result<Batch> batch = consumer.Next();
    if (!batch.ok()) {
      drop_held(true);
      reporter.Lost(batch.status());
      return batch.status();
    }
    if (batch->end_of_epoch()) {
      CheckedEpoch e;
      Status s = checker->OnEndOfEpoch(batch->epoch(), batch->step(), batch->skipped(), &e);
      if (!s.ok()) {
        reporter.Violation(s.message());
      } else {
        reporter.Epoch(e);
      }
      continue;
    }
    Status s =
        checker->OnBatch(batch->epoch(), batch->first_seq(), batch->indices(), batch->skipped());
    if (!s.ok()) reporter.Violation(s.message());
    if (std::string v = ByteViolation(*batch, "on delivery"); !v.empty()) reporter.Violation(v);
    ++read;
    reporter.Batch();
    // One held batch at a time: a consumer that keeps many while it waits for
    // more can pin the ring against everyone (block policy).
    if (options.hold_every > 0 && held.empty() && batch->zero_copy() &&
        read % options.hold_every == 0) {
      held.push_back({std::move(*batch), NowMs() + options.hold_for.count()});
    }
  }
  drop_held(true);
  return Status::Ok();
}

}  // namespace batchcast::stress
