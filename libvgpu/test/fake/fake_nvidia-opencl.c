/*
 * fake_nvidia-opencl.c — a stand-in for NVIDIA's OpenCL ICD (libnvidia-opencl.so.1) for libvgpu's
 * tests: the three entry points an ICD loader looks up in a vendor library. Nothing runs here.
 */
#define FAKE_EXPORT __attribute__((visibility("default")))
typedef int cl_int;
typedef unsigned int cl_uint;
typedef struct _cl_platform_id *cl_platform_id;

static char the_platform;
FAKE_EXPORT cl_int clIcdGetPlatformIDsKHR(cl_uint n, cl_platform_id *platforms, cl_uint *num) {
  if (num) *num = 1;
  if (n && platforms) platforms[0] = (cl_platform_id)(void *)&the_platform;
  return 0;
}
FAKE_EXPORT cl_int clGetPlatformIDs(cl_uint n, cl_platform_id *platforms, cl_uint *num) {
  return clIcdGetPlatformIDsKHR(n, platforms, num);
}
FAKE_EXPORT void *clGetExtensionFunctionAddress(const char *name) {
  (void)name;
  return (void *)clIcdGetPlatformIDsKHR;
}
