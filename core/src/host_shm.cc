#include "core/src/host_shm.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/src/file_mode.h"

namespace batchcast {

namespace bip = boost::interprocess;

namespace {

constexpr const char* kShmDir = "/dev/shm";

std::string GiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

// ResourceExhausted when `bytes` more do not fit in /dev/shm now.
Status CheckShmSpace(size_t bytes) {
  struct statvfs vfs {};
  if (statvfs(kShmDir, &vfs) != 0) return Status::Ok();  // cannot tell: let the allocation say
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t total = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  if (bytes <= free_bytes) return Status::Ok();
  return ResourceExhaustedError("needs " + GiB(bytes) + " (" + std::to_string(bytes) +
                                " bytes) of shared memory, but " + kShmDir + " has " +
                                GiB(free_bytes) + " free (of " + GiB(total) + ")");
}

}  // namespace

struct HostSharedMemory::Impl {
  bip::shared_memory_object object;
  bip::mapped_region region;
};

HostSharedMemory::HostSharedMemory(std::string name, bool owner, std::unique_ptr<Impl> impl)
    : name_(std::move(name)), owner_(owner), impl_(std::move(impl)) {
  data_ = static_cast<uint8_t*>(impl_->region.get_address());
  size_ = impl_->region.get_size();
}

HostSharedMemory::~HostSharedMemory() {
  if (owner_) Remove(name_);
}

void HostSharedMemory::Remove(const std::string& name) {
  bip::shared_memory_object::remove(name.c_str());
}

Result<std::unique_ptr<HostSharedMemory>> HostSharedMemory::Create(const std::string& name,
                                                                   size_t bytes) {
  if (bytes == 0) return InvalidArgumentError("shared memory of 0 bytes");
  Remove(name);
  BATCHCAST_RETURN_IF_ERROR(CheckShmSpace(bytes));
  try {
    auto impl = std::make_unique<Impl>();
    impl->object = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write,
                                             bip::permissions(0600));
    // Held while the ring lives: see the header.
    (void)flock(impl->object.get_mapping_handle().handle, LOCK_SH | LOCK_NB);
    impl->object.truncate(static_cast<bip::offset_t>(bytes));
    // Reserve every page now: a sparse object that outgrows /dev/shm later
    // would kill the writer (and readers) with SIGBUS instead of an error.
    const int err =
        posix_fallocate(impl->object.get_mapping_handle().handle, 0, static_cast<off_t>(bytes));
    if (err != 0 && err != EOPNOTSUPP && err != EINVAL) {
      Remove(name);
      Status space = CheckShmSpace(bytes);
      return ResourceExhaustedError(space.ok()
                                        ? "cannot reserve " + GiB(bytes) + " of shared memory in " +
                                              kShmDir + ": " + std::strerror(err)
                                        : space.message());
    }
    impl->region = bip::mapped_region(impl->object, bip::read_write);
    return std::unique_ptr<HostSharedMemory>(new HostSharedMemory(name, true, std::move(impl)));
  } catch (const bip::interprocess_exception& e) {
    struct stat st {};
    const std::string path = std::string(kShmDir) + "/" + name;
    if (e.get_error_code() == bip::already_exists_error && lstat(path.c_str(), &st) == 0) {
      // Remove() could not take the name (another user's file, or not a
      // shared memory object at all): it is not the server's to take.
      return PermissionDeniedError(
          path + " already exists and cannot be replaced (" +
          (S_ISREG(st.st_mode) ? std::string("a file") : std::string("not a regular file")) +
          " of uid " + std::to_string(st.st_uid) + ", mode " + FileModeText(st.st_mode) +
          "): pick another server name, or have its owner remove it");
    }
    Remove(name);
    return ResourceExhaustedError("cannot create shared memory '" + name + "' of " +
                                  std::to_string(bytes) + " bytes: " + e.what() +
                                  " (is /dev/shm large enough?)");
  }
}

Result<std::unique_ptr<HostSharedMemory>> HostSharedMemory::Open(const std::string& name,
                                                                 bool writable) {
  try {
    auto impl = std::make_unique<Impl>();
    const bip::mode_t mode = writable ? bip::read_write : bip::read_only;
    impl->object = bip::shared_memory_object(bip::open_only, name.c_str(), mode);
    impl->region = bip::mapped_region(impl->object, mode);
    return std::unique_ptr<HostSharedMemory>(new HostSharedMemory(name, false, std::move(impl)));
  } catch (const bip::interprocess_exception& e) {
    return NotFoundError("cannot open shared memory '" + name + "': " + e.what());
  }
}

}  // namespace batchcast
