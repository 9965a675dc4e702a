// A run of three dumps of one node with two memories, written with memstate_writer.hpp into the
// directory given (which must exist and be empty): what a runtime would write periodically and
// at its allocator's failure path.
//
//   g++ -std=c++17 -Wall -Wextra -Werror -I writers/cpp writers/cpp/example.cpp -o example
//   ./example DIR && memstate import DIR
#include "memstate_writer.hpp"

#include <cstdio>

int main(int argc, char** argv)
{
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (an existing, empty directory)\n", argv[0]);
    return 2;
  }
  const std::uint64_t gpu = 0x1e00000000000003ull, sys = 0x1e00000000000000ull;
  const std::uint64_t mib = 1ull << 20;
  for (std::int64_t seq = 0; seq < 3; ++seq) {
    const bool oom = seq == 2;
    memstate::DumpWriter dump(argv[1],
                              {"cpp-example", 0, seq, seq * 1000000000, oom ? "oom" : "periodic"});
    // The GPU framebuffer: seq + 1 instances of 1 MiB, 2 MiB apart, in a 16 MiB memory.
    dump.memory(gpu, "GPU_FB_MEM", 16 * mib);
    for (std::int64_t i = 0; i <= seq; ++i) {
      dump.allocation(100 + static_cast<std::uint64_t>(i), "instance", "valid",
                      static_cast<std::uint64_t>(i) * 2 * mib, mib, "example.cpp:27");
    }
    if (oom) {
      dump.failed_request(15 * mib);
    }
    // System memory: one 4 KiB future.
    dump.memory(sys, "SYSTEM_MEM", 64 * mib);
    dump.allocation(1, "future", "valid", 0, 4096);
    if (!dump.finish()) {
      std::fprintf(stderr, "error: %s\n", dump.error().c_str());
      return 1;
    }
  }
  return 0;
}
