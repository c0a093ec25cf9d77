/* Program VMM through ferry's libcuda.so.1: an "expandable segment" grown
 * and shrunk the way PyTorch's caching allocator does it
 * (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), then the calls ferry
 * refuses. C, cuda.h only (tests/e2e/driver.cmake).
 *
 * usage: drv_vmm FATBIN [ROUNDS=12]
 *   FATBIN: tests/apps/drv_kernels.cu as a fat binary (drv_mix, drv_fold).
 * A segment reserves about the device's memory; each round it grows by
 * granularity-sized chunks (cuMemCreate + cuMemMap + cuMemSetAccess), now
 * and then shrinks (cuMemUnmap + cuMemRelease), and kernels and copies run
 * across the chunks' boundaries. A "spare" handle the program keeps moves
 * to another address every round (unmapped, mapped elsewhere) and must keep
 * its contents, also when a new handle is mapped over where it was. Every
 * result is checked against a host model; all arithmetic is on integers, so
 * a run that migrated (at any launch) ends with the same checksum as one
 * that did not. Meanwhile other threads map, fill, check and unmap handles
 * of their own. After the rounds, the calls ferry refuses, with a second
 * device what it refuses between devices, and a device reset (reservations
 * outlive it). Prints "launches: L", "checksum: <hex>",
 * then "PASSED" or "FAILED: n"; each refusal as "refused: <what>=<CUresult>".
 * CPU twins of the kernels: tests/twins/app_twins.c.
 */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "drv_check.h"

#define BLOCK 256
#define MAX_CHUNKS 6
#define SALT 77u

static int launches;
static CUfunction f_mix, f_fold;
static size_t gran;
static CUmemAllocationProp prop;

/* x[i] = x[i] * 1664525 + SALT + k + i on the device, and on the host model */
static void mix(CUdeviceptr x, unsigned *model, int n, unsigned k) {
  void *params[] = {&x, &n, &k};
  MUST(cuLaunchKernel(f_mix, (unsigned)((n + BLOCK - 1) / BLOCK), 1, 1, BLOCK, 1, 1, 0, NULL,
                      params, NULL));
  launches++;
  for (int i = 0; i < n; i++) model[i] = model[i] * 1664525u + SALT + k + (unsigned)i;
}

/* y[i] += x[i] ^ i */
static void fold(CUdeviceptr y, unsigned *ym, CUdeviceptr x, const unsigned *xm, int n) {
  void *params[] = {&y, &x, &n};
  MUST(cuLaunchKernel(f_fold, (unsigned)((n + BLOCK - 1) / BLOCK), 1, 1, BLOCK, 1, 1, 0, NULL,
                      params, NULL));
  launches++;
  for (int i = 0; i < n; i++) ym[i] += xm[i] ^ (unsigned)i;
}

/* the device's words at p equal the model's */
static int same(CUdeviceptr p, const unsigned *model, size_t words) {
  unsigned *got = (unsigned *)malloc(words * 4);
  MUST(cuMemcpyDtoH(got, p, words * 4));
  int ok = memcmp(got, model, words * 4) == 0;
  free(got);
  return ok;
}

static CUmemGenericAllocationHandle create(void) {
  CUmemGenericAllocationHandle h = 0;
  MUST(cuMemCreate(&h, gran, &prop, 0));
  return h;
}

static void map_rw(CUdeviceptr at, size_t size, CUmemGenericAllocationHandle h) {
  CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  MUST(cuMemMap(at, size, 0, h, 0));
  MUST(cuMemSetAccess(at, size, &d, 1));
}

