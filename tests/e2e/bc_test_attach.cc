// bc_test_attach: a process that decodes one ring of a server (an
// AttachedProducer) until it is killed, for the end-to-end tests of a holder
// that dies. Usage: bc_test_attach NAME RING. Prints "ATTACHED" once it
// decodes the ring, or the error and exits 1.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "batchcast/server/attached_producer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: bc_test_attach NAME RING\n";
    return 2;
  }
  auto p = batchcast::AttachedProducer::Start(argv[1], static_cast<uint32_t>(std::atoi(argv[2])));
  if (!p.ok()) {
    std::cerr << p.status().ToString() << "\n";
    return 1;
  }
  std::cout << "ATTACHED" << std::endl;
  while ((*p)->running()) usleep(20000);
  std::cerr << (*p)->status().ToString() << "\n";
  return 0;
}
