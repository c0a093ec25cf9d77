/*
 * The ferry command line. `ferry run -- prog args` starts a program with
 * ferry's libcudart.so.13 first on its library path, so the program's CUDA
 * runtime calls go to the remote GPUs named in FERRY_DEVICES.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHIM_NAME "libcudart.so.13"

static void usage(FILE *out) {
  fprintf(out,
          "usage: ferry run [--devices URL[,URL...]] -- PROGRAM [ARGS...]\n"
          "       ferry version\n"
          "\n"
          "run      start PROGRAM (built with `nvcc -cudart shared`) on remote GPUs.\n"
          "         Devices come from --devices, FERRY_DEVICES=tcp://host:7420/0,...\n"
          "         or RCUDA_DEVICE_COUNT=N with RCUDA_DEVICE_<i>=host[@port]:gpu.\n"
          "         FERRY_LIBDIR overrides where " SHIM_NAME " is found.\n");
}

/* the lib directory next to this binary's bin directory */
static int find_libdir(char *out, size_t n) {
  const char *env = getenv("FERRY_LIBDIR");
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return 0;
  }
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return -1;
  exe[len] = '\0';
  snprintf(out, n, "%s/../lib", dirname(exe));
  char real[PATH_MAX];
  if (realpath(out, real)) snprintf(out, n, "%s", real);
  return 0;
}

/* a program linked with the static runtime never loads our library */
static void warn_if_static_runtime(const char *program) {
  char path[PATH_MAX];
  if (strchr(program, '/')) {
    snprintf(path, sizeof path, "%s", program);
  } else {
    const char *p = getenv("PATH");
    int found = 0;
    char *dirs = strdup(p ? p : "");
    for (char *save, *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
      snprintf(path, sizeof path, "%s/%s", d, program);
      found = access(path, X_OK) == 0;
    }
    free(dirs);
    if (!found) return;
  }
  FILE *f = fopen(path, "rb");
  if (!f) return;
  char magic[4];
  int elf = fread(magic, 1, 4, f) == 4 && !memcmp(magic, "\177ELF", 4);
  int needs_shim = 0;
  if (elf) {
    /* the NEEDED entry's string lives in .dynstr; a byte search finds it */
    static char buf[1 << 16];
    size_t keep = 0, got;
    while (!needs_shim && (got = fread(buf + keep, 1, sizeof buf - keep, f)) > 0) {
      size_t total = keep + got;
      needs_shim = memmem(buf, total, SHIM_NAME, strlen(SHIM_NAME)) != NULL;
      keep = strlen(SHIM_NAME);
      memmove(buf, buf + total - keep, keep);
    }
  }
  fclose(f);
  if (elf && !needs_shim)
    fprintf(stderr,
            "ferry run: warning: %s does not load " SHIM_NAME
            "; rebuild it with `nvcc -cudart shared`, or its CUDA calls stay local\n",
            program);
}

static int cmd_run(int argc, char **argv) {
  int i = 0;
  for (; i < argc; i++) {
    if (!strcmp(argv[i], "--")) {
      i++;
      break;
    }
    if (!strcmp(argv[i], "--devices") && i + 1 < argc) {
      setenv("FERRY_DEVICES", argv[++i], 1);
    } else if (!strncmp(argv[i], "--devices=", 10)) {
      setenv("FERRY_DEVICES", argv[i] + 10, 1);
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "ferry run: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    } else {
      break; /* the program, without a -- before it */
    }
  }
  if (i >= argc) {
    fprintf(stderr, "ferry run: no program given\n");
    usage(stderr);
    return 2;
  }
  const char *devices = getenv("FERRY_DEVICES");
  const char *rcuda = getenv("RCUDA_DEVICE_COUNT");
  if ((!devices || !*devices) && (!rcuda || !*rcuda)) {
    fprintf(stderr, "ferry run: no remote GPU configured: set FERRY_DEVICES=tcp://host:7420/0 "
                    "(or pass --devices)\n");
    return 2;
  }
  char libdir[PATH_MAX], shim[PATH_MAX + 32];
  if (find_libdir(libdir, sizeof libdir)) {
    fprintf(stderr, "ferry run: cannot locate ferry's lib directory; set FERRY_LIBDIR\n");
    return 2;
  }
  snprintf(shim, sizeof shim, "%s/" SHIM_NAME, libdir);
  if (access(shim, R_OK)) {
    fprintf(stderr, "ferry run: %s: %s (set FERRY_LIBDIR)\n", shim, strerror(errno));
    return 2;
  }
  const char *old = getenv("LD_LIBRARY_PATH");
  size_t n = strlen(libdir) + (old ? strlen(old) : 0) + 2;
  char *path = malloc(n);
  if (!path) return 2;
  snprintf(path, n, "%s%s%s", libdir, old && *old ? ":" : "", old && *old ? old : "");
  setenv("LD_LIBRARY_PATH", path, 1);
  free(path);
  warn_if_static_runtime(argv[i]);
  execvp(argv[i], &argv[i]);
  fprintf(stderr, "ferry run: cannot execute %s: %s\n", argv[i], strerror(errno));
  return errno == ENOENT ? 127 : 126;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(argv[1], "version")) {
    printf("ferry 0.1 (protocol 1)\n");
    return 0;
  }
  fprintf(stderr, "ferry: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
