// Test helpers: child processes with a readable stdout, temp dirs, JSON files.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

extern char** environ;

namespace batchcast::testing {

// A child process; stdout is a pipe the test can read lines from, stderr goes
// to `stderr_path` (or is inherited). `env`: "NAME=VALUE" entries added to
// (or replacing those of) this process's environment.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& stderr_path = "",
          const std::vector<std::string>& env = {}) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    if (!stderr_path.empty()) {
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('='));
      bool replaced = false;
      for (const std::string& x : env) replaced = replaced || x.substr(0, x.find('=')) == name;
      if (!replaced) env_strings.push_back(entry);
    }
    env_strings.insert(env_strings.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data()) != 0) {
      std::abort();
    }
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_fd_ = fds[0];
  }
  // A process still running is asked to stop (SIGTERM: a server then removes
  // its ring and socket), and killed if it has not within 10 s.
  ~Process() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGTERM);
      if (Wait(std::chrono::milliseconds(10000)) < 0) {
        kill(pid_, SIGKILL);
        Wait();
      }
    }
    if (out_fd_ >= 0) close(out_fd_);
  }
  pid_t pid() const { return pid_; }

  // Waits up to `timeout` for a stdout line equal to `line`.
  bool WaitForLine(const std::string& line, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      size_t pos;
      while ((pos = buffer_.find('\n')) != std::string::npos) {
        std::string l = buffer_.substr(0, pos);
        buffer_.erase(0, pos + 1);
        if (l == line) return true;
      }
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        char buf[4096];
        ssize_t n = read(out_fd_, buf, sizeof(buf));
        if (n <= 0) return false;
        buffer_.append(buf, static_cast<size_t>(n));
      }
    }
    return false;
  }
  // Moves the complete stdout lines that arrive within `timeout` (0: only
  // those already there) into *lines. False once stdout is closed and every
  // line was taken.
  bool ReadLines(std::vector<std::string>* lines, std::chrono::milliseconds timeout) {
    bool open = true;
    pollfd p{out_fd_, POLLIN, 0};
    if (out_fd_ >= 0 && poll(&p, 1, static_cast<int>(timeout.count())) > 0) {
      char buf[65536];
      ssize_t n = read(out_fd_, buf, sizeof(buf));
      if (n > 0) {
        buffer_.append(buf, static_cast<size_t>(n));
      } else {
        open = false;
      }
    }
    size_t pos;
    while ((pos = buffer_.find('\n')) != std::string::npos) {
      lines->push_back(buffer_.substr(0, pos));
      buffer_.erase(0, pos + 1);
    }
    return open;
  }
  void Kill(int sig = SIGKILL) { kill(pid_, sig); }
  // Exit code, or 128+signal. -1 on timeout.
  int Wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
    if (exited_) return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return -1;
      usleep(5000);
    }
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffer_;
  bool exited_ = false;
  int status_ = 0;
};

inline std::string TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "bc_e2e_XXXXXX").string();
  return mkdtemp(tmpl.data());
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json();
  return nlohmann::json::parse(in, nullptr, false);
}

inline std::string UniqueName(const std::string& base) {
  static int counter = 0;
  return base + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

}  // namespace batchcast::testing
