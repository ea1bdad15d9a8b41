#include "core/src/curve_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/src/file_mode.h"
#include "core/src/runtime_dir.h"

namespace batchcast {
namespace {

constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
// Larger files are not key files (a certificate is about 300 bytes).
constexpr size_t kMaxKeyFileBytes = 64 << 10;
constexpr std::string_view kMakeOne = "`batchcast-server key --new FILE` makes one";

// $BATCHCAST_KEY_FILE, or null when unset or empty.
const char* EnvironmentKeyFile() {
  const char* env = std::getenv(kKeyFileVariable);
  return env != nullptr && *env != '\0' ? env : nullptr;
}

std::string_view Trim(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t' || t.front() == '\r')) {
    t.remove_prefix(1);
  }
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) {
    t.remove_suffix(1);
  }
  return t;
}

Status NotAvailable() {
  return UnavailableError(
      "tcp:// endpoints need ZeroMQ's CURVE security, and this libzmq was built without it (no "
      "libsodium); use an ipc:// endpoint (a server name) or a libzmq with CURVE (Debian's has "
      "it)");
}

// The value of `name = "value"` lines (ZeroMQ certificates: czmq, pyzmq).
struct ParsedKey {
  std::string public_key, secret_key;
};
ParsedKey Parse(std::string_view text) {
  ParsedKey out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = Trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const size_t eq = line.find('=');
    if (line.empty() || line.front() == '#' || eq == std::string_view::npos) continue;
    const std::string_view name = Trim(line.substr(0, eq));
    std::string_view value = Trim(line.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (name == "public-key") out.public_key = value;
    if (name == "secret-key") out.secret_key = value;
  }
  return out;
}

std::string Format(const CurveKeyPair& key) {
  return "#   batchcast CURVE key pair (ZeroMQ certificate format).\n"
         "#   Keep it secret: whoever can read this file can connect to the batchcast\n"
         "#   servers that use it (tcp:// endpoints). Keep it mode 0600.\n"
         "\n"
         "metadata\n"
         "curve\n"
         "    public-key = \"" +
         key.public_key +
         "\"\n"
         "    secret-key = \"" +
         key.secret_key + "\"\n";
}

Result<std::string> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return NotFoundError("key file " + path + " does not exist");
    }
    if (err == EACCES || err == EPERM) {
      return PermissionDeniedError("cannot read key file " + path + ": " + std::strerror(err));
    }
    return InvalidArgumentError("cannot open key file " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  Status bad;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bad = InvalidArgumentError("key file " + path + " is not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    bad = PermissionDeniedError(
        "key file " + path + " may be read by other users (mode " + FileModeText(st.st_mode) +
        "): whoever reads it can connect to your servers; `chmod 600 " + path +
        "` (and, if others may have read it, `batchcast-server key --new " + path + "`)");
  } else if (static_cast<size_t>(st.st_size) > kMaxKeyFileBytes) {
    bad = InvalidArgumentError("key file " + path + " is " + std::to_string(st.st_size) +
                               " bytes long: not a key file");
  }
  std::string text;
  if (bad.ok()) {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = text.empty() ? 0 : pread(fd, text.data(), text.size(), 0);
    if (n < 0) {
      bad = InvalidArgumentError("cannot read key file " + path + ": " + std::strerror(errno));
    }
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  if (!bad.ok()) return bad;
  return text;
}

// Writes `text` to a new file next to `path` (mode 0600); its name.
Result<std::string> WriteTemporary(const std::string& path, const std::string& text) {
  std::string tmp = path + ".XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    return UnavailableError("cannot write a key file next to " + path + ": " +
                            std::strerror(errno));
  }
  bool ok = fchmod(fd, 0600) == 0;
  ok = ok && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ok && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!ok) {
    unlink(tmp.c_str());
    return UnavailableError("cannot write key file " + path + ": " + std::strerror(err));
  }
  return tmp;
}

Result<std::string> NewKeyFileText(const CurveOps& ops, CurveKeyPair& key) {
  if (!ops.available) return NotAvailable();
  char pub[41] = {}, sec[41] = {};
  if (ops.keypair(pub, sec) != 0) return InternalError("making a CURVE key pair failed");
  key = CurveKeyPair{pub, sec};
  return Format(key);
}

