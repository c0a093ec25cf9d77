// Two test programs meeting through files in a directory (ipc_pair.cu,
// pool_ipc.cu): one writes a file whole (a rename), the other waits for it,
// never for a fixed time.
#ifndef FERRY_TESTS_FILE_HANDOFF_H
#define FERRY_TESTS_FILE_HANDOFF_H

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

static void put_file(const char *dir, const char *name, const void *p, size_t n) {
  char tmp[512], path[512];
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(tmp, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0 || rename(tmp, path) != 0) {
    printf("FAIL cannot write %s\n", path);
    exit(3);
  }
}

// waits for DIR/name (written by the other program), at most 100 s
static void wait_file(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  for (int i = 0; i < 10000; i++) {
    if (access(path, F_OK) == 0) return;
    usleep(10000);
  }
  printf("FAIL %s never came\n", path);
  exit(3);
}

static void get_file(const char *dir, const char *name, void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f || fread(p, 1, n, f) != n) {
    printf("FAIL cannot read %s\n", path);
    exit(3);
  }
  fclose(f);
}

#endif
