/* A stand-in CUDA driver for a machine without a GPU: cuInit says there is no device, and every
   other entry point the runtime looks up answers the same. */
#include <string.h>
#define NO_DEVICE 100
int cuInit(unsigned int flags) { (void)flags; return NO_DEVICE; }
int cuDriverGetVersion(int *version) { if (version) *version = 13000; return 0; }
int cuDeviceGetCount(int *count) { if (count) *count = 0; return 0; }
int cuGetErrorString(int error, const char **text) { (void)error; if (text) *text = "no CUDA device (stub driver)"; return 0; }
int cuGetErrorName(int error, const char **text) { (void)error; if (text) *text = "CUDA_ERROR_NO_DEVICE"; return 0; }
int cuMemFreeHost(void *p) { (void)p; return NO_DEVICE; }
int cuMemFree_v2(unsigned long long p) { (void)p; return NO_DEVICE; }
static int no_device(void) { return NO_DEVICE; }
static void *entry(const char *symbol);
/* CUDA 12.0's cuGetProcAddress (4 arguments) and _v2 (a status pointer more). */
int cuGetProcAddress(const char *symbol, void **fn, int version, unsigned long long flags) {
  (void)version; (void)flags;
  if (!fn) return 1;
  *fn = entry(symbol);
  return 0;
}
int cuGetProcAddress_v2(const char *symbol, void **fn, int version, unsigned long long flags, int *status) {
  if (status) *status = 0; /* CU_GET_PROC_ADDRESS_SUCCESS */
  return cuGetProcAddress(symbol, fn, version, flags);
}
static void *entry(const char *symbol) {
  if (!strcmp(symbol, "cuInit")) return (void *)cuInit;
  if (!strcmp(symbol, "cuDriverGetVersion")) return (void *)cuDriverGetVersion;
  if (!strcmp(symbol, "cuDeviceGetCount")) return (void *)cuDeviceGetCount;
  if (!strcmp(symbol, "cuGetErrorString")) return (void *)cuGetErrorString;
  if (!strcmp(symbol, "cuGetErrorName")) return (void *)cuGetErrorName;
  if (!strcmp(symbol, "cuGetProcAddress")) return (void *)cuGetProcAddress_v2;
  return (void *)no_device;
}
