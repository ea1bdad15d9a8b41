// The rules of Note [Client leases] and Note [Device leases]
// (client/src/lease_ledger.h), driven with fake completion tokens: no server,
// no ZeroMQ, no GPU.
#include "client/src/lease_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace batchcast::internal {
namespace {

using Ids = std::vector<uint64_t>;

// What the test sees of one fake token: whether its work is done, and what
// the ledger did with it.
struct FakeWork {
  bool done = false;
  int polls = 0;
  int waits = 0;
  bool destroyed = false;
};

class FakeToken final : public CompletionToken {
 public:
  explicit FakeToken(std::shared_ptr<FakeWork> work) : work_(std::move(work)) {}
  ~FakeToken() override { work_->destroyed = true; }
  bool Done() override {
    ++work_->polls;
    return work_->done;
  }
  void Wait() override {
    ++work_->waits;
    work_->done = true;
  }

 private:
  std::shared_ptr<FakeWork> work_;
};

// Tokens for `works`, one each.
CompletionTokens TokensFor(const std::vector<std::shared_ptr<FakeWork>>& works) {
  CompletionTokens tokens;
  for (const auto& w : works) tokens.push_back(std::make_unique<FakeToken>(w));
  return tokens;
}

// Lease `id` arrives and is delivered to the user (held).
void Hold(LeaseLedger& ledger, uint64_t id) {
  ledger.Arrive(id);
  ledger.Deliver(id);
}

// Lease `id` is held, then ends after one piece of fake GPU work (pending);
// returns that work.
std::shared_ptr<FakeWork> HoldThenPend(LeaseLedger& ledger, uint64_t id) {
  Hold(ledger, id);
  auto work = std::make_shared<FakeWork>();
  ledger.ReleaseAfter(id, TokensFor({work}));
  return work;
}

// Take(), in order (the ledger promises no order).
Ids TakeSorted(LeaseLedger& ledger) {
  Ids ids = ledger.Take();
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(LeaseLedger, ReleasedLeaseIsTakenOnceThenForgotten) {
  LeaseLedger ledger;
  Hold(ledger, 7);
  EXPECT_EQ(ledger.Take(), Ids{});
  ledger.Release(7);
  EXPECT_EQ(ledger.Take(), Ids{7});
  EXPECT_EQ(ledger.Take(), Ids{});
  EXPECT_EQ(ledger.Held(), Ids{});
}

TEST(LeaseLedger, DoubleReleaseIsHarmless) {
  LeaseLedger ledger;
  Hold(ledger, 7);
  ledger.Release(7);
  ledger.Release(7);  // still queued
  EXPECT_EQ(ledger.Take(), Ids{7});
  ledger.Release(7);  // already sent
  ledger.ReleaseAfter(7, {});
  EXPECT_EQ(ledger.Take(), Ids{});
}

TEST(LeaseLedger, UnknownAndZeroLeasesAreIgnored) {
  LeaseLedger ledger;
  ledger.Release(42);  // never arrived
  ledger.Arrive(0);
  ledger.Deliver(0);
  ledger.Release(0);
  EXPECT_EQ(ledger.Take(), Ids{});
  EXPECT_EQ(ledger.Held(), Ids{});
}

TEST(LeaseLedger, DeliveryDoesNotReviveAReleasedLease) {
  LeaseLedger ledger;
  ledger.Arrive(3);
  ledger.Release(3);
  ledger.Deliver(3);
  EXPECT_EQ(ledger.Held(), Ids{});
  EXPECT_EQ(ledger.Take(), Ids{3});
}

TEST(LeaseLedger, HeldLeasesAreWhatByeKeeps) {
  LeaseLedger ledger;
  Hold(ledger, 5);
  Hold(ledger, 2);
  ledger.Arrive(9);  // prefetched only
  EXPECT_EQ(ledger.Held(), (Ids{2, 5}));
  ledger.Release(5);
  EXPECT_EQ(ledger.Held(), Ids{2});
}

TEST(LeaseLedger, DetachReleasesOnlyWhatWasPrefetched) {
  LeaseLedger ledger;
  Hold(ledger, 1);
  auto work = HoldThenPend(ledger, 2);
  ledger.Arrive(3);
  ledger.Arrive(4);
  ledger.Detach();
  EXPECT_TRUE(ledger.detached());
  EXPECT_EQ(TakeSorted(ledger), (Ids{3, 4}));
  EXPECT_EQ(ledger.Held(), (Ids{1, 2}));  // the held and the pending one stay across BYE
  // They end later, as before BYE.
  ledger.Release(1);
  EXPECT_EQ(ledger.Take(), Ids{1});
  work->done = true;
  EXPECT_EQ(ledger.Take(), Ids{2});
}

TEST(LeaseLedger, LeaseArrivingAfterDetachIsReleasedAtOnce) {
  LeaseLedger ledger;
  ledger.Detach();
  ledger.Arrive(8);
  EXPECT_EQ(ledger.Held(), Ids{});
  EXPECT_EQ(ledger.Take(), Ids{8});
  ledger.Deliver(8);  // nobody delivers it; and if so, nothing changes
  ledger.Release(8);
  EXPECT_EQ(ledger.Take(), Ids{});
}

TEST(LeaseLedger, PendingLeaseWaitsForItsTokensAndCountsAsHeld) {
  LeaseLedger ledger;
  auto work = HoldThenPend(ledger, 4);
  EXPECT_EQ(ledger.pending(), 1u);
  EXPECT_EQ(ledger.Take(), Ids{});
  EXPECT_EQ(ledger.Take(), Ids{});
  EXPECT_GE(work->polls, 2);
  EXPECT_EQ(work->waits, 0);  // polled, never waited for
  EXPECT_EQ(ledger.Held(), Ids{4});
  work->done = true;
  EXPECT_EQ(ledger.Take(), Ids{4});
  EXPECT_EQ(ledger.pending(), 0u);
  EXPECT_TRUE(work->destroyed);  // its event goes back to the pool
  EXPECT_EQ(ledger.Held(), Ids{});
  EXPECT_EQ(ledger.Take(), Ids{});
}

TEST(LeaseLedger, PendingLeaseWaitsForEveryToken) {
  LeaseLedger ledger;
  Hold(ledger, 4);
  auto delivery = std::make_shared<FakeWork>();
  auto other = std::make_shared<FakeWork>();
  ledger.ReleaseAfter(4, TokensFor({delivery, other}));
  delivery->done = true;
  EXPECT_EQ(ledger.Take(), Ids{});
  other->done = true;
  EXPECT_EQ(ledger.Take(), Ids{4});
}

TEST(LeaseLedger, ReleaseDoesNotCutAPendingLeaseShort) {
  LeaseLedger ledger;
  auto work = HoldThenPend(ledger, 6);
  ledger.Release(6);
  ledger.ReleaseAfter(6, {});
  EXPECT_EQ(ledger.Take(), Ids{});
  work->done = true;
  EXPECT_EQ(ledger.Take(), Ids{6});
}

TEST(LeaseLedger, ReleaseAfterNoTokensIsRelease) {
  // A host lease, or a gathered batch on the host: nothing to wait for.
  LeaseLedger ledger;
  Hold(ledger, 11);
  ledger.ReleaseAfter(11, {});
  EXPECT_EQ(ledger.pending(), 0u);
  EXPECT_EQ(ledger.Take(), Ids{11});
}

TEST(LeaseLedger, OnlyCompletedLeasesAreTaken) {
  LeaseLedger ledger;
  auto slow = HoldThenPend(ledger, 1);
  auto fast = HoldThenPend(ledger, 2);
  Hold(ledger, 3);
  ledger.Release(3);
  fast->done = true;
  EXPECT_EQ(TakeSorted(ledger), (Ids{2, 3}));
  EXPECT_FALSE(slow->destroyed);
  EXPECT_EQ(ledger.Held(), Ids{1});
}

TEST(LeaseLedger, WaitForPendingBlocksOnEveryTokenThenTheyAreTaken) {
  LeaseLedger ledger;
  auto a = HoldThenPend(ledger, 1);
  auto b = HoldThenPend(ledger, 2);
  ledger.WaitForPending();
  EXPECT_EQ(a->waits, 1);
  EXPECT_EQ(b->waits, 1);
  EXPECT_EQ(TakeSorted(ledger), (Ids{1, 2}));
}

TEST(LeaseLedger, PrefetchedLeaseMayEndWithoutDelivery) {
  // A batch the client could not assemble is released from the prefetched state.
  LeaseLedger ledger;
  ledger.Arrive(12);
  ledger.Release(12);
  EXPECT_EQ(ledger.Take(), Ids{12});
}

}  // namespace
}  // namespace batchcast::internal
