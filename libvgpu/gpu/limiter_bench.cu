// limiter_bench.cu — a saturating workload for the SM limiter's GPU benchmark (issue 10).
//
// Work is a fixed-work FMA kernel filling every SM, so throughput measures GPU time received.
// The program keeps at most two batches in flight (like a training loop with a bounded queue)
// and counts batches that complete inside its measurement window.
//
//   limiter_bench --calibrate                       prints "CALIB ipus=<iterations per us>"
//   limiter_bench --shape short|long|mixed --ipus X --settle S --measure M [--total T]
//
// Shapes (nominal durations when the kernel runs alone on the whole GPU):
//   short  400 x 50 us kernels per batch on the default stream (<<<>>> -> cuLaunchKernel, or
//          cuLaunchKernel_ptsz when built with --default-stream per-thread)
//   long   one 20 ms kernel per batch on the default stream
//   xlong  one 1 s kernel per batch on the default stream (seconds-long kernels, issue 15)
//   xxlong one 5 s kernel per batch on the default stream
//   streams N non-blocking streams (--streams N), each kernel 1/N of the GPU's blocks for 200 us,
//          at most two in flight per stream, completions polled (cudaEventQuery) so one stalled
//          stream never holds the others back; RESULT adds "min_stream_per_s" (the slowest
//          stream's completions per second) and "streams" (issue 35: many busy streams)
//   mixed  three non-blocking streams per batch: 100 x 50 us (cudaLaunchKernel), 3 x 2 ms
//          (cudaLaunchKernelEx -> cuLaunchKernelEx), one CUDA graph of 4 x 1 ms kernels
//          (cudaGraphLaunch -> cuGraphLaunch) and one 1 ms cooperative launch
//          (cudaLaunchCooperativeKernel -> cuLaunchCooperativeKernel), joined per batch
// Output: "READY <epoch_us>" when the first batch is issued, then one line
//   RESULT {"pid":..,"shape":"..","batches":..,"window_s":..,"per_s":..,"t0_us":..}
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/time.h>
#include <unistd.h>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "limiter_bench: %s failed: %s (line %d)\n", #x, cudaGetErrorString(e_), \
              __LINE__);                                                               \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)

__global__ void fma_spin(float *sink, long long iters) {
  float a = threadIdx.x * 1e-3f, b = 1.000001f, c = 0.999999f;
#pragma unroll 4
  for (long long i = 0; i < iters; i++) {
    a = fmaf(a, b, c);
    b = fmaf(b, c, a * 1e-9f);
  }
  if (a == 1234.5f && b == 6.5f) sink[blockIdx.x] = a;  // never true; keeps the loop alive
}

static long long now_us() {
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  return (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
}

struct Launcher {
  int grid = 0, coop_grid = 0, block = 256;
  double ipus = 0;
  float *sink = nullptr;
  long long iters(double us) const {  // 64-bit: a 5 s kernel exceeds INT_MAX iterations
    long long n = (long long)(ipus * us + 0.5);
    return n < 1 ? 1 : n;
  }
  void plain(double us, cudaStream_t s) {
    fma_spin<<<grid, block, 0, s>>>(sink, iters(us));
    CK(cudaGetLastError());
  }
  void via_runtime(double us, cudaStream_t s) {
    long long it = iters(us);
    void *args[] = {&sink, &it};
    CK(cudaLaunchKernel((const void *)fma_spin, dim3(grid), dim3(block), args, 0, s));
  }
  void via_ex(double us, cudaStream_t s) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.stream = s;
    CK(cudaLaunchKernelEx(&cfg, fma_spin, sink, iters(us)));
  }
  void cooperative(double us, cudaStream_t s) {
    long long it = iters(us);
    void *args[] = {&sink, &it};
    CK(cudaLaunchCooperativeKernel((const void *)fma_spin, dim3(coop_grid), dim3(block), args, 0,
                                   s));
  }
};

