// BackgroundTask (sources/src/background_task.h): the work runs on another
// thread while the owner goes on, Wait returns its status, an exception
// becomes Internal, and the destructor waits for work in flight.
#include "sources/src/background_task.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

namespace batchcast {
namespace {

TEST(BackgroundTask, RunsBesideTheOwnerAndReturnsItsStatus) {
  BackgroundTask task;
  EXPECT_FALSE(task.started());
  EXPECT_TRUE(task.Wait().ok()) << "nothing started: OK at once";
  std::promise<void> go;
  std::shared_future<void> go_f = go.get_future().share();
  std::thread::id ran_on;
  task.Start([&] {
    ran_on = std::this_thread::get_id();
    go_f.wait();  // only the owner, going on meanwhile, lets it finish
    return DataLossError("bad file");
  });
  EXPECT_TRUE(task.started());
  go.set_value();
  EXPECT_EQ(task.Wait().code(), StatusCode::kDataLoss);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(task.started());
  task.Start([] { return Status::Ok(); });
  EXPECT_TRUE(task.Wait().ok());
}

TEST(BackgroundTask, ExceptionBecomesInternal) {
  BackgroundTask task;
  task.Start([]() -> Status { throw std::runtime_error("boom"); });
  const Status s = task.Wait();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("boom"), std::string::npos) << s.message();
}

TEST(BackgroundTask, DestructorWaitsForTheWork) {
  std::atomic<bool> done{false};
  {
    BackgroundTask task;
    task.Start([&] {
      std::this_thread::yield();
      done = true;
      return Status::Ok();
    });
  }
  EXPECT_TRUE(done.load());
}

}  // namespace
}  // namespace batchcast
