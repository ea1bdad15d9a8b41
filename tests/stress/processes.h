// Child processes of the stress programs (tests/stress): spawning them so
// that a watchdog or an interrupt can kill them all, starting a
// batchcast-server and waiting until it answers, reading a process's memory
// figures, and what a server leaves on the machine.
//
// Thread-safety: the registry (Spawn, Reap, KillAllChildren) may be used from
// any thread; KillAllChildren is async-signal-safe. The rest are plain
// functions of their arguments.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "batchcast/core/status.h"
#include "tests/e2e/process.h"

namespace batchcast::stress {

// A child whose stdout is a pipe (Process::ReadLines) and whose stderr goes to
// `stderr_path` ("" inherits it), registered for KillAllChildren.
std::unique_ptr<testing::Process> Spawn(const std::vector<std::string>& argv,
                                        const std::string& stderr_path = "");
// Waits up to `timeout` for `p` to exit: its exit code, 128+signal, or -1
// (still running). An exited child leaves the registry.
int Reap(testing::Process& p, std::chrono::milliseconds timeout);
// SIGKILLs every registered child.
void KillAllChildren();

// After `limit`, prints "<program>: watchdog: <what>" to stderr, kills every
// child and exits with status 3: the stress programs never hang.
void StartWatchdog(const std::string& program, std::chrono::seconds limit, std::string what);
// SIGINT and SIGTERM kill every child and exit with 130.
void InstallInterruptHandler();

// `server_bin serve --name NAME ARGS...` with stderr to
// `log`, once a STATS request to `endpoint` is answered. Unavailable when it
// exits first or does not answer within `timeout` (then it is killed).
Result<std::unique_ptr<testing::Process>> StartServer(const std::string& server_bin,
                                                      const std::string& name,
                                                      const std::string& endpoint,
                                                      const std::vector<std::string>& args,
                                                      const std::string& log,
                                                      std::chrono::milliseconds timeout);

// The server options every stress program passes: `--synthetic samples
// --size size --batch-size batch --window window --seed seed --workers 1
// --log-level warn`.
std::vector<std::string> SyntheticServerArgs(uint64_t samples, int size, int batch, int window,
                                             uint64_t seed);

// The path of this program (for its own subcommands).
std::string SelfExe();

// A TCP port on 127.0.0.1 that was free a moment ago.
Result<int> FreeTcpPort();

// A directory for logs: `dir` when given (created), else a new temporary one.
std::string LogDir(const std::string& dir, const std::string& program);
// Removes a temporary log directory (one LogDir made, `given` empty) after a
// run that passed; returns the program's exit status (0, or 1 when failed).
int FinishLogDir(const std::string& dir, const std::string& given, bool passed);
// The last `bytes` bytes of a file (for failure messages).
std::string Tail(const std::string& path, size_t bytes = 2000);
// Sanitizer and abort reports in a log ("" when none): AddressSanitizer,
// UndefinedBehaviorSanitizer ("runtime error:"), ThreadSanitizer, LeakSanitizer,
// "terminate called".
std::string SanitizerReport(const std::string& path);

// Memory of a process from /proc/PID/status, in KiB (-1 when unreadable).
struct MemoryKib {
  int64_t rss = -1;    // VmRSS
  int64_t anon = -1;   // RssAnon: private memory (heap, stacks): what a leak grows
  int64_t shmem = -1;  // RssShmem: the shared ring as far as touched
};
MemoryKib ReadMemory(pid_t pid);

// What a server named `name` serving `endpoint` left behind: its socket file
// (ipc://) and its host ring in /dev/shm. (The lock file stays by design:
// Note [Server instance lock].)
std::vector<std::string> ServerLeftovers(const std::string& name, const std::string& endpoint);

}  // namespace batchcast::stress
