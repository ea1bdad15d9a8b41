#include "dataset_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>
#include <utility>

#include "core/src/logging.h"
#include "scan_progress.h"

namespace batchcast {
namespace fs = std::filesystem;

namespace {

bool HasImageExtension(const fs::path& p) {
  static const std::set<std::string> kExt = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                             ".pgm", ".tif",  ".tiff", ".webp"};
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return kExt.count(ext) != 0;
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "a special file";
}

// Directories already listed, by (device, inode).
using Visited = std::set<std::pair<dev_t, ino_t>>;

// The entries of directory `dir`: subdirectories (links followed) and image
// files. False (after a warning) when `dir` was listed before or cannot be.
bool ListDirectory(const fs::path& dir, Visited& visited, std::vector<fs::path>& dirs,
                   std::vector<std::string>* images) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    BC_LOG_WARN_LIMITED("skipping {}: {}", dir.string(), std::strerror(errno));
    return false;
  }
  if (!visited.insert({st.st_dev, st.st_ino}).second) {
    BC_LOG_WARN_LIMITED(
        "skipping {}: a folder already listed (a symbolic-link loop, or a second "
        "link to one folder)",
        dir.string());
    return false;
  }
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code sec;
    const fs::file_status s = it->status(sec);  // follows links
    if (sec) {
      BC_LOG_WARN_LIMITED("skipping {}: {}", it->path().string(), sec.message());
    } else if (fs::is_directory(s)) {
      dirs.push_back(it->path());
    } else if (images != nullptr && fs::is_regular_file(s) && HasImageExtension(it->path())) {
      images->push_back(it->path().string());
    }
  }
  if (ec) BC_LOG_WARN_LIMITED("cannot list all of {}: {}", dir.string(), ec.message());
  return true;
}

// The image files below class folder `root` (depth first, each folder once).
std::vector<std::string> ListClass(const fs::path& root, Visited& visited) {
  std::vector<std::string> files;
  std::vector<fs::path> todo = {root};
  while (!todo.empty()) {
    const fs::path dir = std::move(todo.back());
    todo.pop_back();
    ListDirectory(dir, visited, todo, &files);
  }
  std::sort(files.begin(), files.end());
  return files;
}

Result<std::vector<ImageEntry>> ListImageFolder(const std::string& path) {
  Visited visited;
  std::vector<fs::path> classes;
  if (!ListDirectory(path, visited, classes, nullptr)) {
    return NotFoundError("cannot list " + path);
  }
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) {
    return InvalidArgumentError("dataset " + path +
                                " has no class subfolders (expected DIR/<class>/<image>)");
  }
  std::vector<ImageEntry> entries;
  ScanProgress progress("listing " + path);
  for (size_t label = 0; label < classes.size(); ++label) {
    for (std::string& f : ListClass(classes[label], visited)) {
      entries.push_back({std::move(f), static_cast<int64_t>(label)});
      progress.Add();
    }
  }
  return entries;
}

Result<std::vector<ImageEntry>> ListTsv(const std::string& path) {
  std::vector<uint8_t> bytes;
  BATCHCAST_RETURN_IF_ERROR(ReadFileBytes(path, bytes).WithContext("cannot read " + path));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const fs::path base = fs::path(path).parent_path();
  std::vector<ImageEntry> entries;
  size_t pos = 0;
  for (int n = 1; pos < text.size(); ++n) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    std::string line(text.substr(pos, eol - pos));
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.rfind('\t');
    if (tab == std::string::npos || tab == 0) {
      return InvalidArgumentError(path + ":" + std::to_string(n) + ": expected path<TAB>label");
    }
    int64_t label = 0;
    try {
      size_t used = 0;
      label = std::stoll(line.substr(tab + 1), &used);
      if (used != line.size() - tab - 1 || label < 0) throw std::invalid_argument("label");
    } catch (const std::exception&) {
      return InvalidArgumentError(path + ":" + std::to_string(n) + ": bad label '" +
                                  line.substr(tab + 1) + "'");
    }
    fs::path p = line.substr(0, tab);
    if (p.is_relative()) p = base / p;
    entries.push_back({p.string(), label});
  }
  return entries;
}

}  // namespace

Result<std::vector<ImageEntry>> ListImageDataset(const std::string& path) {
  std::error_code ec;
  const fs::file_status s = fs::status(path, ec);
  if (ec || !fs::exists(s)) {
    return NotFoundError(
        "dataset " + path + " does not exist" +
        (ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")" : ""));
  }
  Result<std::vector<ImageEntry>> entries =
      fs::is_directory(s) ? ListImageFolder(path) : ListTsv(path);
  if (entries.ok() && entries->empty()) {
    return InvalidArgumentError("dataset " + path + " holds no image files");
  }
  return entries;
}

// Note [Read retries] (read_retry.h): a failure that says nothing about the
// file's content is Unavailable, so that it is retried; a file that is
// missing or refused is NotFound / PermissionDenied.
StatusCode ReadErrorCode(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ELOOP:
    case ENAMETOOLONG:
      return StatusCode::kNotFound;
    case EACCES:
    case EPERM:
      return StatusCode::kPermissionDenied;
    case EISDIR:
    case EINVAL:
    case EFBIG:
    case EOVERFLOW:
      return StatusCode::kInvalidArgument;
    default:  // EMFILE, ENFILE, ENOMEM, EIO, ESTALE, EAGAIN, ETIMEDOUT, EINTR, ...
      return StatusCode::kUnavailable;
  }
}

namespace {
Status ReadError(const char* what, int err) {
  return Status(ReadErrorCode(err), std::string(what) + ": " + std::strerror(err));
}
}  // namespace

Result<int> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (regular files
  // ignore the flag).
  int fd = -1;
  do {
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ReadError("cannot open", errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ReadError("cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return InvalidArgumentError(std::string("cannot read: it is ") + KindOf(st.st_mode) +
                                ", not a regular file");
  }
  return fd;
}

Status ReadFileBytes(const std::string& path, std::vector<uint8_t>& out, size_t limit) {
  BATCHCAST_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ReadError("cannot stat", err);
  }
  const size_t want = std::min<size_t>(static_cast<size_t>(st.st_size), limit);
  out.resize(want);
  size_t got = 0;
  int err = 0;
  while (got < want) {
    const ssize_t r = read(fd, out.data() + got, want - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fd);
  out.resize(got);
  if (err != 0) return ReadError("cannot read", err);
  if (got < want) {
    // A file that shrank since fstat, or a file system that returned less
    // than it holds: either way the bytes are not the file's, so the read is
    // tried again (Note [Read retries]).
    return UnavailableError("short read: got " + std::to_string(got) + " of " +
                            std::to_string(want) + " bytes");
  }
  return Status::Ok();
}

}  // namespace batchcast
