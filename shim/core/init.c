/*
 * Start-up: which GPUs the program gets (FERRY_DEVICES, or the rCUDA
 * variables), connecting to them (a server, or a ferry-mhelper for a
 * local:N entry), and the hello handshake that brings back each device's
 * facts. Runs once, at the first CUDA call that needs a device, never at
 * library load (registration runs before main).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "common/setting.h"
#include "shim/core/shadow.h"
#include "shim/core/props.h"
#include "shim/core/hooks.h"
#include "shim/core/host.h"
#include "protocol/stripe.h"
#include "shim/core/link.h"
#include "shim/core/loader.h"
#include "shim/core/local.h"
#include "transport/reader.h"

/* a local:N beyond this is a typo, not a machine (as for server GPUs) */
#define FERRY_MAX_LOCAL_GPU 4095

struct ferry_state ferry = {.once = PTHREAD_ONCE_INIT};
struct ferry_hooks ferry_hooks; /* filled by the rooms above (hooks.h) */

/* FERRY_DEVICES entry "local:N": N, else -1 with the reason in err */
static int parse_local(const char *tok, char *err, size_t errlen) {
  const char *p = tok + strlen("local:");
  char *end;
  errno = 0;
  long n = strtol(p, &end, 10);
  if (!isdigit((unsigned char)*p) || *end || errno || n > FERRY_MAX_LOCAL_GPU) {
    snprintf(err, errlen, "expected local:N, N the index of a GPU of this machine (0 to %d)",
             FERRY_MAX_LOCAL_GPU);
    return -1;
  }
  return (int)n;
}

/* one configured device: a server's GPU, or local:N (start_gpu >= 0) */
struct device_entry {
  struct ferry_url url;
  int start_gpu;
};

/* FERRY_DEVICES (or the rCUDA variables) into dev[FERRY_MAX_VGPUS], their
   number into *count; 0 or a cudaError_t. quiet: no line for what is wrong
   (ferry_configured_devices reads them again and again; the start-up that
   connects says it once). */
static int devices_from_env(struct device_entry *dev, int *count, int quiet) {
  char err[256], shown[FERRY_ECHO_MAX + 4];
#define SAY(...)                                                                                   \
  do {                                                                                             \
    if (!quiet) ferry_log(__VA_ARGS__);                                                            \
  } while (0)
  *count = 0;
  for (int i = 0; i < FERRY_MAX_VGPUS; i++) dev[i] = (struct device_entry){.start_gpu = -1};
  const char *list = getenv("FERRY_DEVICES");
  const char *rcount = getenv("RCUDA_DEVICE_COUNT");
  if (list && *list) {
    char *copy = strdup(list), *save = NULL;
    if (!copy) return cudaErrorMemoryAllocation;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      while (*tok == ' ') tok++;
      if (!*tok) continue;
      if (*count == FERRY_MAX_VGPUS) {
        SAY("FERRY_DEVICES lists more than %d devices", FERRY_MAX_VGPUS);
        free(copy);
        return cudaErrorInvalidValue;
      }
      struct device_entry *v = &dev[*count];
      if (!strncmp(tok, "local:", 6)) {
        if ((v->start_gpu = parse_local(tok, err, sizeof err)) < 0) {
          SAY("FERRY_DEVICES entry %d '%s': %s", *count,
              ferry_echo(tok, strlen(tok), shown, sizeof shown), err);
          free(copy);
          return cudaErrorNoDevice;
        }
      } else if (ferry_url_parse(tok, &v->url, err, sizeof err)) {
        SAY("FERRY_DEVICES entry %d: %s", *count, err); /* err quotes it */
        free(copy);
        return cudaErrorNoDevice;
      }
      (*count)++;
    }
    free(copy);
  } else if (rcount && *rcount) {
    char *end;
    long n = strtol(rcount, &end, 10);
    if (*end || n < 1 || n > FERRY_MAX_VGPUS) {
      SAY("RCUDA_DEVICE_COUNT='%s' must be a number from 1 to %d", rcount, FERRY_MAX_VGPUS);
      return cudaErrorNoDevice;
    }
    const char *scheme = getenv("FERRY_TRANSPORT");
    if (!scheme || !*scheme) scheme = "tcp";
    for (int i = 0; i < n; i++) {
      char name[32];
      snprintf(name, sizeof name, "RCUDA_DEVICE_%d", i);
      const char *val = getenv(name);
      if (!val || !*val) {
        SAY("RCUDA_DEVICE_COUNT=%ld but %s is not set (expected host[@port]:gpu)", n, name);
        return cudaErrorNoDevice;
      }
      if (ferry_url_parse_rcuda(val, scheme, &dev[i].url, err, sizeof err)) {
        SAY("%s: %s", name, err); /* err quotes the value */
        return cudaErrorNoDevice;
      }
      (*count)++;
    }
  } else {
    SAY("no remote GPU configured: set FERRY_DEVICES=tcp://host:%d/0 (or RCUDA_DEVICE_COUNT "
        "and RCUDA_DEVICE_<i>=host[@port]:gpu)",
        FERRY_DEFAULT_PORT);
    return cudaErrorNoDevice;
  }
  if (*count == 0) {
    SAY("FERRY_DEVICES lists no device");
    return cudaErrorNoDevice;
  }
