#include "processes.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "batchcast/client/consumer.h"
#include "core/src/runtime_dir.h"

namespace batchcast::stress {
namespace {

// Pids of live children; 0 = a free entry. Lock-free, so that a signal
// handler or the watchdog may read it.
std::array<std::atomic<pid_t>, 1024> g_children{};

void Register(pid_t pid) {
  for (auto& slot : g_children) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, pid)) return;
  }
}

void Unregister(pid_t pid) {
  for (auto& slot : g_children) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

void OnInterrupt(int) {
  KillAllChildren();
  _exit(130);
}

}  // namespace

std::unique_ptr<testing::Process> Spawn(const std::vector<std::string>& argv,
                                        const std::string& stderr_path) {
  auto p = std::make_unique<testing::Process>(argv, stderr_path);
  Register(p->pid());
  return p;
}

int Reap(testing::Process& p, std::chrono::milliseconds timeout) {
  const int rc = p.Wait(timeout);
  if (rc != -1) Unregister(p.pid());
  return rc;
}

void KillAllChildren() {
  for (auto& slot : g_children) {
    const pid_t pid = slot.load();
    if (pid > 0) kill(pid, SIGKILL);
  }
}

void StartWatchdog(const std::string& program, std::chrono::seconds limit, std::string what) {
  std::thread([program, limit, what = std::move(what)] {
    std::this_thread::sleep_for(limit);
    std::fprintf(stderr, "%s: watchdog: %s (%lld s); killing everything\n", program.c_str(),
                 what.c_str(), static_cast<long long>(limit.count()));
    KillAllChildren();
    _exit(3);
  }).detach();
}

void InstallInterruptHandler() {
  signal(SIGINT, OnInterrupt);
  signal(SIGTERM, OnInterrupt);
  signal(SIGPIPE, SIG_IGN);
}

Result<std::unique_ptr<testing::Process>> StartServer(const std::string& server_bin,
                                                      const std::string& name,
                                                      const std::string& endpoint,
                                                      const std::vector<std::string>& args,
                                                      const std::string& log,
                                                      std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {server_bin, "serve", "--name", name};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = Spawn(argv, log);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (const int rc = Reap(*p, std::chrono::milliseconds(0)); rc != -1) {
      return UnavailableError("server " + name + " exited with status " + std::to_string(rc) +
                              " at start: " + Tail(log, 600));
    }
    if (QueryStats(endpoint, std::chrono::milliseconds(500)).ok()) return p;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  p->Kill(SIGKILL);
  Reap(*p, std::chrono::seconds(10));
  return UnavailableError("server " + name + " did not answer within " +
                          std::to_string(timeout.count()) + " ms: " + Tail(log, 600));
}

std::vector<std::string> SyntheticServerArgs(uint64_t samples, int size, int batch, int window,
                                             uint64_t seed) {
  return {"--synthetic",  std::to_string(samples),
          "--size",       std::to_string(size),
          "--batch-size", std::to_string(batch),
          "--window",     std::to_string(window),
          "--seed",       std::to_string(seed),
          "--workers",    "1",
          "--log-level",  "warn"};
}

std::string SelfExe() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("/proc/self/exe");
}

Result<int> FreeTcpPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return UnavailableError("cannot bind a TCP port on 127.0.0.1");
  return static_cast<int>(ntohs(addr.sin_port));
}

std::string LogDir(const std::string& dir, const std::string& program) {
  if (!dir.empty()) {
    std::filesystem::create_directories(dir);
    return dir;
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / (program + "_XXXXXX")).string();
  return mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string("/tmp");
}

int FinishLogDir(const std::string& dir, const std::string& given, bool passed) {
  if (passed && given.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return passed ? 0 : 1;
}

std::string Tail(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

std::string SanitizerReport(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    for (const char* mark :
         {"ERROR: AddressSanitizer", "runtime error:", "WARNING: ThreadSanitizer",
          "ERROR: LeakSanitizer", "terminate called"}) {
      if (line.find(mark) != std::string::npos) return line;
    }
  }
  return "";
}

MemoryKib ReadMemory(pid_t pid) {
  MemoryKib m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  int64_t value = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (!(fields >> key >> value)) continue;
    if (key == "VmRSS:") m.rss = value;
    if (key == "RssAnon:") m.anon = value;
    if (key == "RssShmem:") m.shmem = value;
  }
  return m;
}

std::vector<std::string> ServerLeftovers(const std::string& name, const std::string& endpoint) {
  std::vector<std::string> left;
  std::error_code ec;
  if (endpoint.starts_with("ipc://") && std::filesystem::exists(endpoint.substr(6), ec)) {
    left.push_back(endpoint.substr(6));
  }
  const std::string shm = "/dev/shm/" + HostRingShmName(name);
  if (std::filesystem::exists(shm, ec)) left.push_back(shm);
  return left;
}

}  // namespace batchcast::stress