// Makes the user's key at `path` unless another process made it first
// (link() never replaces); then reads what is there.
Result<CurveKeyPair> CreateUserKey(const std::string& path, const CurveOps& ops, bool& created) {
  CurveKeyPair key;
  BATCHCAST_ASSIGN_OR_RETURN(std::string text, NewKeyFileText(ops, key));
  BATCHCAST_ASSIGN_OR_RETURN(std::string tmp, WriteTemporary(path, text));
  const int rc = link(tmp.c_str(), path.c_str());
  const int err = errno;
  unlink(tmp.c_str());
  if (rc == 0) {
    created = true;
    return key;
  }
  if (err != EEXIST) {
    return UnavailableError("cannot create key file " + path + ": " + std::strerror(err));
  }
  return ReadKeyFile(path, ops);
}

}  // namespace

bool IsZ85Key(std::string_view text) {
  if (text.size() != 40) return false;
  for (char c : text) {
    if (kZ85Alphabet.find(c) == std::string_view::npos) return false;
  }
  return true;
}

Result<std::string> UserKeyPath() {
  BATCHCAST_ASSIGN_OR_RETURN(std::string dir, RuntimeDir());
  return dir + "/curve.key";
}

Result<std::string> ChooseKeyFile(std::string_view key_file) {
  if (!key_file.empty()) return std::string(key_file);
  if (const char* env = EnvironmentKeyFile()) return std::string(env);
  return UserKeyPath();
}

Result<CurveKeyPair> ReadKeyFile(const std::string& path, const CurveOps& ops) {
  if (!ops.available) return NotAvailable();
  BATCHCAST_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  const ParsedKey parsed = Parse(text);
  if (parsed.secret_key.empty()) {
    return InvalidArgumentError(
        "key file " + path +
        " has no secret-key line: a batchcast key file holds a key pair (a public key alone "
        "cannot connect); " +
        std::string(kMakeOne));
  }
  if (!IsZ85Key(parsed.secret_key)) {
    return InvalidArgumentError("key file " + path +
                                ": its secret-key is not 40 characters of Z85 text");
  }
  char derived[41] = {};
  if (ops.derive_public(derived, parsed.secret_key.c_str()) != 0) {
    return InvalidArgumentError("key file " + path + ": its secret-key is not a CURVE key");
  }
  if (!parsed.public_key.empty() && parsed.public_key != derived) {
    return InvalidArgumentError("key file " + path +
                                ": its public-key does not belong to its secret-key");
  }
  return CurveKeyPair{derived, parsed.secret_key};
}

Result<CurveKeyPair> WriteNewKeyFile(const std::string& path, const CurveOps& ops) {
  CurveKeyPair key;
  BATCHCAST_ASSIGN_OR_RETURN(std::string text, NewKeyFileText(ops, key));
  BATCHCAST_ASSIGN_OR_RETURN(std::string tmp, WriteTemporary(path, text));
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return UnavailableError("cannot write key file " + path + ": " + std::strerror(err));
  }
  return key;
}

Result<KeyFile> LoadKey(std::string_view key_file, KeyUse use, const CurveOps& ops) {
  if (!ops.available) return NotAvailable();
  KeyFile out;
  BATCHCAST_ASSIGN_OR_RETURN(out.path, ChooseKeyFile(key_file));
  // Where the path came from, for messages.
  const std::string from =
      !key_file.empty() ? "key_file (--key-file)" : "$" + std::string(kKeyFileVariable);
  out.user_key = key_file.empty() && EnvironmentKeyFile() == nullptr;
  Result<CurveKeyPair> key = ReadKeyFile(out.path, ops);
  if (key.ok()) {
    out.key = *std::move(key);
    return out;
  }
  if (key.status().code() != StatusCode::kNotFound) return key.status();
  if (!out.user_key) {
    return NotFoundError("key file " + out.path + " (from " + from + ") does not exist; " +
                         std::string(kMakeOne) +
                         ", or copy the key file the server uses (its `batchcast-server key`)");
  }
  if (use == KeyUse::kConnect) {
    return NotFoundError(
        "no key to connect over tcp:// with: " + out.path +
        " does not exist. A server of this user on this machine makes it when it binds tcp://; "
        "for a server of another machine or user, or one started with --key-file, pass its key "
        "file (key_file, --key-file or $" +
        std::string(kKeyFileVariable) + ")");
  }
  BATCHCAST_ASSIGN_OR_RETURN(out.key, CreateUserKey(out.path, ops, out.created));
  return out;
}

}  // namespace batchcast