#undef SAY
  return 0;
}

/* the vGPUs the program gets, read from the environment alone: no server
   is reached, nothing is started (the NVML front end's device count) */
int ferry_configured_devices(void) {
  struct device_entry dev[FERRY_MAX_VGPUS];
  int n;
  return devices_from_env(dev, &n, 1) ? 0 : n;
}

static int parse_devices(void) {
  struct device_entry dev[FERRY_MAX_VGPUS];
  int n, rc = devices_from_env(dev, &n, 0);
  if (rc) return rc;
  ferry.count = n;
  for (int i = 0; i < ferry.count; i++) {
    struct ferry_vgpu *v = &ferry.vgpus[i];
    v->url = dev[i].url;
    v->start_gpu = dev[i].start_gpu;
    if (v->url.gpu < 0) v->url.gpu = 0;
    if (v->start_gpu >= 0) snprintf(v->url_text, sizeof v->url_text, "local:%d", v->start_gpu);
    else ferry_url_format(&v->url, v->url_text, sizeof v->url_text);
    _Static_assert(sizeof v->url_text <= sizeof v->link.name, "a URL fits a link's name");
    memcpy(v->link.name, v->url_text, sizeof v->url_text);
  }
  return 0;
}

static int reserve_placeholder(struct ferry_vgpu *v) {
  if (ferry_placeholder_reserve(v)) {
    uint64_t base = ferry_arena_base(v->index);
    ferry_log("cannot reserve the device address range 0x%llx-0x%llx for device %d: %s",
              (unsigned long long)base, (unsigned long long)(base + FERRY_ARENA_STRIDE), v->index,
              strerror(errno));
    return cudaErrorMemoryAllocation;
  }
  return 0;
}

/* calls hold the gate shared; a waiting migration must not starve behind a
   stream of new calls, so writers go first */
static void init_gate(struct ferry_vgpu *v) {
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&v->gate, &attr);
  pthread_rwlockattr_destroy(&attr);
}