// Many busy streams in one process: each stream keeps two kernels in flight; completions are
// polled so the loop never waits on one stream while another could progress.
static int run_streams(Launcher &L, int n, double settle, double measure, double total) {
  cudaStream_t *st = new cudaStream_t[n];
  cudaEvent_t *ev = new cudaEvent_t[2 * n];
  int *outstanding = new int[n], *oldest = new int[n];
  long *in_window = new long[n];
  int grid = L.grid / n > 0 ? L.grid / n : 1;
  for (int i = 0; i < n; i++) {
    CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev[2 * i], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&ev[2 * i + 1], cudaEventDisableTiming));
    outstanding[i] = oldest[i] = 0;
    in_window[i] = 0;
  }
  long long it = L.iters(200);
  long long t0 = now_us();
  printf("READY %lld\n", t0);
  fflush(stdout);
  long long win_a = t0 + (long long)(settle * 1e6), win_b = win_a + (long long)(measure * 1e6);
  long long end = t0 + (long long)(total * 1e6);
  for (;;) {
    long long now = now_us();
    if (now >= end) break;
    for (int i = 0; i < n; i++) {
      while (outstanding[i] > 0 && cudaEventQuery(ev[2 * i + oldest[i]]) == cudaSuccess) {
        long long tc = now_us();
        if (tc >= win_a && tc < win_b) in_window[i]++;
        oldest[i] ^= 1;
        outstanding[i]--;
      }
      while (outstanding[i] < 2) {
        fma_spin<<<grid, L.block, 0, st[i]>>>(L.sink, it);
        CK(cudaGetLastError());
        CK(cudaEventRecord(ev[2 * i + (oldest[i] ^ outstanding[i])], st[i]));
        outstanding[i]++;
      }
    }
  }
  CK(cudaDeviceSynchronize());
  long total_k = 0, min_k = -1;
  for (int i = 0; i < n; i++) {
    total_k += in_window[i];
    if (min_k < 0 || in_window[i] < min_k) min_k = in_window[i];
  }
  double window_s = (win_b - win_a) / 1e6;
  printf("RESULT {\"pid\":%d,\"shape\":\"streams\",\"streams\":%d,\"batches\":%ld,\"window_s\":%.3f,"
         "\"per_s\":%.4f,\"min_stream_per_s\":%.4f,\"t0_us\":%lld}\n",
         (int)getpid(), n, total_k, window_s, total_k / window_s, min_k / window_s, t0);
  return 0;
}

