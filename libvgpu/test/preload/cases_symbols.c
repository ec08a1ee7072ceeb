/*
 * cases_symbols.c — how an application reaches libvgpu's hooks under LD_PRELOAD: dlsym (default
 * and RTLD_NEXT), cuGetProcAddress by CUDA version and stream flag, the driver's trampolines, and
 * the v1 cuGetProcAddress with NVML's _v2 memory info. `cases_symbols <name>`; exit 0 = pass
 * (test/run_preload.sh runs it like cases.c; cases.h).
 */
#include "cases.h"
#undef cuGetProcAddress

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

/* dlsym hands out hooks for interposed names, the driver's pointer for the rest, NULL for none. */
static int case_dlsym(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(h != NULL);
  void *alloc = dlsym(h, "cuMemAlloc_v2");
  CHECK(in_libvgpu(alloc));
  void *sync = dlsym(h, "cuEventRecord");
  CHECK(sync != NULL && strstr(lib_of(sync), "libcuda") != NULL);
  CHECK(dlsym(h, "cuNoSuchFunction") == NULL);
  CHECK(in_libvgpu(dlsym(h, "cuGetProcAddress_v2")));
  /* RTLD_NEXT stays relative to the caller (this executable): the next cuMemAlloc_v2 after it is
   * the preloaded libvgpu's, not the driver's that follows libvgpu. */
  CHECK(in_libvgpu(dlsym(RTLD_NEXT, "cuMemAlloc_v2")));
  CHECK(strstr(lib_of(dlsym(RTLD_NEXT, "cuEventRecord")), "libcuda") != NULL);
  setup(0);
  CUresult (*fn)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))alloc;
  CUdeviceptr p;
  CHECK(fn(&p, 8 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  CHECK(fn(&p, 60 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  return 0;
}

/* cuGetProcAddress honours cudaVersion and the per-thread-stream flag. */
static int case_getproc(void) {
  setup(0);
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  CHECK(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &st) == CUDA_SUCCESS);
  CHECK(in_libvgpu(fn));
  CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
  void *v4 = NULL, *v3 = NULL, *v2 = NULL;
  CHECK(cuGetProcAddress_v2("cuCtxCreate", &v4, 12080, 0, &st) == CUDA_SUCCESS);
  CHECK(cuGetProcAddress_v2("cuCtxCreate", &v3, 11080, 0, &st) == CUDA_SUCCESS);
  CHECK(cuGetProcAddress_v2("cuCtxCreate", &v2, 10000, 0, &st) == CUDA_SUCCESS);
  CHECK(v4 == (void *)cuCtxCreate_v4 && in_libvgpu(v4));
  CHECK(v3 == dlsym(RTLD_DEFAULT, "cuCtxCreate_v3") && in_libvgpu(v3));
  CHECK(v2 == dlsym(RTLD_DEFAULT, "cuCtxCreate_v2") && in_libvgpu(v2));
  void *l = NULL, *lp = NULL;
  CHECK(cuGetProcAddress_v2("cuLaunchKernel", &l, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == CUDA_SUCCESS);
  CHECK(cuGetProcAddress_v2("cuLaunchKernel", &lp, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) ==
        CUDA_SUCCESS);
  CHECK(l != lp && in_libvgpu(l) && in_libvgpu(lp));
  CHECK(lp == dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"));
  void *s = NULL;
  CHECK(cuGetProcAddress_v2("cuEventRecord", &s, 12000, 0, &st) == CUDA_SUCCESS);
  CHECK(strstr(lib_of(s), "libcuda") != NULL); /* unknown to us: the driver's own */
  CHECK(cuGetProcAddress_v2("cuNoSuchThing", &s, 12000, 0, &st) == CUDA_ERROR_NOT_FOUND);
  void *gpa = NULL;
  CHECK(cuGetProcAddress_v2("cuGetProcAddress", &gpa, 12000, 0, &st) == CUDA_SUCCESS);
  CHECK(in_libvgpu(gpa));
  /* Through the pointer we handed out, later lookups stay interposed. */
  CUresult (*gp)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
      (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))gpa;
  CHECK(gp("cuMemFree", &fn, 12000, 0, &st) == CUDA_SUCCESS && in_libvgpu(fn));
  /* And the memory path through it is counted. */
  CUresult (*al)(CUdeviceptr *, size_t);
  CHECK(gp("cuMemAlloc", (void **)&al, 12000, 0, &st) == CUDA_SUCCESS);
  CUdeviceptr p;
  CHECK(al(&p, 16 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 16 * MiB);
  CHECK(al(&p, 60 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  unsigned long before = fakeCudaLaunchCount();
  CUresult (*lk)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                 void **, void **) = lp;
  CHECK(lk(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
  CHECK(fakeCudaLaunchCount() == before + 1);
  return 0;
}

/* FAKE_CUDA_TRAMPOLINES=1: the driver returns pointers we cannot recognise; the version table
 * still maps the request to our hook. */
static int case_getproc_fallback(void) {
  setup(0);
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  CHECK(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &st) == CUDA_SUCCESS);
  CHECK(fn == (void *)cuMemAlloc_v2 && in_libvgpu(fn));
  CUdeviceptr p;
  CHECK(((CUresult(*)(CUdeviceptr *, size_t))fn)(&p, 70 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  return 0;
}

/* NVML _v2 memory info and cuGetProcAddress v1 (CUDA 11.3-11.x callers). */
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvml_mem_v2_t;
static int case_nvml_v2_getproc_v1(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 10 * MiB) == CUDA_SUCCESS);
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  CHECK(h != NULL);
  int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
  int (*get)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  int (*mem2)(void *, nvml_mem_v2_t *) = (int (*)(void *, nvml_mem_v2_t *))dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
  CHECK(init && get && mem2 && in_libvgpu((void *)mem2));
  CHECK(init() == 0);
  void *dev = NULL;
  CHECK(get(0, &dev) == 0);
  nvml_mem_v2_t m = {.version = (unsigned)(sizeof(nvml_mem_v2_t) | (2u << 24))};
  CHECK(mem2(dev, &m) == 0);
  CHECK_EQ_U(m.total, 64 * MiB);
  CHECK_EQ_U(m.used, 10 * MiB);
  CHECK_EQ_U(m.free, 54 * MiB);
  CHECK_EQ_U(m.reserved, 0);
  void *fn = NULL;
  CHECK(cuGetProcAddress("cuMemAlloc", &fn, 11030, 0) == CUDA_SUCCESS);
  CHECK(in_libvgpu(fn));
  CHECK(((CUresult(*)(CUdeviceptr *, size_t))fn)(&a, 60 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  return 0;
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      {"dlsym", case_dlsym},
      {"getproc", case_getproc},
      {"getproc_fallback", case_getproc_fallback},
      {"nvml_v2_getproc_v1", case_nvml_v2_getproc_v1},
  };
  return run_case(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
