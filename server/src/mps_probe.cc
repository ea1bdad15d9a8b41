#include "mps_probe.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "core/src/enum_names.h"

namespace batchcast {
namespace {

// PIDs of the processes under `proc` whose name (comm) starts with
// "nvidia-cuda-mps" (the control daemon and its servers); nullopt when
// `proc` cannot be listed.
std::optional<std::vector<std::string>> MpsProcesses(const std::string& proc) {
  DIR* dir = opendir(proc.c_str());
  if (dir == nullptr) return std::nullopt;
  std::vector<std::string> found;
  while (const dirent* e = readdir(dir)) {
    const std::string pid = e->d_name;
    if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) continue;
    std::ifstream comm(proc + "/" + pid + "/comm");
    std::string name;
    // comm is cut at 15 characters: "nvidia-cuda-mps" is all that is left.
    if (std::getline(comm, name) && name.rfind("nvidia-cuda-mps", 0) == 0) found.push_back(pid);
  }
  closedir(dir);
  return found;
}

// The control daemon's endpoint: a named pipe, or (as some driver versions
// make it) a Unix socket.
bool IsControlEndpoint(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

}  // namespace

MpsProbeRoots MpsProbeRoots::FromEnvironment() {
  MpsProbeRoots roots;
  if (const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY"); dir != nullptr && *dir != '\0') {
    roots.pipe_dir_env = dir;
  }
  return roots;
}

std::string_view MpsState::name() const {
  static constexpr EnumNames<Kind, 3> kNames{
      "mps", {{{Kind::kOff, "off"}, {Kind::kOn, "on"}, {Kind::kUnknown, "unknown"}}}};
  return kNames.Name(kind, "unknown");
}

MpsState ProbeMps(const MpsProbeRoots& roots) {
  const std::string pipe_dir = roots.pipe_dir_env.value_or(roots.default_pipe_dir);
  const std::string where = roots.pipe_dir_env ? "CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir
                                               : pipe_dir + " (the default pipe directory)";
  const bool pipe = IsControlEndpoint(pipe_dir + "/control");
  const std::optional<std::vector<std::string>> procs = MpsProcesses(roots.proc);
  if (!procs) {
    return {MpsState::Kind::kUnknown,
            roots.proc + " cannot be read" + (pipe ? "; a control pipe is in " + where : "")};
  }
  if (pipe && !procs->empty()) {
    return {MpsState::Kind::kOn,
            "control pipe in " + where + ", MPS process " + procs->front() + " running"};
  }
  if (pipe) {
    return {MpsState::Kind::kUnknown,
            "a control pipe is in " + where +
                " but no MPS process is visible (a stale pipe, or a daemon in another PID "
                "namespace)"};
  }
  if (!procs->empty()) {
    return {MpsState::Kind::kOff, "no control pipe in " + where + "; MPS process " +
                                      procs->front() +
                                      " runs with another pipe directory and does not serve "
                                      "this process"};
  }
  return {MpsState::Kind::kOff, "no MPS control daemon (no control pipe in " + where + ")"};
}

}  // namespace batchcast