/* ---- the checks of the calls themselves ---- */
static void queries(CUdeviceptr seg, size_t seg_size) {
  size_t rec = 0;
  CU(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  EXPECT(rec >= gran && rec % gran == 0);
  /* reserved, nothing mapped: the range is the reservation's */
  CUdeviceptr start = 0;
  size_t size = 0;
  int mapped = -1;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_MAPPED};
  void *data[] = {&start, &size, &mapped};
  CU(cuPointerGetAttributes(3, attrs, data, seg + 3 * gran + 100));
  EXPECT(start == seg && size == seg_size && mapped == 0);

  /* a handle mapped in a reservation of its own */
  CUdeviceptr r = 0;
  CU(cuMemAddressReserve(&r, 4 * gran, 0, 0, 0));
  CUmemGenericAllocationHandle h = create(), h2 = 0;
  CU(cuMemMap(r + gran, gran, 0, h, 0));
  unsigned long long flags = 99;
  CUmemLocation here = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CU(cuMemGetAccess(&flags, &here, r + gran));
  EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_NONE); /* none until cuMemSetAccess */
  CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU(cuMemSetAccess(r + gran, gran, &d, 1));
  CU(cuMemGetAccess(&flags, &here, r + gran + 8));
  EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CU_IS(cuMemSetAccess(r, 2 * gran, &d, 1), CUDA_ERROR_INVALID_VALUE); /* r is not mapped */
  CUdeviceptr base = 0;
  CU(cuMemGetAddressRange(&base, &size, r + gran + 4096));
  EXPECT(base == r + gran && size == gran); /* the mapping */
  int ordinal = -1;
  CUmemorytype type = (CUmemorytype)0;
  unsigned long long types = 99;
  CUpointer_attribute more[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                CU_POINTER_ATTRIBUTE_MAPPED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES};
  void *out[] = {&start, &size, &mapped, &ordinal, &type, &types};
  CU(cuPointerGetAttributes(6, more, out, r + gran + 12));
  EXPECT(start == r && size == 4 * gran && mapped == 1 && ordinal == 0);
  EXPECT(type == CU_MEMORYTYPE_DEVICE && types == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CU(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(r + gran + 64)));
  EXPECT(h2 == h);
  CUmemAllocationProp got;
  memset(&got, 0, sizeof got);
  CU(cuMemGetAllocationPropertiesFromHandle(&got, h));
  EXPECT(got.type == prop.type && got.location.id == 0 &&
         got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  /* bad uses CUDA refuses too */
  CU_IS(cuMemMap(r + gran, gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* where it is mapped */
  CUmemGenericAllocationHandle h3 = create();
  CU_IS(cuMemMap(r + gran, gran, 0, h3, 0), CUDA_ERROR_INVALID_VALUE); /* over a mapping */
  CUdeviceptr plain = 0;
  CU(cuMemAlloc(&plain, gran));
  CU_IS(cuMemMap(plain, gran, 0, h3, 0), CUDA_ERROR_INVALID_VALUE); /* outside any reservation */
  CU(cuMemFree(plain));
  CU_IS(cuMemAddressFree(r, 4 * gran), CUDA_ERROR_INVALID_VALUE);     /* still mapped */
  CU_IS(cuMemUnmap(r + gran, gran / 2), CUDA_ERROR_INVALID_VALUE);     /* part of a mapping */
  CU_IS(cuMemFree(r + gran), CUDA_ERROR_INVALID_VALUE);               /* not cuMemAlloc's */
  CU_IS(cuMemCreate(&h2, gran + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  CU_IS(cuMemCreate(&h2, seg_size + gran, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY); /* more than the device has */
  CU(cuMemRelease(h3));
  CU_IS(cuMemRelease(h3), CUDA_ERROR_INVALID_VALUE);
  /* released twice (create, retain) while mapped: the memory stays until unmapped */
  unsigned word = 0x5a5a1234u, back = 0;
  CU(cuMemcpyHtoD(r + gran + 40, &word, 4));
  CU(cuMemRelease(h));
  CU(cuMemRelease(h));
  CU(cuMemcpyDtoH(&back, r + gran + 40, 4));
  EXPECT(back == word);
  CU(cuMemUnmap(r + gran, gran));
  CU_IS(cuMemGetAddressRange(&base, &size, r + gran), CUDA_ERROR_NOT_FOUND);
  CU(cuMemAddressFree(r, 4 * gran));
  /* a hint that is free is honoured */
  CUdeviceptr again = 0;
  CU(cuMemAddressReserve(&again, 4 * gran, 0, r, 0));
  EXPECT(again == r);
  CU(cuMemAddressFree(again, 4 * gran));
}

/* a thread of its own: handles created, mapped, filled, checked, unmapped
   and released in a reservation of its own, while the main thread works */
#define THREADS 3
static CUcontext main_ctx;
static int thread_errors;

static void *churn(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  CUdeviceptr r = 0;
  int bad = cuCtxSetCurrent(main_ctx) != CUDA_SUCCESS || cuMemAddressReserve(&r, 4 * gran, 0, 0, 0);
  size_t words = gran / 4;
  unsigned *back = (unsigned *)malloc(gran);
  for (unsigned i = 0; !bad && i < 12; i++) {
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr at = r + (i % 4) * gran;
    CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    unsigned value = id * 1000u + i;
    bad = cuMemCreate(&h, gran, &prop, 0) || cuMemMap(at, gran, 0, h, 0) ||
          cuMemSetAccess(at, gran, &d, 1) || cuMemsetD32(at, value, words) ||
          cuMemcpyDtoH(back, at, gran);
    for (size_t k = 0; !bad && k < words; k++) bad = back[k] != value;
    bad = bad || cuMemUnmap(at, gran) || cuMemRelease(h);
  }
  bad = bad || cuMemAddressFree(r, 4 * gran);
  free(back);
  if (bad) __atomic_add_fetch(&thread_errors, 1, __ATOMIC_RELAXED);
  return NULL;
}

/* a reset drops the device's memory; reservations stay, and map again */
static void reset(CUdevice dev, CUcontext ctx) {
  /* ferry's behaviour: NVIDIA's driver destroys the context at the reset
     (CUDA_ERROR_CONTEXT_IS_DESTROYED until it is retained again), not
     compared on a GPU yet */
  if (!dlopen("libferry-client.so.0", RTLD_NOLOAD | RTLD_LAZY)) return;
  CUdeviceptr r = 0;
  MUST(cuMemAddressReserve(&r, 2 * gran, 0, 0, 0));
  CUmemGenericAllocationHandle h = create();
  map_rw(r, gran, h);
  CU(cuDevicePrimaryCtxReset(dev));
  CU(cuCtxSetCurrent(ctx));
  CUmemGenericAllocationHandle h2 = create();
  map_rw(r + gran, gran, h2);
  unsigned word = 0xc0ffee, back = 0;
  CU(cuMemcpyHtoD(r + gran + 8, &word, 4));
  CU(cuMemcpyDtoH(&back, r + gran + 8, 4));
  EXPECT(back == word);
  CU_IS(cuMemcpyDtoH(&back, r + 8, 4), CUDA_ERROR_INVALID_VALUE); /* h's memory is gone */
  CU(cuMemUnmap(r + gran, gran));
  CU(cuMemRelease(h2));
  CU(cuMemAddressFree(r, 2 * gran));
}

/* the calls and arguments ferry refuses: one line each, and an error */
static void refusal(const char *what, CUresult r) {
  printf("refused: %s=%s\n", what, cu_name(r));
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);
}

static void refusals(void) {
  CUdeviceptr r = 0;
  MUST(cuMemAddressReserve(&r, 4 * gran, 0, 0, 0));
  CUmemGenericAllocationHandle big = 0, h = create();
  MUST(cuMemCreate(&big, 2 * gran, &prop, 0));
  refusal("cuMemMap partial", cuMemMap(r, gran, 0, big, 0));
  refusal("cuMemMap offset", cuMemMap(r, gran, gran, big, 0));
  map_rw(r, gran, h);
  refusal("cuMemMap alias", cuMemMap(r + 2 * gran, gran, 0, h, 0));
  CUmemAccessDesc ro = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READ};
  refusal("cuMemSetAccess read-only", cuMemSetAccess(r, gran, &ro, 1));
  CUmemAllocationProp fabric = prop;
  fabric.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  CUmemGenericAllocationHandle f = 0;
  refusal("cuMemCreate fabric", cuMemCreate(&f, gran, &fabric, 0));
  /* host memory, as NCCL tries it before falling back to cudaHostAlloc:
     its granularity is answered, the memory refused */
  CUmemAllocationProp host = prop;
  host.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  host.location.id = 0;
  size_t host_gran = 0;
  CU(cuMemGetAllocationGranularity(&host_gran, &host, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT(host_gran > 0);
  refusal("cuMemCreate host", cuMemCreate(&f, host_gran, &host, 0));
  CUmulticastObjectProp mc;
  memset(&mc, 0, sizeof mc);
  mc.numDevices = 1;
  mc.size = gran;
  CUmemGenericAllocationHandle m = 0;
  refusal("cuMulticastCreate", cuMulticastCreate(&m, &mc));
  MUST(cuMemUnmap(r, gran));
  MUST(cuMemRelease(h));
  MUST(cuMemRelease(big));
  MUST(cuMemAddressFree(r, 4 * gran));
}

/* with a second device: its own memory maps in its own reservations; peer
   access and memory of one device in another's reservation are refused */
static void second_device(CUcontext ctx0) {
  CUdevice dev1;
  CUcontext ctx1;
  MUST(cuDeviceGet(&dev1, 1));
  MUST(cuDevicePrimaryCtxRetain(&ctx1, dev1));
  CUmemAllocationProp p1 = prop;
  p1.location.id = 1;
  CUmemGenericAllocationHandle h0 = create(), h1 = 0;
  MUST(cuMemCreate(&h1, gran, &p1, 0));
  CUdeviceptr r0 = 0, r1 = 0;
  MUST(cuMemAddressReserve(&r0, 2 * gran, 0, 0, 0));
  MUST(cuCtxSetCurrent(ctx1));
  MUST(cuMemAddressReserve(&r1, 2 * gran, 0, 0, 0));
  CUmemAccessDesc d1 = {{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU(cuMemMap(r1, gran, 0, h1, 0));
  CU(cuMemSetAccess(r1, gran, &d1, 1));
  unsigned word = 0xbeef, back = 0;
  CU(cuMemcpyHtoD(r1 + 4, &word, 4));
  CU(cuMemcpyDtoH(&back, r1 + 4, 4));
  EXPECT(back == word);
  MUST(cuCtxSetCurrent(ctx0));
  refusal("cuMemMap across devices", cuMemMap(r0 + gran, gran, 0, h1, 0));
  map_rw(r0, gran, h0);
  refusal("cuMemSetAccess peer", cuMemSetAccess(r0, gran, &d1, 1));
  CU(cuMemUnmap(r0, gran));
  CU(cuMemUnmap(r1, gran));
  CU(cuMemRelease(h0));
  CU(cuMemRelease(h1));
  CU(cuMemAddressFree(r0, 2 * gran));
  CU(cuMemAddressFree(r1, 2 * gran));
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: drv_vmm FATBIN [ROUNDS]\n");
    return 2;
  }
  int rounds = argc > 2 ? atoi(argv[2]) : 12;
  CUdevice dev;
  CUcontext ctx = drv_primary(&dev);
  main_ctx = ctx;
  size_t len;
  void *image = drv_read_file(argv[1], &len);
  CUmodule mod;
  MUST(cuModuleLoadData(&mod, image));
  MUST(cuModuleGetFunction(&f_mix, mod, "drv_mix"));
  MUST(cuModuleGetFunction(&f_fold, mod, "_Z8drv_foldPjPKji"));
  drv_set_salt(mod, SALT);

  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; /* as PyTorch asks */
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  printf("granularity: %zu\n", gran);
  if (!gran) return drv_summary();

  /* the segment: about the device's memory, as PyTorch reserves it */
  size_t total = 0;
  MUST(cuDeviceTotalMem(&total, dev));
  size_t seg_size = (total + gran - 1) / gran * gran;
  CUdeviceptr seg = 0;
  CU(cuMemAddressReserve(&seg, seg_size, 0, 0, 0));
  queries(seg, seg_size);

  /* the spare handle moves between the slots of a reservation of its own */
  CUdeviceptr spare_at = 0;
  MUST(cuMemAddressReserve(&spare_at, 3 * gran, 0, 0, 0));
  CUmemGenericAllocationHandle spare = create();
  int spare_slot = 0;
  map_rw(spare_at, gran, spare);
  size_t words = gran / 4;
  unsigned *spare_model = (unsigned *)calloc(words, 4);
  MUST(cuMemsetD32(spare_at, 0, words));

  CUmemGenericAllocationHandle chunk[MAX_CHUNKS];
  unsigned *model = (unsigned *)calloc(MAX_CHUNKS * words, 4);
  unsigned *acc_model = (unsigned *)calloc(words, 4);
  CUdeviceptr acc = 0;
  MUST(cuMemAlloc(&acc, gran));
  MUST(cuMemsetD32(acc, 0, words));
  int nchunks = 0;
  unsigned long long sum = 1469598103934665603ull;
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++)
    EXPECT(pthread_create(&threads[t], NULL, churn, (void *)(uintptr_t)(t + 1)) == 0);
  for (int round = 0; round < rounds; round++) {
    /* grow by two chunks or one, or shrink by one (every fourth round);
       two at least, so that the kernels below cross a boundary */
    int want = round % 4 == 3 ? nchunks - 1 : nchunks + 2 - round % 2;
    if (want > MAX_CHUNKS) want = MAX_CHUNKS;
    if (want < 2) want = 2;
    if (want < nchunks) {
      MUST(cuCtxSynchronize()); /* PyTorch waits before it unmaps */
      for (int c = nchunks - 1; c >= want; c--) {
        MUST(cuMemUnmap(seg + (size_t)c * gran, gran));
        MUST(cuMemRelease(chunk[c]));
      }
    }
    for (int c = nchunks; c < want; c++) {
      chunk[c] = create();
      MUST(cuMemMap(seg + (size_t)c * gran, gran, 0, chunk[c], 0));
    }
    if (want > nchunks) {
      CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
      MUST(cuMemSetAccess(seg + (size_t)nchunks * gran, (size_t)(want - nchunks) * gran, &d, 1));
      /* new memory: filled across the new chunks' boundaries in one set */
      MUST(cuMemsetD32(seg + (size_t)nchunks * gran, (unsigned)round, (size_t)(want - nchunks) * words));
      for (size_t i = (size_t)nchunks * words; i < (size_t)want * words; i++) model[i] = (unsigned)round;
    }
    nchunks = want;
    int n = (int)((size_t)nchunks * words);
    /* kernels over every chunk, reading and writing across their boundaries */
    mix(seg, model, n, (unsigned)round * 7u);
    fold(acc, acc_model, seg + gran / 2, model + words / 2, (int)words); /* straddles chunks 0 and 1 */
    /* a copy across a boundary, both ways */
    if (nchunks > 1) {
      unsigned window[64];
      MUST(cuMemcpyDtoH(window, seg + gran - 128, sizeof window));
      EXPECT(memcmp(window, model + words - 32, sizeof window) == 0);
      for (int i = 0; i < 64; i++) window[i] ^= 0x01010101u * (unsigned)round;
      MUST(cuMemcpyHtoD(seg + gran - 128, window, sizeof window));
      memcpy(model + words - 32, window, sizeof window);
    }
    /* the spare: moved to the next slot; a fresh handle takes its old place */
    mix(spare_at + (size_t)spare_slot * gran, spare_model, (int)words, (unsigned)round);
    MUST(cuMemUnmap(spare_at + (size_t)spare_slot * gran, gran));
    CUmemGenericAllocationHandle squat = 0;
    if (round % 3 == 1) { /* over the parked memory: it must move out of the way */
      squat = create();
      map_rw(spare_at + (size_t)spare_slot * gran, gran, squat);
      MUST(cuMemsetD32(spare_at + (size_t)spare_slot * gran, 0xdeadbeefu, words));
    }
    /* a launch while the spare is parked (or moved out of the way): a
       migration at it must take the parked memory along */
    mix(acc, acc_model, (int)words, (unsigned)round + 1000u);
    int next = round % 5 == 4 ? spare_slot : (spare_slot + 1) % 3; /* now and then the same place */
    if (squat && next == spare_slot) next = (spare_slot + 1) % 3;
    if (squat) {
      MUST(cuMemUnmap(spare_at + (size_t)spare_slot * gran, gran));
      MUST(cuMemRelease(squat));
    }
    spare_slot = next;
    map_rw(spare_at + (size_t)spare_slot * gran, gran, spare);
    EXPECT(same(spare_at + (size_t)spare_slot * gran, spare_model, words));
    EXPECT(same(seg, model, (size_t)n));
    EXPECT(same(acc, acc_model, words));
    sum = drv_fnv(sum, model, (size_t)n * 4);
    sum = drv_fnv(sum, spare_model, words * 4);
    sum = drv_fnv(sum, acc_model, words * 4);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
  EXPECT(thread_errors == 0);
  printf("iterations: %d\n", rounds);
  for (int c = nchunks - 1; c >= 0; c--) {
    MUST(cuMemUnmap(seg + (size_t)c * gran, gran));
    MUST(cuMemRelease(chunk[c]));
  }
  CU(cuMemAddressFree(seg, seg_size));
  CU(cuMemUnmap(spare_at + (size_t)spare_slot * gran, gran));
  CU(cuMemRelease(spare));
  CU(cuMemAddressFree(spare_at, 3 * gran));
  /* ferry's refusals; NVIDIA's driver does what is refused (a run on a GPU
     compares everything else) */
  if (dlopen("libferry-client.so.0", RTLD_NOLOAD | RTLD_LAZY))
    refusals();
  else
    printf("NVIDIA's driver: the refusals of ferry skipped\n");
  int count = 0;
  MUST(cuDeviceGetCount(&count));
  if (count > 1) second_device(ctx);
  reset(dev, ctx);
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", sum);
  free(model);
  free(spare_model);
  free(acc_model);
  free(image);
  return drv_summary();
}
