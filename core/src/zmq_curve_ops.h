// ZmqCurveOps(): core's CurveOps (core/src/curve_key.h) from libzmq. Header
// only, for the code that links ZeroMQ (client, server, tools, tests); core
// itself does not.
#pragma once

#include <zmq.h>

#include "core/src/curve_key.h"

namespace batchcast {

inline CurveOps ZmqCurveOps() {
  return CurveOps{zmq_has("curve") != 0, &zmq_curve_keypair, &zmq_curve_public};
}

}  // namespace batchcast
