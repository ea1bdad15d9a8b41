// cupti_trace: a CUPTI injection library that writes what a CUDA process did on
// the GPU (kernels, copies, memsets) and in the CUDA runtime and driver APIs,
// one text line per record, so that a process we cannot run under a profiler
// (the GPU host has no Nsight Systems) can still be seen. Issue 9 found with it
// that nvJPEG's hardware decode waits on an event once per image
// (benchmarks/RESULTS.md, "Where the server's decode waits").
//
// Build (on the GPU host; CUPTI ships with the CUDA toolkit):
//   CUPTI=$(find / -xdev -name 'libcupti.so*' | grep -v stub | head -1)
//   INC=$(dirname "$(find / -xdev -name cupti.h | head -1)")
//   g++ -O1 -shared -fPIC -I/usr/local/cuda/include -I"$INC" benchmarks/cupti_trace.cc
//       "$CUPTI" -Wl,-rpath,"$(dirname "$CUPTI")" -o /tmp/libcupti_trace.so
// (one line; benchmarks/issue9_gpu_run.sh's `trace` part does it).
// Use: CUDA_INJECTION64_PATH=/tmp/libcupti_trace.so BC_CUPTI_DIR=DIR the-program
// (e.g. BC_SERVER_PREFIX for the servers of gpu_producer.py and
// fed_coupling.py), then python3 benchmarks/cupti_stats.py DIR/cupti_PID.txt.
//
// Lines (times in ns of CUPTI's clock):
//   K start end queued submitted stream corr name   a kernel
//   M start end bytes stream copy_kind corr         a copy
//   S start end bytes stream corr                   a memset
//   R|D start end thread corr name                  a runtime | driver API call
//   T thread name                                   a thread's name, once
// `thread` is the system thread id (gettid); `corr` links a kernel or copy
// to the API call that launched it, and so to its thread.
// Records are flushed every 500 ms and at exit (a process killed with SIGKILL
// loses its last half second). A measuring tool, not part of the library.
#include <cupti.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>

namespace {

FILE* g_out = nullptr;
std::mutex g_mu;
std::set<uint32_t> g_named;  // threads whose T line is written; guarded by g_mu

// Writes a thread's name (its /proc comm, e.g. bc-producer) the first time it
// makes a call. REQUIRES: g_mu held.
void NameThread(uint32_t tid) {
  if (!g_named.insert(tid).second) return;
  std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  if (!std::getline(comm, name) || name.empty()) name = "?";
  fprintf(g_out, "T %u %s\n", tid, name.c_str());
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void WriteApi(const CUpti_Activity* rec) {
  const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
  const bool runtime = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
  const char* name = nullptr;
  cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid,
                       &name);
  NameThread(a->threadId);
  fprintf(g_out, "%c %llu %llu %u %u %s\n", runtime ? 'R' : 'D',
          static_cast<unsigned long long>(a->start), static_cast<unsigned long long>(a->end),
          a->threadId, a->correlationId, name ? name : "?");
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        fprintf(g_out, "K %llu %llu %llu %llu %u %u %s\n",
                static_cast<unsigned long long>(k->start), static_cast<unsigned long long>(k->end),
                static_cast<unsigned long long>(k->queued),
                static_cast<unsigned long long>(k->submitted), k->streamId, k->correlationId,
                k->name ? k->name : "?");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        fprintf(g_out, "M %llu %llu %llu %u %u %u\n", static_cast<unsigned long long>(m->start),
                static_cast<unsigned long long>(m->end), static_cast<unsigned long long>(m->bytes),
                m->streamId, static_cast<unsigned>(m->copyKind), m->correlationId);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        fprintf(g_out, "S %llu %llu %llu %u %u\n", static_cast<unsigned long long>(m->start),
                static_cast<unsigned long long>(m->end), static_cast<unsigned long long>(m->bytes),
                m->streamId, m->correlationId);
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER:
        WriteApi(rec);
        break;
      default:
        break;
    }
  }
  free(buffer);
}

void Flush() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out != nullptr) fflush(g_out);
}

}  // namespace

// Called by the CUDA driver at its initialization (CUDA_INJECTION64_PATH).
extern "C" int InitializeInjection() {
  const char* dir = getenv("BC_CUPTI_DIR");
  const std::string path =
      std::string(dir ? dir : "/tmp") + "/cupti_" + std::to_string(getpid()) + ".txt";
  g_out = fopen(path.c_str(), "w");
  if (g_out == nullptr) return 0;
  cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  cuptiActivityEnableLatencyTimestamps(1);
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
    cuptiActivityEnable(kind);
  }
  cuptiActivityFlushPeriod(500);
  std::atexit(Flush);
  return 1;
}
