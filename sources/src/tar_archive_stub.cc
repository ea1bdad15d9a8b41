// TarReader without libarchive (BATCHCAST_WITH_TAR=OFF, or AUTO without
// libarchive-dev): every Open says so.
#include "tar_archive.h"

namespace batchcast {

bool BuiltWithTar() { return false; }

namespace {
Status NoTarSupportError(const std::string& data) {
  return UnavailableError("cannot serve " + data +
                          ": this build of batchcast has no tar shard support (it was built "
                          "without libarchive: install libarchive-dev and rebuild with "
                          "-DBATCHCAST_WITH_TAR=ON)");
}
}  // namespace

struct TarReader::Impl {};

TarReader::TarReader() = default;
TarReader::~TarReader() = default;
TarReader::TarReader(TarReader&&) noexcept = default;
TarReader& TarReader::operator=(TarReader&&) noexcept = default;

Result<TarReader> TarReader::Open(const std::string& path) { return NoTarSupportError(path); }
Result<bool> TarReader::Next(Member*) { return NoTarSupportError("a tar shard"); }
Status TarReader::ReadData(std::vector<uint8_t>&) { return NoTarSupportError("a tar shard"); }

}  // namespace batchcast
