// The ring device of the end-to-end engine suites: tests/e2e/engine_test.cc
// runs every scenario once per ring device (`cpu`, `cuda:0`), and
// tests/gpu/gpu_engine_test.cc the checks only a device ring has. A Ring starts
// servers with their ring on its device, connects consumers, and checks a
// batch's bytes against the synthetic formula wherever they live (device
// batches are copied to the host on their delivery stream).
//
// A test binary that includes this defines BC_SERVER_BIN (batchcast-server)
// and BC_CONSUMER_BIN (bc_test_consumer).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/client/consumer.h"
#include "batchcast/core/field_spec.h"
#include "device_util.h"
#include "harness.h"

namespace batchcast {

// GoogleTest prints a Device parameter as "cpu" / "cuda:0".
inline void PrintTo(const Device& device, std::ostream* os) { *os << DeviceName(device); }

namespace testing {

// The bytes of a field (see ReadToHost); a CUDA error fails the test.
inline std::vector<uint8_t> HostBytes(const FieldView& f, CudaStreamRef stream = {}) {
  std::vector<uint8_t> out;
  if (Status s = ReadToHost(f, stream, &out); !s.ok()) ADD_FAILURE() << s.ToString();
  return out;
}

// The name of a ring-device test instance: "cpu", "cuda0".
inline std::string RingName(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cuda() ? "cuda" + std::to_string(info.param.index) : "cpu";
}

// A delivered batch: when, and the stream position after it (first_seq +
// size), or another count a test records over time.
struct Record {
  double t;
  uint64_t end;
};

class Ring {
 public:
  explicit Ring(Device device) : device_(device) {}
  Device device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }

  // `cpu` on a host ring, `cuda` on a device ring: time limits that differ
  // because GPU processes start slower (CUDA context, IPC opens).
  template <typename T>
  T Pick(T cpu, T cuda) const {
    return is_cuda() ? cuda : cpu;
  }

  // `batchcast-server serve --device DEVICE --name NAME EXTRA...`, once it
  // answers; checks that its stats report the ring on this device.
  std::unique_ptr<Process> StartServer(const std::string& name, std::vector<std::string> extra,
                                       const std::string& log = "") const {
    extra.insert(extra.begin(), {"--device", DeviceName(device_)});
    nlohmann::json st;
    auto p = StartServerProcess(BC_SERVER_BIN, name, extra, log, &st);
    EXPECT_EQ(st.value("device", ""), DeviceName(device_)) << st.dump();
    return p;
  }

  // A bc_test_consumer process (it copies device batches to the host on a
  // stream of its own).
  std::unique_ptr<Process> StartConsumer(const std::string& name, const std::string& out,
                                         const std::vector<std::string>& extra) const {
    return StartConsumerProcess(BC_CONSUMER_BIN, name, out, extra);
  }

  std::unique_ptr<Consumer> Connect(const std::string& name, uint32_t batch, JoinPolicy join,
                                    uint16_t prefetch = 2, CudaStreamRef stream = {}) const {
    return ConnectConsumer(name, batch, join, prefetch, stream);
  }

  // True when every byte of `image` and `label` follows the synthetic formula
  // for the batch's indices (device batches are copied to the host on
  // `stream`, their delivery stream). Also expects both fields on this device.
  bool BatchMatchesFormula(const Batch& b, CudaStreamRef stream = {}) const {
    for (const char* name : {"image", "label"}) {
      if (auto f = b.field(name); f.ok()) {
        EXPECT_EQ(f->device, device_) << name;
      }
    }
    Result<int64_t> bad = FormulaMismatches(b, stream);
    if (!bad.ok()) ADD_FAILURE() << bad.status().ToString();
    return bad.ok() && *bad == 0;
  }

  // Takes the next batch of `c` to hold: it must be a zero-copy view of the
  // ring (so its slot stays leased while *held lives); *image is its "image"
  // field. A fatal failure otherwise (call it in ASSERT_NO_FATAL_FAILURE).
  void HoldNext(Consumer* c, Batch* held, FieldView* image) const {
    auto b = c->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_TRUE(b->zero_copy());
    *held = std::move(*b);
    auto f = held->field("image");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    *image = std::move(*f);
  }

  // Reads `batches` batches (end-of-epoch markers do not count), sleeping
  // `sleep` after each, and records (time, end seq) of each under `mu`.
  // Stops at the first error (stored in *error when given).
  void ReadBatches(Consumer* c, int batches, std::chrono::milliseconds sleep,
                   std::vector<Record>* out, std::mutex* mu, Status* error = nullptr,
                   bool verify = true) const {
    for (int i = 0; i < batches;) {
      auto b = c->Next();
      if (!b.ok()) {
        if (error) *error = b.status();
        return;
      }
      if (b->end_of_epoch()) continue;
      if (verify) {
        EXPECT_TRUE(BatchMatchesFormula(*b));
      }
      {
        std::lock_guard lock(*mu);
        out->push_back({NowMs(), b->first_seq() + b->size()});
      }
      ++i;
      if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
    }
  }

 private:
  Device device_;
};

}  // namespace testing
}  // namespace batchcast