/* FERRY_TOKEN_FILE: the secret a server started with --token-file wants */
const char *ferry_client_token(void) {
  static char token[260];
  static int loaded;
  if (loaded) return token[0] ? token : NULL;
  loaded = 1;
  const char *path = getenv("FERRY_TOKEN_FILE");
  if (!path || !*path) return NULL;
  FILE *f = fopen(path, "r");
  if (!f) {
    ferry_log("FERRY_TOKEN_FILE %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t n = fread(token, 1, sizeof token - 1, f);
  fclose(f);
  token[n] = '\0';
  /* sent as a C string, it would end at a NUL: refused, as the server does */
  const char *nul = memchr(token, '\0', n);
  if (nul) {
    ferry_log("FERRY_TOKEN_FILE %s: the token has a NUL byte at offset %zu; a token is text "
              "(e.g. `head -c 24 /dev/urandom | base64`), none is sent", path,
              (size_t)(nul - token));
    token[0] = '\0';
    return NULL;
  }
  while (n && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' ')) token[--n] = '\0';
  return token[0] ? token : NULL;
}

/* FERRY_CONNECT_TIMEOUT: seconds; a positive value under 1 ms is 1 ms */
static int connect_timeout_ms = 10000;
static pthread_once_t connect_timeout_once = PTHREAD_ONCE_INIT;
static void read_connect_timeout(void) {
  ferry_env_ms("FERRY_CONNECT_TIMEOUT", 86400, 0, &connect_timeout_ms,
               "seconds above 0, at most 86400", "10");
}

int ferry_connect_timeout_ms(void) {
  pthread_once(&connect_timeout_once, read_connect_timeout);
  return connect_timeout_ms;
}

/* the device facts a server's or a helper's hello brought */
static int take_device(struct ferry_vgpu *v, const struct ferry_hello_rets *r) {
  snprintf(v->name, sizeof v->name, "%s", r->name ? r->name : "remote GPU");
  v->total_mem = r->total_mem;
  v->granularity = r->granularity ? r->granularity : (2u << 20);
  v->driver_version = r->driver_version;
  if (r->uuid.len == sizeof v->uuid) memcpy(v->uuid, r->uuid.ptr, sizeof v->uuid);
  size_t n = r->attrs.len / sizeof(int32_t);
  if (n > FERRY_NATTRS_CLIENT) n = FERRY_NATTRS_CLIENT;
  memcpy(v->attrs, r->attrs.ptr, n * sizeof(int32_t));
  /* managed memory as on devices without concurrent access (runtime/managed.c) */
  v->attrs[CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY] = 1;
  v->attrs[CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS] = 0;
  v->attrs[CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS] = 0;
  v->attrs[CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES] = 0;
  v->attrs[CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST] = 0;
  ferry_props_build(&v->props, v->name, v->uuid, v->total_mem, v->attrs, FERRY_NATTRS_CLIENT);
  if (ferry_arena_init(&v->arena, ferry_arena_base(v->index), FERRY_ARENA_STRIDE, v->granularity)) {
    ferry_log("device %d: unusable allocation granularity %llu", v->index,
              (unsigned long long)v->granularity);
    return cudaErrorNoDevice;
  }
  return 0;
}

int ferry_connect_vgpu(struct ferry_vgpu *v) {
  char err[256];
  struct ferry_link *l = &v->link;
  const struct ferry_transport *t = ferry_transport_find(v->url.scheme, err, sizeof err);
  if (!t) {
    ferry_log("device %d (%s): %s", v->index, v->url_text, err);
    return cudaErrorNoDevice;
  }
  l->conn = t->connect(&v->url, ferry_connect_timeout_ms(), err, sizeof err);
  if (!l->conn) {
    ferry_log("device %d: %s", v->index, err);
    return cudaErrorNoDevice;
  }
  l->reader = malloc(sizeof *l->reader);
  if (!l->reader) return cudaErrorMemoryAllocation;
  ferry_reader_init(l->reader, l->conn);
  uint64_t base = ferry_arena_base(v->index);
  struct ferry_hello_rets r;
  l->streams = v->url.streams;
  int rc = ferry_link_hello(l, (uint32_t)v->url.gpu, base, &r, ferry_connect_timeout_ms());
  if (rc) return rc == cudaErrorInvalidDevice ? rc : cudaErrorNoDevice;
  if ((rc = take_device(v, &r))) return rc;
  ferry_link_stripes_open(l); /* after take_device: its call reuses r's strings' buffer */
  ferry_debug("device %d: %s at %s", v->index, v->name, v->url_text);
  return 0;
}

/* FERRY_DEVICES=local:N: the vGPU starts where a migration onto a
   ferry-mhelper leaves one (same link, staging, pinned memory, replay
   log), so that it can later move to a server; in this process it could
   not (that mode keeps no log) */
static int start_in_helper(struct ferry_vgpu *v) {
  char why[256] = "";
  const char *policy = getenv("FERRY_MHELPER");
  struct ferry_hello_rets r;
  int rc = 0;
  if (policy && !strcmp(policy, "never")) {
    snprintf(why, sizeof why, "a local GPU at start runs in a ferry-mhelper, which "
             "FERRY_MHELPER=never forbids");
    rc = cudaErrorNoDevice;
  } else if (!(rc = ferry_helper_start(v, v->start_gpu, &v->link, &r, why, sizeof why))) {
    v->link.quiet = 0; /* its own link now: a later GOODBYE is said */
    if (!(rc = take_device(v, &r))) rc = ferry_staging_open(&v->link, why, sizeof why);
    if (rc) ferry_link_close(&v->link); /* the helper sees the channel close and exits */
  }
  if (rc) {
    if (why[0]) ferry_log("FERRY_DEVICES entry %d '%s': %s", v->index, v->url_text, why);
    return rc == cudaErrorInvalidDevice ? rc : cudaErrorNoDevice;
  }
  if (ferry_host_register_helper(v))
    ferry_debug("device %d: pinned memory is not page-locked in its helper; its copies stay "
                "correct but synchronous", v->index);
  __atomic_store_n(&v->moved, 1, __ATOMIC_RELEASE);
  ferry_debug("device %d: %s", v->index, v->link.name);
  return 0;
}

/* collect device printf output and finish queued work before the process
   ends, as the CUDA driver does when it tears its contexts down */
static void drain_at_exit(void) {
  if (ferry.forked) return;
  /* FERRY_STATS: how much work each device did (tests pick migration points from it) */
  for (int i = 0; i < ferry.count && getenv("FERRY_STATS"); i++)
    ferry_log("stats: device=%d launches=%llu backend=%s", i,
              (unsigned long long)__atomic_load_n(&ferry.vgpus[i].launches, __ATOMIC_RELAXED),
              ferry_is_local(&ferry.vgpus[i]) ? "local"
              : ferry.vgpus[i].link.helper_pid ? "helper" : "remote");
  for (int i = 0; i < ferry.count && getenv("FERRY_STATS"); i++) {
    char line[2048];
    size_t at = 0;
    for (unsigned c = 0; c < FERRY_CALL_LIMIT && at < sizeof line - 64; c++) {
      uint64_t n = __atomic_load_n(&ferry.vgpus[i].calls[c], __ATOMIC_RELAXED);
      if (n) at += (size_t)snprintf(line + at, sizeof line - at, " %s=%llu", ferry_calls[c].name,
                                    (unsigned long long)n);
    }
    ferry_log("stats: device=%d calls:%s", i, at ? line : " none");
    /* which answers the program waited for, and how long: what a slow
       step spends on the network */
    at = 0;
    for (unsigned c = 0; c < FERRY_CALL_LIMIT && at < sizeof line - 64; c++) {
      uint64_t n = __atomic_load_n(&ferry.vgpus[i].trips[c], __ATOMIC_RELAXED);
      uint64_t ns = __atomic_load_n(&ferry.vgpus[i].trip_ns[c], __ATOMIC_RELAXED);
      if (n) at += (size_t)snprintf(line + at, sizeof line - at, " %s=%llu/%.3fms", ferry_calls[c].name,
                                    (unsigned long long)n, (double)ns / 1e6);
    }
    if (at) ferry_log("stats: device=%d round_trips:%s", i, line);
    /* FERRY_STREAMS: bytes that went over data connections (tests check it) */
    uint64_t shadows, pushed, pulled, pulls;
    ferry_shadow_stats(i, &shadows, &pushed, &pulled, &pulls);
    if (shadows || pushed || pulled)
      ferry_log("stats: device=%d mapped_host_blocks=%llu mapped_out=%llu mapped_in=%llu mapped_checks=%llu",
                i, (unsigned long long)shadows, (unsigned long long)pushed, (unsigned long long)pulled,
                (unsigned long long)pulls);
    ferry_log("stats: device=%d striped_out=%llu striped_in=%llu", i,
              (unsigned long long)__atomic_load_n(&ferry.vgpus[i].link.striped[0], __ATOMIC_RELAXED),
              (unsigned long long)__atomic_load_n(&ferry.vgpus[i].link.striped[1], __ATOMIC_RELAXED));
  }
  for (int i = 0; i < ferry.count; i++) {
    struct ferry_vgpu *v = &ferry.vgpus[i];
    if (ferry_is_local(v) || !v->link.conn || ferry_dead(v)) continue;
    /* another thread may be inside a call (exit() from elsewhere): never
       wait for it at exit */
    if (pthread_mutex_trylock(&v->link.call_lock)) continue;
    pthread_mutex_unlock(&v->link.call_lock);
    struct ferry_device_synchronize_args a = {0};
    ferry_call(v, FERRY_CALL_device_synchronize, &a, NULL, NULL);
  }
}

/* A forked child shares the parent's connections: one CUDA call from it
   would corrupt the parent's sessions. Like CUDA, the child cannot use the
   GPUs; it drops its copies of the connections (the parent's stay open). */
static void child_after_fork(void) {
  ferry.forked = 1;
  for (int i = 0; i < ferry.count; i++) {
    struct ferry_vgpu *v = &ferry.vgpus[i];
    struct ferry_conn *c = v->link.conn;
    struct ferry_stripes *stripes = v->link.stripes;
    ferry_link_init(&v->link, i, v->url_text);
    pthread_mutex_init(&v->arena_lock, NULL);
    init_gate(v);
    if (c) c->ops->detach(c);
    ferry_stripes_forget(stripes);
    v->link.dead = 1;
  }
}

static void init_once(void) {
  ferry_loader_check();
  ferry.stats = getenv("FERRY_STATS") != NULL;
  ferry_handles_init(&ferry.streams);
  ferry_handles_init(&ferry.events);
  for (int i = 0; i < FERRY_MAX_VGPUS; i++) {
    struct ferry_vgpu *v = &ferry.vgpus[i];
    v->index = i;
    v->inproc_gpu = -1;
    v->start_gpu = -1;
    ferry_link_init(&v->link, i, NULL);
    pthread_mutex_init(&v->arena_lock, NULL);
    pthread_mutex_init(&v->pre_lock, NULL);
    init_gate(v);
    ferry_recorder_init(&v->log);
  }
  int rc = parse_devices();
  for (int i = 0; !rc && i < ferry.count; i++) {
    rc = reserve_placeholder(&ferry.vgpus[i]);
    if (!rc) rc = ferry.vgpus[i].start_gpu >= 0 ? start_in_helper(&ferry.vgpus[i])
                                                : ferry_connect_vgpu(&ferry.vgpus[i]);
  }
  if (rc) {
    ferry.init_error = rc == cudaErrorInvalidDevice ? rc : cudaErrorNoDevice;
    return;
  }
  ferry_start_flusher();
  atexit(drain_at_exit);
  if (ferry_hooks.started) ferry_hooks.started();
  pthread_atfork(NULL, NULL, child_after_fork);
}

int ferry_ensure_init(void) {
  pthread_once(&ferry.once, init_once);
  if (ferry.forked) {
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
      ferry_log("CUDA cannot be used in a child made by fork(); its parent's GPUs stay with "
                "the parent");
    return cudaErrorInitializationError;
  }
  return ferry.init_error;
}

struct ferry_vgpu *ferry_current(int *err) {
  int rc = ferry_ensure_init();
  if (rc) {
    *err = rc;
    return NULL;
  }
  int d = ferry_thread()->device;
  if (d < 0 || d >= ferry.count) {
    *err = cudaErrorInvalidDevice;
    return NULL;
  }
  struct ferry_vgpu *v = &ferry.vgpus[d];
  if (__builtin_expect(!__atomic_load_n(&v->primary_active, __ATOMIC_RELAXED), 0))
    __atomic_store_n(&v->primary_active, 1, __ATOMIC_RELAXED);
  if (ferry_dead(v)) {
    *err = cudaErrorDevicesUnavailable;
    return NULL;
  }
  *err = 0;
  return v;
}
