/*
 * VMM shareable handles between programs, as cuda-samples' memMapIPCDrv
 * uses them (tests/e2e/ipc.sh, cases vmm*): the parent exports two
 * cuMemCreate handles as POSIX file descriptors, one mapped and filled
 * first, one never mapped (the sample's order), and passes both with
 * SCM_RIGHTS to programs it starts (itself again, exec'd, so that each is a
 * program of its own with its own device). The writer checks the parent's
 * bytes and writes new ones into both; the parent checks them after the
 * writer says it is done; the reader, started after the writer ended,
 * checks what the writer left in the never-mapped one. Then the refusals.
 * usage: drv_vmm_ipc [hold FIFO]  the parent (hold: with its exports
 *                                open, wait for a line in FIFO)
 *        drv_vmm_ipc writer|reader SOCKFD
 *        drv_vmm_ipc local        export on whatever device there is
 * DRV_VMM_IPC_CHILD_DEVICES: FERRY_DEVICES of the writer and the reader.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "drv_check.h"

static CUmemAllocationProp prop;
static size_t gran;

static unsigned parent_word(size_t i) { return (unsigned)(i * 3 + 1); }
static unsigned writer_word(size_t i) { return (unsigned)(i * 7 + 5); }
static unsigned fresh_word(size_t i) { return (unsigned)(i ^ 0x5a5a5a5au); }

static void send_fds(int sock, int a, int b) {
  int fds[2] = {a, b};
  char byte = 'h';
  struct iovec iov = {&byte, 1};
  union {
    char buf[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr m = {0};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = u.buf;
  m.msg_controllen = sizeof u.buf;
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  if (sendmsg(sock, &m, 0) != 1) {
    printf("FAIL sendmsg\n");
    exit(3);
  }
}

static void recv_fds(int sock, int *a, int *b) {
  char byte;
  struct iovec iov = {&byte, 1};
  union {
    char buf[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr m = {0};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = u.buf;
  m.msg_controllen = sizeof u.buf;
  struct cmsghdr *c;
  if (recvmsg(sock, &m, 0) != 1 || !(c = CMSG_FIRSTHDR(&m)) || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(2 * sizeof(int))) {
    printf("FAIL recvmsg\n");
    exit(3);
  }
  int fds[2];
  memcpy(fds, CMSG_DATA(c), sizeof fds);
  *a = fds[0];
  *b = fds[1];
}

/* the program again as a writer or reader, talking over one socketpair end */
static pid_t start(const char *role, int *sock) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) exit(3);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    char fd[16];
    snprintf(fd, sizeof fd, "%d", sv[1]);
    /* the children on a vGPU of their own: two GPUs of one server, as
       NCCL's ranks share their buffers */
    const char *devices = getenv("DRV_VMM_IPC_CHILD_DEVICES");
    if (devices) setenv("FERRY_DEVICES", devices, 1);
    execl("/proc/self/exe", "drv_vmm_ipc", role, fd, (char *)NULL);
    _exit(127);
  }
  close(sv[1]);
  *sock = sv[0];
  return pid;
}