int main(int argc, char **argv) {
  std::string shape = "short";
  double ipus = 0, settle = 2, measure = 8, total = 0;
  int nstreams = 1;
  bool calibrate = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> const char * {
      if (i + 1 >= argc) {
        fprintf(stderr, "missing value for %s\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--shape") shape = next();
    else if (a == "--ipus") ipus = atof(next());
    else if (a == "--settle") settle = atof(next());
    else if (a == "--measure") measure = atof(next());
    else if (a == "--total") total = atof(next());
    else if (a == "--streams") nstreams = atoi(next());
    else if (a == "--calibrate") calibrate = true;
    else {
      fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (total < settle + measure) total = settle + measure;

  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  Launcher L;
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fma_spin, L.block, 0));
  if (per_sm < 1) per_sm = 1;
  L.grid = prop.multiProcessorCount * per_sm;
  L.coop_grid = L.grid;  // exactly co-resident: valid for a cooperative launch
  CK(cudaMalloc(&L.sink, sizeof(float) * (size_t)L.grid));

  if (calibrate) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int probe = 1 << 15;
    L.ipus = 1;
    for (int w = 0; w < 3; w++) fma_spin<<<L.grid, L.block>>>(L.sink, probe);
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(a));
    for (int r = 0; r < 10; r++) fma_spin<<<L.grid, L.block>>>(L.sink, probe);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    double us_per_kernel = ms * 1000.0 / 10;
    printf("CALIB ipus=%.4f gpu=\"%s\" sms=%d blocks_per_sm=%d probe_us=%.1f\n",
           probe / us_per_kernel, prop.name, prop.multiProcessorCount, per_sm, us_per_kernel);
    return 0;
  }
  if (ipus <= 0) {
    fprintf(stderr, "--ipus required (run --calibrate first)\n");
    return 2;
  }
  L.ipus = ipus;

  if (shape == "streams") {
    if (nstreams < 1 || nstreams > 1024) {
      fprintf(stderr, "--streams must be 1..1024\n");
      return 2;
    }
    return run_streams(L, nstreams, settle, measure, total);
  }
  cudaStream_t s0 = 0, s1 = 0, s2 = 0;
  cudaGraphExec_t gexec = nullptr;
  if (shape == "mixed") {
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < 4; k++) L.plain(1000, s2);
    CK(cudaStreamEndCapture(s2, &g));
    CK(cudaGraphInstantiate(&gexec, g, 0));
  } else if (shape != "short" && shape != "long" && shape != "xlong" && shape != "xxlong") {
    fprintf(stderr, "unknown shape %s\n", shape.c_str());
    return 2;
  }

  const int depth = 3;
  cudaEvent_t done[depth], j1[depth], j2[depth];
  for (int k = 0; k < depth; k++) {
    CK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&j1[k], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&j2[k], cudaEventDisableTiming));
  }
  long long t0 = now_us();
  printf("READY %lld\n", t0);
  fflush(stdout);
  long long win_a = t0 + (long long)(settle * 1e6), win_b = win_a + (long long)(measure * 1e6);
  long long end = t0 + (long long)(total * 1e6);
  long batches_in_window = 0;
  long long first_tc = 0, last_tc = 0; /* completions seen inside the window */
  long b = 0;
  for (;; b++) {
    int k = (int)(b % depth);
    if (shape == "short") {
      for (int i = 0; i < 400; i++) L.plain(50, 0);
      CK(cudaEventRecord(done[k], 0));
    } else if (shape == "long") {
      L.plain(20000, 0);
      CK(cudaEventRecord(done[k], 0));
    } else if (shape == "xlong") {
      L.plain(1000000, 0);
      CK(cudaEventRecord(done[k], 0));
    } else if (shape == "xxlong") {
      L.plain(5000000, 0);
      CK(cudaEventRecord(done[k], 0));
    } else {
      for (int i = 0; i < 100; i++) {
        L.via_runtime(50, s0);
        if (i == 30) {
          for (int x = 0; x < 3; x++) L.via_ex(2000, s1);
        }
        if (i == 60) {
          CK(cudaGraphLaunch(gexec, s2));
          L.cooperative(1000, s2);
        }
      }
      CK(cudaEventRecord(j1[k], s1));
      CK(cudaEventRecord(j2[k], s2));
      CK(cudaStreamWaitEvent(s0, j1[k], 0));
      CK(cudaStreamWaitEvent(s0, j2[k], 0));
      CK(cudaEventRecord(done[k], s0));
    }
    if (b >= depth - 1) {
      int w = (int)((b - (depth - 1)) % depth);
      CK(cudaEventSynchronize(done[w]));
      long long tc = now_us();
      if (tc >= win_a && tc < win_b) {
        if (batches_in_window++ == 0) first_tc = tc;
        last_tc = tc;
      }
      if (tc >= end) break;
    }
  }
  CK(cudaDeviceSynchronize());
  double window_s = (win_b - win_a) / 1e6;
  // Rate over whole completion-to-completion periods when there are a few: exact for the
  // periodic pattern of seconds-long kernels under a limit (a window holding 5 kernels of 1 s at
  // 20 % would otherwise be quantized by +-1 kernel = +-4 pp); the plain count for the rest.
  double per_s = batches_in_window / window_s;
  if (batches_in_window >= 3 && batches_in_window < 200 && last_tc > first_tc)
    per_s = (batches_in_window - 1) / ((last_tc - first_tc) / 1e6);
  printf("RESULT {\"pid\":%d,\"shape\":\"%s\",\"batches\":%ld,\"window_s\":%.3f,\"per_s\":%.4f,"
         "\"t0_us\":%lld}\n",
         (int)getpid(), shape.c_str(), batches_in_window, window_s, per_s, t0);
  return 0;
}
