// `batchcast-server key [FILE] [--new]`: the CURVE key of tcp:// endpoints
// (Note [Transport security], core/src/curve_key.h).
//
//   batchcast-server key            the key this user's servers and consumers
//                                   use ($BATCHCAST_KEY_FILE, else the user's
//                                   key in the runtime directory, made if
//                                   missing): its path on stdout, its public
//                                   key and how to use it elsewhere on stderr
//   batchcast-server key FILE       the same for FILE (which must exist)
//   batchcast-server key --new [FILE]  writes a new key pair there (mode
//                                   0600), replacing the old one
//
// Header-only: used by batchcast-server, which links ZeroMQ.
#pragma once

#include <zmq.h>

#include <iostream>
#include <string>

#include "core/src/curve_key.h"
#include "core/src/zmq_curve_ops.h"

namespace batchcast {

// The key file after `key [--new] FILE` ("" = the default choice).
inline Result<KeyFile> KeyForCommand(const std::string& file, bool renew) {
  const CurveOps ops = ZmqCurveOps();
  if (!renew) return LoadKey(file, KeyUse::kServe, ops);
  BATCHCAST_ASSIGN_OR_RETURN(std::string path, ChooseKeyFile(file));
  BATCHCAST_ASSIGN_OR_RETURN(CurveKeyPair key, WriteNewKeyFile(path, ops));
  return KeyFile{path, key, false, true};
}

// Returns the exit status.
inline int KeyCommand(const std::string& file, bool renew) {
  Result<KeyFile> key = KeyForCommand(file, renew);
  if (!key.ok()) {
    std::cerr << "batchcast-server key: " << key.status().ToString() << "\n";
    return 1;
  }
  std::cout << key->path << "\n";
  std::cerr << "public key: " << key->key.public_key << (key->created ? " (new)" : "") << "\n"
            << "tcp:// servers and consumers holding this file admit each other (CURVE); keep "
               "it mode 0600.\n"
            << "Elsewhere (another machine or container) copy the file and pass it: "
               "Loader(..., key_file=FILE),\n"
            << "ConsumerOptions::key_file, --key-file FILE or " << kKeyFileVariable << "=FILE.\n";
  if (renew) {
    std::cerr << "Servers already running keep the old key until they restart; they refuse "
                 "consumers holding the new one.\n";
  }
  return 0;
}

}  // namespace batchcast
