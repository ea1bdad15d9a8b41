#include "tar_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include "dataset_files.h"

namespace batchcast {

bool BuiltWithTar() { return true; }

struct TarReader::Impl {
  archive* a = nullptr;
  int fd = -1;
  Status error;  // sticky: the first failure

  ~Impl() {
    if (a != nullptr) archive_read_free(a);
    if (fd >= 0) close(fd);
  }
  // A failure to read the file (Note [Read retries]) is Unavailable and not
  // sticky: the reader may open the shard again; anything else is the
  // archive's damage (DataLoss, sticky).
  Status Fail(const char* what) {
    const char* reason = a != nullptr ? archive_error_string(a) : nullptr;
    const std::string message =
        std::string(what) + ": " + (reason != nullptr ? reason : "damaged tar archive");
    const int err = a != nullptr ? archive_errno(a) : 0;
    if (err > 0 && ReadErrorCode(err) == StatusCode::kUnavailable) {
      return UnavailableError(message);
    }
    error = DataLossError(message);
    return error;
  }
};

TarReader::TarReader() = default;
TarReader::~TarReader() = default;
TarReader::TarReader(TarReader&&) noexcept = default;
TarReader& TarReader::operator=(TarReader&&) noexcept = default;

Result<TarReader> TarReader::Open(const std::string& path) {
  BATCHCAST_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path));
  TarReader r;
  r.impl_ = std::make_unique<Impl>();
  r.impl_->fd = fd;
  r.impl_->a = archive_read_new();
  if (r.impl_->a == nullptr) return ResourceExhaustedError("archive_read_new failed");
  archive_read_support_format_tar(r.impl_->a);
  if (archive_read_open_fd(r.impl_->a, fd, 1 << 20) != ARCHIVE_OK) {
    return r.impl_->Fail("not a readable tar archive");
  }
  return r;
}

Result<bool> TarReader::Next(Member* member) {
  if (!impl_->error.ok()) return impl_->error;
  archive_entry* e = nullptr;
  const int rc = archive_read_next_header(impl_->a, &e);
  if (rc == ARCHIVE_EOF) return false;
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) return impl_->Fail("damaged tar archive");
  const char* name = archive_entry_pathname(e);
  member->name = name != nullptr ? name : "";
  member->size = archive_entry_size_is_set(e) ? static_cast<uint64_t>(archive_entry_size(e)) : 0;
  member->regular = archive_entry_filetype(e) == AE_IFREG;
  return true;
}

Status TarReader::ReadData(std::vector<uint8_t>& out) {
  if (!impl_->error.ok()) return impl_->error;
  out.clear();
  size_t got = 0;
  while (true) {
    if (out.size() < got + (64 << 10)) out.resize(got + (64 << 10));
    const la_ssize_t r = archive_read_data(impl_->a, out.data() + got, out.size() - got);
    if (r < 0) {
      out.clear();
      return impl_->Fail("damaged tar archive");
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return Status::Ok();
}

}  // namespace batchcast
