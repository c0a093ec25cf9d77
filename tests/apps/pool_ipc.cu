// Memory pool IPC between two programs (tests/e2e/ipc.sh), as cuda-samples'
// streamOrderedAllocationIPC does it: a pool made with POSIX file
// descriptor handles, its descriptor and its pointers' export data passed
// to another process (the export data through files in DIR, the
// descriptor with SCM_RIGHTS over DIR/sock, as the sample does), which
// imports the pool and the pointers, computes into them, and frees them
// before the exporter does.
//   pool_ipc export DIR  two blocks of one shareable pool and one of
//       another, their export data in DIR/ptr0..2, the first pool's
//       descriptor over DIR/sock (DIR/pool says it listens); waits for
//       DIR/done, checks what the importer computed, frees, destroys
//   pool_ipc import DIR  imports pool and pointers (a pointer of the other
//       pool is refused), checks, accumulates, frees, writes DIR/done
// Prints PASSED. Exit: 0 PASSED, 1 mismatch, 3 CUDA error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

#include "cuda_check.h"
#include "file_handoff.h"
#include "fill_kernels.h"

static const int N = 100000;
#define BLOCK 256

// DIR/sock: the exporter hands its descriptor to the one importer
static struct sockaddr_un sock_addr(const char *dir) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s/sock", dir);
  return a;
}

static void send_fd(const char *dir, int fd) {
  struct sockaddr_un a = sock_addr(dir);
  int l = socket(AF_UNIX, SOCK_STREAM, 0), c;
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) {
    printf("FAIL cannot listen on %s\n", a.sun_path);
    exit(3);
  }
  put_file(dir, "pool", "1", 1); // the socket is ready
  if ((c = accept(l, nullptr, nullptr)) < 0) exit(3);
  char byte = 'p', ctl[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m;
  memset(&m, 0, sizeof m);
  memset(ctl, 0, sizeof ctl);
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof fd);
  if (sendmsg(c, &m, 0) != 1) exit(3);
  close(c);
  close(l);
}

static int recv_fd(const char *dir) {
  struct sockaddr_un a = sock_addr(dir);
  int c = socket(AF_UNIX, SOCK_STREAM, 0);
  if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a)) {
    printf("FAIL cannot connect to %s\n", a.sun_path);
    exit(3);
  }
  char byte, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec io = {&byte, 1};
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  struct cmsghdr *h;
  int fd = -1;
  if (recvmsg(c, &m, 0) == 1 && (h = CMSG_FIRSTHDR(&m)) && h->cmsg_type == SCM_RIGHTS)
    memcpy(&fd, CMSG_DATA(h), sizeof fd);
  close(c);
  if (fd < 0) {
    printf("FAIL no descriptor came over %s\n", a.sun_path);
    exit(3);
  }
  return fd;
}

static int fails;
static void expect(bool ok, const char *what) {
  if (!ok) {
    printf("FAIL: %s\n", what);
    fails++;
  }
}

static cudaMemPool_t shareable_pool() {
  cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  CHECK(cudaMemPoolCreate(&pool, &props));
  return pool;
}

static int exporter(const char *dir) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaMemPool_t pool = shareable_pool(), pool2 = shareable_pool();
  unsigned *b[3];
  CHECK(cudaMallocFromPoolAsync((void **)&b[0], N * sizeof(unsigned), pool, s));
  CHECK(cudaMallocFromPoolAsync((void **)&b[1], N * sizeof(unsigned), pool, s));
  CHECK(cudaMallocFromPoolAsync((void **)&b[2], N * sizeof(unsigned), pool2, s));
  unsigned grid = (N + BLOCK - 1) / BLOCK;
  for (int i = 0; i < 3; i++) mp_fill<<<grid, BLOCK, 0, s>>>(b[i], N, 3u + (unsigned)i);
  CHECK(cudaStreamSynchronize(s));
  int fds[2] = {-1, -1};
  CHECK(cudaMemPoolExportToShareableHandle(&fds[0], pool, cudaMemHandleTypePosixFileDescriptor, 0));
  CHECK(cudaMemPoolExportToShareableHandle(&fds[1], pool2, cudaMemHandleTypePosixFileDescriptor, 0));
  for (int i = 0; i < 3; i++) {
    cudaMemPoolPtrExportData data;
    CHECK(cudaMemPoolExportPointer(&data, b[i]));
    char name[8];
    snprintf(name, sizeof name, "ptr%d", i);
    put_file(dir, name, &data, sizeof data);
  }
  printf("pool_ipc: exported\n");
  fflush(stdout);
  send_fd(dir, fds[0]);
  wait_file(dir, "done");
  std::vector<unsigned> got(N);
  CHECK(cudaMemcpy(got.data(), b[0], N * sizeof(unsigned), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < N; i++) ok = ok && got[i] == fill_value(3u, i) * 31u + fill_value(4u, i);
  expect(ok, "the importer's sums in the exporter's pool block");
  for (int i = 0; i < 3; i++) CHECK(cudaFreeAsync(b[i], s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemPoolDestroy(pool));
  CHECK(cudaMemPoolDestroy(pool2));
  close(fds[0]);
  close(fds[1]);
  if (fails) return 1;
  printf("PASSED\n");
  return 0;
}

static int importer(const char *dir) {
  wait_file(dir, "pool");
  cudaMemPoolPtrExportData data[3];
  for (int i = 0; i < 3; i++) {
    char name[8];
    snprintf(name, sizeof name, "ptr%d", i);
    get_file(dir, name, &data[i], sizeof data[i]);
  }
  int fd = recv_fd(dir);
  cudaMemPool_t pool;
  CHECK(cudaMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)fd,
                                             cudaMemHandleTypePosixFileDescriptor, 0));
  close(fd);
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  cudaMemLocation here = {cudaMemLocationTypeDevice, 0};
  CHECK(cudaMemPoolGetAccess(&flags, pool, &here));
  expect(flags == cudaMemAccessFlagsProtReadWrite, "the imported pool is not read-write here");
  unsigned *p[2], *other = nullptr;
  expect(cudaMemPoolImportPointer((void **)&other, pool, &data[2]) == cudaErrorInvalidValue,
         "a pointer of another pool was imported");
  (void)cudaGetLastError();
  CHECK(cudaMemPoolImportPointer((void **)&p[0], pool, &data[0]));
  CHECK(cudaMemPoolImportPointer((void **)&p[1], pool, &data[1]));
  std::vector<unsigned> got(N);
  CHECK(cudaMemcpy(got.data(), p[1], N * sizeof(unsigned), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < N; i++) ok = ok && got[i] == fill_value(4u, i);
  expect(ok, "the exporter's values through an imported pointer");
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  mp_accum<<<(N + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(p[0], p[1], N);
  CHECK(cudaStreamSynchronize(s));
  expect(cudaMemPoolDestroy(pool) == cudaErrorInvalidValue,
         "an imported pool was destroyed while its pointers were imported");
  (void)cudaGetLastError();
  CHECK(cudaFreeAsync(p[0], s));
  CHECK(cudaFree(p[1]));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemPoolDestroy(pool));
  put_file(dir, "done", "1", 1);
  if (fails) return 1;
  printf("PASSED\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "export")) return exporter(argv[2]);
  if (argc == 3 && !strcmp(argv[1], "import")) return importer(argv[2]);
  printf("usage: pool_ipc export|import DIR\n");
  return 2;
}
