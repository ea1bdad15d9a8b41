#include "core/src/host_shm.h"

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

namespace batchcast {

namespace bip = boost::interprocess;

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
  try {
    auto impl = std::make_unique<Impl>();
    impl->object = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write,
                                             bip::permissions(0600));
    impl->object.truncate(static_cast<bip::offset_t>(bytes));
    impl->region = bip::mapped_region(impl->object, bip::read_write);
    return std::unique_ptr<HostSharedMemory>(new HostSharedMemory(name, true, std::move(impl)));
  } catch (const bip::interprocess_exception& e) {
    Remove(name);
    return ResourceExhaustedError("cannot create shared memory '" + name + "' of " +
                                  std::to_string(bytes) + " bytes: " + e.what() +
                                  " (is /dev/shm large enough?)");
  }
}

Result<std::unique_ptr<HostSharedMemory>> HostSharedMemory::Open(const std::string& name) {
  try {
    auto impl = std::make_unique<Impl>();
    impl->object = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_only);
    impl->region = bip::mapped_region(impl->object, bip::read_only);
    return std::unique_ptr<HostSharedMemory>(new HostSharedMemory(name, false, std::move(impl)));
  } catch (const bip::interprocess_exception& e) {
    return NotFoundError("cannot open shared memory '" + name + "': " + e.what());
  }
}

}  // namespace batchcast
