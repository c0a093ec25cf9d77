/* The memfd record of a VMM shareable handle (common/ipc_fd.c): what ferry
   made reads back; what it did not (another file, a pipe, an altered or
   unsealed record) is told apart; no one can rewrite ferry's. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/ipc_fd.h"

static struct ferry_ipc_handle record(void) {
  struct ferry_ipc_handle h = {.magic = FERRY_IPC_VMM_MAGIC, .instance = 0x1234567890abcdefull,
                               .range = 2u << 20, .size = 2u << 20};
  for (int i = 0; i < FERRY_IPC_KEY_LEN; i++) h.key[i] = (uint8_t)(i * 13 + 1);
  return h;
}

/* an unsealed memfd holding len bytes of p */
static int plain_file(const void *p, size_t len) {
  int fd = memfd_create("test", 0);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, p, len), (ssize_t)len);
  return fd;
}

static void round_trip(void **state) {
  (void)state;
  struct ferry_ipc_handle h = record(), got;
  int fd = ferry_ipc_fd_make(&h);
  assert_true(fd >= 0);
  assert_false(fcntl(fd, F_GETFD) & FD_CLOEXEC); /* the program decides */
  assert_int_equal(ferry_ipc_fd_read(fd, &got), FERRY_IPC_FD_OK);
  assert_memory_equal(&got, &h, sizeof h);
  /* read again (a second import), and through a duplicate as SCM_RIGHTS gives */
  int dup_fd = dup(fd);
  assert_int_equal(ferry_ipc_fd_read(dup_fd, &got), FERRY_IPC_FD_OK);
  assert_memory_equal(&got, &h, sizeof h);
  close(dup_fd);
  close(fd);
}

/* a memory pool's record: its token and nothing else */
static void pool_record(void **state) {
  (void)state;
  struct ferry_ipc_handle h = {.magic = FERRY_IPC_POOL_MAGIC, .spare = 0x1234567890abcdefull}, got;
  int fd = ferry_ipc_fd_make(&h);
  assert_true(fd >= 0);
  assert_int_equal(ferry_ipc_fd_read(fd, &got), FERRY_IPC_FD_OK);
  assert_int_equal(got.magic, FERRY_IPC_POOL_MAGIC);
  assert_true(got.spare == h.spare);
  close(fd);
}

static void sealed(void **state) {
  (void)state;
  struct ferry_ipc_handle h = record(), got;
  int fd = ferry_ipc_fd_make(&h);
  assert_true(fd >= 0);
  struct ferry_ipc_handle other = h;
  other.size = other.range = 4u << 20;
  assert_true(pwrite(fd, &other, sizeof other, 0) < 0); /* F_SEAL_WRITE */
  assert_true(ftruncate(fd, 0) < 0);                    /* F_SEAL_SHRINK */
  assert_true(pwrite(fd, "x", 1, sizeof h) < 0);        /* F_SEAL_GROW */
  assert_int_equal(ferry_ipc_fd_read(fd, &got), FERRY_IPC_FD_OK);
  assert_memory_equal(&got, &h, sizeof h);
  close(fd);
}

static void not_ours(void **state) {
  (void)state;
  struct ferry_ipc_handle h = record(), got;
  memset(&got, 0x77, sizeof got);
  struct ferry_ipc_handle before = got;
  int p[2];
  assert_int_equal(pipe(p), 0);
  assert_int_equal(ferry_ipc_fd_read(p[0], &got), FERRY_IPC_FD_UNREADABLE);
  close(p[0]);
  close(p[1]);
  assert_int_equal(ferry_ipc_fd_read(-1, &got), FERRY_IPC_FD_UNREADABLE);
  int null = open("/dev/null", O_RDONLY);
  assert_int_equal(ferry_ipc_fd_read(null, &got), FERRY_IPC_FD_NOT_OURS); /* empty */
  close(null);
  /* the record's bytes in a file ferry did not seal */
  int fd = plain_file(&h, sizeof h);
  assert_int_equal(ferry_ipc_fd_read(fd, &got), FERRY_IPC_FD_UNSEALED);
  close(fd);
  /* one byte more, a CUDA IPC memory handle's magic, a partial range, no size */
  unsigned char longer[sizeof h + 1] = {0};
  memcpy(longer, &h, sizeof h);
  fd = plain_file(longer, sizeof longer);
  assert_int_equal(ferry_ipc_fd_read(fd, &got), FERRY_IPC_FD_NOT_OURS);
  close(fd);
  struct ferry_ipc_handle bad[4] = {h, h, h, h};
  bad[0].magic = FERRY_IPC_MEM_MAGIC;
  bad[1].offset = 4096;
  bad[2].size = 0;
  bad[3].range = 4u << 20;
  for (int i = 0; i < 4; i++) {
    fd = plain_file(&bad[i], sizeof bad[i]);
    assert_int_equal(ferry_ipc_fd_read(fd, &got), FERRY_IPC_FD_NOT_OURS);
    close(fd);
  }
  /* a memory pool's record with a size, or without its token */
  struct ferry_ipc_handle pool[2] = {{.magic = FERRY_IPC_POOL_MAGIC, .spare = 7, .size = 4096},
                                     {.magic = FERRY_IPC_POOL_MAGIC}};
  for (int i = 0; i < 2; i++) {
    fd = plain_file(&pool[i], sizeof pool[i]);
    assert_int_equal(ferry_ipc_fd_read(fd, &got), FERRY_IPC_FD_NOT_OURS);
    close(fd);
  }
  assert_memory_equal(&got, &before, sizeof got); /* untouched by a refusal */
  assert_non_null(strstr(ferry_ipc_fd_why(FERRY_IPC_FD_UNREADABLE), "pipe"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip),
      cmocka_unit_test(pool_record),
      cmocka_unit_test(sealed),
      cmocka_unit_test(not_ours),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
