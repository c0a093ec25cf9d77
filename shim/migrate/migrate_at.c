/*
 * Where a migration goes, as text (a local GPU's index or a server URL),
 * and FERRY_MIGRATE_AT, which makes a program move by itself at its N-th
 * launch (tests, demos, the mrCUDA paper's switch threshold). The
 * migration itself is migrate.c's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shim/migrate/migrate.h"

/* a decimal in [0, max], all of the token; -1 otherwise */
static long long number(const char *s, const char *end, long long max) {
  long long v = 0;
  if (s == end) return -1;
  for (; s < end; s++) {
    if (*s < '0' || *s > '9' || v > (max - (*s - '0')) / 10) return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

/* a local GPU's index, or a server URL (tcp://host:port/gpu, ib://...) */
int ferry_migrate_parse_target(const char *text, size_t len, int *gpu, struct ferry_url *url,
                               int *remote, char *why, size_t n) {
  char t[300], shown[FERRY_ECHO_MAX + 4];
  if (!len || len >= sizeof t) {
    snprintf(why, n, "'%s' is neither a local GPU nor a server URL",
             ferry_echo(text, len, shown, sizeof shown));
    return -1;
  }
  memcpy(t, text, len);
  t[len] = '\0';
  long long g = number(t, t + len, INT32_MAX);
  if (g >= 0) {
    *gpu = (int)g, *remote = 0;
    return 0;
  }
  char uerr[200];
  if (ferry_url_parse(t, url, uerr, sizeof uerr)) {
    snprintf(why, n, "'%s' is neither a local GPU nor a server URL (%s)",
             ferry_echo_url(t, shown, sizeof shown), uerr);
    return -1;
  }
  *remote = 1, *gpu = -1;
  return 0;
}

/* ---- FERRY_MIGRATE_AT=<vgpu>:<target>:launch=<N>[,...]; target: a local
   GPU, or a server URL (tcp://host:port/gpu) ---- */

#define MAX_AT 16
static struct at {
  int vgpu, gpu, remote;
  struct ferry_url url;
  uint64_t launch;
} at_list[MAX_AT];
static int nat;
static pthread_once_t at_once = PTHREAD_ONCE_INIT;


/* one <vgpu>:<local-gpu>:launch=<N>; 0, or -1 with the reason in why */
static int parse_one(const char *t, struct at *out, char *why, size_t n) {
  /* the target may be a URL, with colons of its own: N follows the last ":launch=" */
  const char *c1 = strchr(t, ':'), *c2 = NULL;
  for (const char *p = c1; p && (p = strstr(p, ":launch=")); p++) c2 = p;
  if (!c1 || !c2 || c2 <= c1) {
    snprintf(why, n, "'%s' is not <vgpu>:<local-gpu or server URL>:launch=<N>", t);
    return -1;
  }
  long long vg = number(t, c1, FERRY_MAX_VGPUS);
  const char *k = c2 + 8;
  long long launch = number(k, k + strlen(k), INT64_MAX);
  if (vg < 0 || launch < 1) {
    snprintf(why, n, "'%s': the vgpu and N must be numbers, N from 1 to %lld", t,
             (long long)INT64_MAX);
    return -1;
  }
  struct at a = {.vgpu = (int)vg, .launch = (uint64_t)launch};
  if (ferry_migrate_parse_target(c1 + 1, (size_t)(c2 - c1 - 1), &a.gpu, &a.url, &a.remote, why, n)) return -1;
  if (!a.remote && a.gpu > 4095) {
    snprintf(why, n, "'%s': no local GPU %d", t, a.gpu);
    return -1;
  }
  if (vg >= ferry.count) {
    snprintf(why, n, "'%s': no vgpu %lld, this program has %d", t, vg, ferry.count);
    return -1;
  }
  *out = a;
  return 0;
}

static void parse_at(void) {
  const char *s = getenv("FERRY_MIGRATE_AT");
  if (!s || !*s) return;
  char *copy = strdup(s), *save = NULL, why[200] = "out of memory";
  int bad = !copy;
  for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !bad;
       tok = strtok_r(NULL, ",", &save)) {
    if (nat == MAX_AT) {
      snprintf(why, sizeof why, "more than %d migrations", MAX_AT);
      bad = 1;
    } else {
      bad = parse_one(tok, &at_list[nat++], why, sizeof why) != 0;
    }
  }
  free(copy);
  if (bad) { /* all or nothing: a list with a mistake moves nothing */
    ferry_log("FERRY_MIGRATE_AT='%s' ignored: %s", s, why);
    nat = 0;
  }
}

void ferry_migrate_at_check(void) { pthread_once(&at_once, parse_at); }

/* one listed migration at a time: with several threads launching, the
   next point can come while the last one still moves the vGPU */
static pthread_mutex_t at_lock = PTHREAD_MUTEX_INITIALIZER;

void ferry_migrate_at_launch(int vgpu) {
  ferry_migrate_waited_at_launch(vgpu);
  pthread_once(&at_once, parse_at);
  struct ferry_vgpu *v = &ferry.vgpus[vgpu];
  uint64_t n = __atomic_add_fetch(&v->launches, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < nat; i++) {
    if (at_list[i].vgpu != vgpu || n != at_list[i].launch) continue;
    pthread_mutex_lock(&at_lock);
    char err[300];
    int started;
    /* a refusal is said here: nobody else would see it */
    const struct at *a = &at_list[i];
    int rc = ferry_migrate_run(vgpu, a->gpu, a->remote ? &a->url : NULL, err, sizeof err, &started);
    if (rc && rc != FERRY_MIGRATE_WAITS && !started) { /* a wait is said where it begins */
      char target[320], full[320];
      if (a->remote) ferry_url_format(&a->url, full, sizeof full), ferry_echo_url(full, target, sizeof target);
      else snprintf(target, sizeof target, "local GPU %d", a->gpu);
      ferry_log("migration of device %d to %s failed: %s", vgpu, target, err);
    }
    pthread_mutex_unlock(&at_lock);
  }
}
