// CURVE keys: which key file a tcp:// server or consumer uses, and reading,
// checking and writing key files.
//
// Note [Transport security]
// ipc:// endpoints (the default: a server name) are Unix sockets in the
// runtime directory, which only the user may enter (0700; the socket is
// 0600). Only this user's processes (and root) can connect; nothing more is
// done for them.
// tcp:// endpoints can be reached by every local user (loopback) and, bound
// beyond loopback (allow_remote, --allow-remote), from other machines. Every
// tcp:// connection uses ZeroMQ's CURVE security (CurveZMQ: a curve25519 key
// exchange, then every message encrypted and authenticated) with one key
// pair, the *key*:
//  - The server is the CURVE server with the key's secret part. A consumer
//    (or `batchcast-server stat`) is a CURVE client that expects the key's
//    public part as the server's (so it talks only to a holder of the key)
//    and authenticates with the key pair itself: the server's ZAP handler
//    admits only clients whose public key is the key's own
//    (server/src/curve_server.h). Whoever can read the key file can connect;
//    nobody else completes the handshake, so no HELLO, STATS or other message
//    of theirs ever reaches the control loop. A refused consumer is told why
//    at once (client/src/curve_client.h).
//  - Which key: the key_file option (ServerOptions::key_file,
//    ConsumerOptions::key_file, --key-file, Loader(key_file=...)), else
//    $BATCHCAST_KEY_FILE, else the user's key <runtime dir>/curve.key, which
//    a server binding tcp:// makes at first use (and `batchcast-server key`).
//    So one user's servers and consumers on one machine need nothing; another
//    machine (or container) gets a copy of the key file.
//  - One key per user, not per server name: a tcp:// endpoint does not name
//    its server, so a consumer could not tell which key to read; and the
//    directory that holds the key is the user's.
//  - Key files are ZeroMQ certificates (`public-key = "Z85"`,
//    `secret-key = "Z85"` lines, as czmq and pyzmq write them), mode 0600: a
//    file that others may read is refused (as ssh refuses such keys). A
//    server reads its key once, at start. `batchcast-server key --new`
//    writes a new pair: servers started afterwards use it; running ones keep
//    the old key until restarted and refuse consumers holding the new one
//    (PermissionDenied, saying so).
//
// Thread-safety: pure functions (file system reads and writes; creating the
// user's key is safe in several processes at once: the first one wins).
#pragma once

#include <string>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast {

// A CURVE key pair, each part 40 characters of Z85 text.
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
};

// The curve25519 operations, from whoever links ZeroMQ (core does not):
// {zmq_has("curve") != 0, zmq_curve_keypair, zmq_curve_public}.
struct CurveOps {
  bool available = false;
  int (*keypair)(char* z85_public, char* z85_secret) = nullptr;
  int (*derive_public)(char* z85_public, const char* z85_secret) = nullptr;
};

// The environment variable naming a key file when no option does.
inline constexpr const char* kKeyFileVariable = "BATCHCAST_KEY_FILE";

// "<runtime dir>/curve.key".
Result<std::string> UserKeyPath();

// Which key file: `key_file` (an option; "" = none), else
// $BATCHCAST_KEY_FILE, else UserKeyPath().
Result<std::string> ChooseKeyFile(std::string_view key_file);

// What a key is for: a server makes the user's key when it is missing, a
// consumer (or `stat`) only reads it.
enum class KeyUse { kServe, kConnect };

struct KeyFile {
  std::string path;
  CurveKeyPair key;
  bool user_key = false;  // the user's key of the runtime directory
  bool created = false;   // made by this call
};

// The key for a tcp:// endpoint: from `key_file` (an option; "" = none),
// else $BATCHCAST_KEY_FILE, else the user's key (made when missing, for
// kServe). Errors, each saying what to do: Unavailable when this libzmq has
// no CURVE; NotFound when the file does not exist; PermissionDenied when it
// cannot be read or others may read it; InvalidArgument when it is not a key
// file.
Result<KeyFile> LoadKey(std::string_view key_file, KeyUse use, const CurveOps& ops);

// Reads and checks the key file at `path` (see LoadKey for the errors). A
// file without a public-key line is fine (the public key is derived).
Result<CurveKeyPair> ReadKeyFile(const std::string& path, const CurveOps& ops);

// Writes a new key pair to `path`, mode 0600, replacing what is there
// (atomically: readers see the old file or the new one).
Result<CurveKeyPair> WriteNewKeyFile(const std::string& path, const CurveOps& ops);

// True when `text` is 40 characters of the Z85 alphabet (a 32-byte key).
bool IsZ85Key(std::string_view text);

}  // namespace batchcast