static int finished(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void fill(CUdeviceptr at, unsigned (*word)(size_t)) {
  size_t n = gran / 4;
  unsigned *b = (unsigned *)malloc(gran);
  for (size_t i = 0; i < n; i++) b[i] = word(i);
  MUST(cuMemcpyHtoD(at, b, gran));
  free(b);
}

/* the first word that differs, or -1 */
static long differs(CUdeviceptr at, unsigned (*word)(size_t)) {
  size_t n = gran / 4;
  unsigned *b = (unsigned *)malloc(gran);
  MUST(cuMemcpyDtoH(b, at, gran));
  long bad = -1;
  for (size_t i = 0; i < n && bad < 0; i++)
    if (b[i] != word(i)) bad = (long)i;
  free(b);
  return bad;
}

static CUdeviceptr map_imported(int fd, CUdeviceptr at) {
  CUmemGenericAllocationHandle h = 0;
  CU(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  CUmemAllocationProp got;
  CU(cuMemGetAllocationPropertiesFromHandle(&got, h));
  EXPECT(got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.id == 0 &&
         got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  MUST(cuMemMap(at, gran, 0, h, 0));
  CU(cuMemRelease(h)); /* as memMapIPCDrv: the mapping keeps it */
  CUmemAccessDesc rw = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU(cuMemSetAccess(at, gran, &rw, 1));
  return at;
}

static int child(const char *role, int sock) {
  CUdevice dev;
  drv_primary(&dev);
  char bus[32] = "";
  CU(cuDeviceGetPCIBusId(bus, (int)sizeof bus, dev));
  printf("%s on %s\n", role, bus);
  fflush(stdout);
  int a, b;
  recv_fds(sock, &a, &b);
  CUdeviceptr r = 0;
  MUST(cuMemAddressReserve(&r, 2 * gran, gran, 0, 0));
  if (!strcmp(role, "writer")) {
    map_imported(a, r);
    EXPECT(differs(r, parent_word) < 0);
    fill(r, writer_word);
    map_imported(b, r + gran);
    fill(r + gran, fresh_word);
    CU(cuCtxSynchronize());
  } else {
    map_imported(b, r + gran);
    EXPECT(differs(r + gran, fresh_word) < 0);
  }
  if (!strcmp(role, "writer")) CU(cuMemUnmap(r, 2 * gran));
  else CU(cuMemUnmap(r + gran, gran));
  CU(cuMemAddressFree(r, 2 * gran));
  close(a);
  close(b);
  char done = 'd';
  if (write(sock, &done, 1) != 1) return 3;
  return drv_summary();
}

static void refusal(const char *what, CUresult got, CUresult want) {
  printf("refused: %s=%s\n", what, cu_name(got));
  EXPECT(got == want);
}

static void refusals(CUmemGenericAllocationHandle a, int fd_a, CUmemGenericAllocationHandle b) {
  CUmemGenericAllocationHandle h = 0;
  int p[2];
  MUST(pipe(p) ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS);
  refusal("import pipe", cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)p[0],
                                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          CUDA_ERROR_INVALID_VALUE);
  close(p[0]);
  close(p[1]);
  int null = open("/dev/null", O_RDONLY);
  refusal("import /dev/null", cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)null,
                                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          CUDA_ERROR_INVALID_VALUE);
  close(null);
  /* no handle type asked at cuMemCreate: CUDA refuses the export */
  CUmemAllocationProp plain = prop;
  plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  CUmemGenericAllocationHandle q = 0;
  MUST(cuMemCreate(&q, gran, &plain, 0));
  int fd = -1;
  refusal("export untyped", cuMemExportToShareableHandle(&fd, q, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          CUDA_ERROR_INVALID_VALUE);
  CU(cuMemRelease(q));
  /* exported before it was mapped: its memory stays where importers share it */
  CUdeviceptr r = 0;
  MUST(cuMemAddressReserve(&r, gran, 0, 0, 0));
  refusal("map exported", cuMemMap(r, gran, 0, b, 0), CUDA_ERROR_NOT_SUPPORTED);
  CU(cuMemAddressFree(r, gran));
  /* the program's own descriptor: the same handle, counted */
  CU(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd_a,
                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  EXPECT(h == a);
  CU(cuMemRelease(h));
}

static int local_export(void) {
  CUdevice dev;
  drv_primary(&dev);
  CUmemGenericAllocationHandle h = 0;
  MUST(cuMemCreate(&h, gran, &prop, 0));
  int fd = -1;
  printf("local: %s\n", cu_name(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)));
  CU(cuMemRelease(h));
  return drv_summary();
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  gran = 2u << 20; /* the simulation's; asked again below where a device is open */
  if (argc == 3 && (!strcmp(argv[1], "writer") || !strcmp(argv[1], "reader"))) {
    MUST(cuInit(0));
    MUST(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return child(argv[1], atoi(argv[2]));
  }
  if (argc == 2 && !strcmp(argv[1], "local")) {
    MUST(cuInit(0));
    MUST(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return local_export();
  }
  const char *hold = argc == 3 && !strcmp(argv[1], "hold") ? argv[2] : NULL;
  CUdevice dev;
  drv_primary(&dev);
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));

  /* a: mapped and filled, then exported; b: exported unmapped, as memMapIPCDrv */
  CUmemGenericAllocationHandle a = 0, b = 0;
  CUdeviceptr ra = 0;
  MUST(cuMemCreate(&a, gran, &prop, 0));
  MUST(cuMemAddressReserve(&ra, gran, 0, 0, 0));
  MUST(cuMemMap(ra, gran, 0, a, 0));
  CUmemAccessDesc rw = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU(cuMemSetAccess(ra, gran, &rw, 1));
  fill(ra, parent_word);
  MUST(cuMemCreate(&b, gran, &prop, 0));
  int fa = -1, fb = -1;
  MUST(cuMemExportToShareableHandle(&fa, a, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  MUST(cuMemExportToShareableHandle(&fb, b, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  EXPECT(fa >= 0 && fb >= 0 && fa != fb);
  printf("exported\n");

  int sock;
  pid_t w = start("writer", &sock);
  send_fds(sock, fa, fb);
  char done = 0;
  EXPECT(read(sock, &done, 1) == 1 && done == 'd'); /* the writer's work is done */
  close(sock);
  EXPECT(differs(ra, writer_word) < 0);
  EXPECT(finished(w) == 0);
  /* the never-mapped handle kept what the writer, now ended, put in it */
  pid_t rd = start("reader", &sock);
  send_fds(sock, fa, fb);
  EXPECT(read(sock, &done, 1) == 1 && done == 'd');
  close(sock);
  EXPECT(finished(rd) == 0);

  refusals(a, fa, b);
  if (hold) { /* the test migrates now, and says when it is done */
    printf("drv_vmm_ipc: running pid %d\n", (int)getpid());
    FILE *f = fopen(hold, "r"); /* blocks until the test opens it to write */
    char line[8];
    EXPECT(f && fgets(line, sizeof line, f));
    if (f) fclose(f);
  }
  close(fa);
  close(fb);
  CU(cuMemUnmap(ra, gran));
  CU(cuMemAddressFree(ra, gran));
  CU(cuMemRelease(a));
  CU(cuMemRelease(b));
  return drv_summary();
}
