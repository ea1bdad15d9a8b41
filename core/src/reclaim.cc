#include "core/src/reclaim.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <string_view>
#include <vector>

#include "core/src/protocol.h"
#include "core/src/runtime_dir.h"

namespace batchcast {
namespace {

// Removes the host ring of server `name` (of this version's name, or of an
// older one's) if this user owns it; its size.
uint64_t RemoveRing(const std::string& name) {
  uint64_t removed = 0;
  std::vector<std::string> names = {LegacyHostRingShmName(name)};
  for (uint32_t k = 0; k < kMaxHostRings; ++k) names.push_back(HostRingShmName(name, k));
  for (const std::string& shm : names) {
    struct stat st {};
    if (lstat(("/dev/shm/" + shm).c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != getuid()) {
      continue;
    }
    if (shm_unlink(shm.c_str()) == 0) removed += static_cast<uint64_t>(st.st_size);
  }
  return removed;
}

// Removes <dir>/<name>.sock if it is a socket of this user that nobody
// listens on.
bool RemoveSocket(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name + ".sock";
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != getuid()) {
    return false;
  }
  if (ProbeSocket(path) == ServerProbe::State::kRunning) return false;
  return unlink(path.c_str()) == 0;
}

// Removes /dev/shm/<shm> if it is a host ring of this user that no live
// server holds (no flock) and that is older than a minute; its size.
uint64_t RemoveOrphanRing(const std::string& shm, std::chrono::seconds age) {
  const std::string path = "/dev/shm/" + shm;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return 0;
  struct stat st {};
  uint64_t removed = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() &&
      time(nullptr) - st.st_ctime >= age.count() && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
      shm_unlink(shm.c_str()) == 0) {
    removed = static_cast<uint64_t>(st.st_size);
  }
  close(fd);
  return removed;
}

// Reclaims the orphan rings (see reclaim.h) in /dev/shm.
void ReclaimOrphanRings(std::chrono::seconds age, std::vector<Reclaimed>& out) {
  // Only rings of this version's name: an older server holds no flock.
  const std::string head = "batchcast-" + std::to_string(getuid()) + "-";
  constexpr std::string_view kTail = ".ring";
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return;
  std::vector<std::string> rings;
  while (const dirent* e = readdir(d)) {
    const std::string_view file = e->d_name;
    if (file.size() > head.size() + kTail.size() && file.starts_with(head) &&
        file.ends_with(kTail)) {
      rings.emplace_back(file);
    }
  }
  closedir(d);
  for (const std::string& shm : rings) {
    if (const uint64_t bytes = RemoveOrphanRing(shm, age); bytes > 0) {
      Reclaimed r;
      r.orphan = true;
      r.name = shm.substr(head.size(), shm.size() - head.size() - kTail.size());
      r.name = r.name.substr(0, r.name.find('+'));  // a server's host ring k > 0
      r.ring_bytes = bytes;
      out.push_back(std::move(r));
    }
  }
}

}  // namespace

std::vector<Reclaimed> ReclaimDeadServers(std::chrono::seconds orphan_age) {
  std::vector<Reclaimed> out;
  Result<std::string> dir = RuntimeDir();
  if (!dir.ok()) return out;
  DIR* d = opendir(dir->c_str());
  if (d == nullptr) return out;
  std::vector<std::string> names;
  while (const dirent* e = readdir(d)) {
    const std::string_view file = e->d_name;
    if (!file.ends_with(".lock")) continue;
    const std::string name(file.substr(0, file.size() - 5));
    if (ValidateServerName(name).ok()) names.push_back(name);
  }
  closedir(d);
  for (const std::string& name : names) {
    const std::string lock = *dir + "/" + name + ".lock";
    const int fd = open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat held {
    }, at_path{};
    // Only a lock nobody holds, still at its path, of this user.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
        held.st_uid == getuid() && lstat(lock.c_str(), &at_path) == 0 &&
        held.st_ino == at_path.st_ino && held.st_dev == at_path.st_dev) {
      Reclaimed r;
      r.name = name;
      r.pid = LockFilePid(lock);
      r.ring_bytes = RemoveRing(name);
      r.socket = RemoveSocket(*dir, name);
      for (uint32_t ring = 0; ring < proto::kMaxRings; ++ring) {  // attach sockets
        (void)RemoveSocket(*dir, name + "+" + std::to_string(ring));
      }
      for (const char* listing : {".listing", ".listing.tmp"}) {  // Note [Shared listing]
        unlink((*dir + "/" + name + listing).c_str());
      }
      unlink(lock.c_str());  // while held: see InstanceLock::Release
      if (r.ring_bytes > 0 || r.socket) out.push_back(std::move(r));
    }
    close(fd);
  }
  ReclaimOrphanRings(orphan_age, out);
  return out;
}

}  // namespace batchcast
