// ValidateEndpoint (core/src/endpoint.h): ports in range, port 0/* only for
// a server, inproc:// refused with the reason, ipc:// paths that fit;
// IsLoopbackTcp (what may be bound without allow_remote).
#include "core/src/endpoint.h"

#include <gtest/gtest.h>

#include <string>

namespace batchcast {
namespace {

Status Bind(const std::string& e) { return ValidateEndpoint(e, EndpointUse::kBind); }
Status Connect(const std::string& e) { return ValidateEndpoint(e, EndpointUse::kConnect); }

TEST(Endpoint, TcpPortsMustBeInRange) {
  for (const char* good : {"tcp://127.0.0.1:1", "tcp://127.0.0.1:5555", "tcp://127.0.0.1:65535",
                           "tcp://[::1]:7000", "tcp://localhost:80"}) {
    EXPECT_TRUE(Bind(good).ok()) << good;
    EXPECT_TRUE(Connect(good).ok()) << good;
  }
  for (const char* bad : {"tcp://127.0.0.1:99999", "tcp://127.0.0.1:65536", "tcp://127.0.0.1:-1",
                          "tcp://127.0.0.1:", "tcp://127.0.0.1:http", "tcp://127.0.0.1",
                          "tcp://:5555", "tcp://127.0.0.1:5555x"}) {
    const Status s = Bind(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s.message();
  }
  EXPECT_NE(Bind("tcp://127.0.0.1:99999").message().find("1..65535"), std::string::npos);
}

TEST(Endpoint, AnyPortOnlyForAServer) {
  for (const char* any : {"tcp://127.0.0.1:0", "tcp://127.0.0.1:*", "tcp://*:*"}) {
    EXPECT_TRUE(Bind(any).ok()) << any;
    const Status s = Connect(any);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << any;
    EXPECT_NE(s.message().find("actual port"), std::string::npos) << s.message();
  }
}

TEST(Endpoint, InprocIsRefusedWithTheReason) {
  const Status s = Bind("inproc://demo");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("only inside one ZeroMQ context"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ipc://"), std::string::npos) << s.message();
}

TEST(Endpoint, IpcPathsMustFitASocketAddress) {
  EXPECT_TRUE(Bind("ipc:///tmp/x.sock").ok());
  EXPECT_EQ(Bind("ipc://").code(), StatusCode::kInvalidArgument);
  const std::string long_path = "ipc:///tmp/" + std::string(200, 'a') + ".sock";
  const Status s = Connect(long_path);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("at most 107"), std::string::npos) << s.message();
  EXPECT_EQ(Bind("udp://x:1").code(), StatusCode::kInvalidArgument);
}

TEST(Endpoint, IpcPathIsTheSocketFile) {
  EXPECT_EQ(IpcPath("ipc:///tmp/batchcast-0/x+1.sock"), "/tmp/batchcast-0/x+1.sock");
  EXPECT_EQ(IpcPath("tcp://127.0.0.1:5555"), "");
  EXPECT_EQ(IpcPath("/tmp/x.sock"), "");
}

TEST(Endpoint, LoopbackIsOnlyThisMachine) {
  for (const char* local :
       {"tcp://127.0.0.1:5555", "tcp://127.0.0.1:0", "tcp://127.1.2.3:*", "tcp://[::1]:7000",
        "tcp://[::ffff:127.0.0.1]:7000", "tcp://localhost:80", "tcp://lo:80"}) {
    EXPECT_TRUE(IsLoopbackTcp(local)) << local;
  }
  for (const char* remote :
       {"tcp://*:5555", "tcp://*:*", "tcp://0.0.0.0:5555", "tcp://[::]:5555", "tcp://10.0.0.1:1",
        "tcp://192.168.1.2:80", "tcp://eth0:80", "tcp://example.com:80", "tcp://128.0.0.1:1",
        "tcp://[::ffff:10.0.0.1]:1", "ipc:///tmp/x.sock", "tcp://127.0.0.1.evil.com:80"}) {
    EXPECT_FALSE(IsLoopbackTcp(remote)) << remote;
  }
}

// ZeroMQ binds addresses, not host names: localhost binds 127.0.0.1.
TEST(Endpoint, ALocalhostServerBindsTheLoopbackAddress) {
  EXPECT_EQ(BindAddress("tcp://localhost:5555"), "tcp://127.0.0.1:5555");
  EXPECT_EQ(BindAddress("tcp://localhost:0"), "tcp://127.0.0.1:0");
  EXPECT_EQ(BindAddress("tcp://127.0.0.1:5555"), "tcp://127.0.0.1:5555");
  EXPECT_EQ(BindAddress("ipc:///tmp/x.sock"), "ipc:///tmp/x.sock");
}

}  // namespace
}  // namespace batchcast
