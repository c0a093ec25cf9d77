/*
 * What the replay log costs a program while its vGPU runs remotely: the
 * time ferry_record() adds to each state-building call, per kind of call,
 * how a log's build time grows with its length (fitted as constant +
 * per-record, the paper's record model: 282 ns per call; ferry's target is
 * 30 ns), and what a call that is NOT recorded pays: the flag test in
 * shim/core/remote.c ferry_call(). Runs on any machine: the recorder never
 * touches a GPU.
 * usage: ferry-bench-record [quick]
 * Prints "metric value unit" lines (bench/migrate_report.py reads them)
 * and, on lines starting with '#', the same as a table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recorder/recorder.h"

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int quick;
static int trials(void) { return quick ? 3 : 7; }

static void must(int rc, const char *what) {
  if (rc) {
    fprintf(stderr, "ferry-bench-record: %s failed\n", what);
    exit(1);
  }
}

/* ---- the calls, built as the shim builds them ---- */

static uint64_t arena_addr(uint64_t i) { return 0x200000000000ull + i * 0x200000ull; }

static void rec_map(struct ferry_recorder *r, uint64_t i) {
  struct ferry_mem_map_args a = {arena_addr(i), 0x200000};
  must(ferry_record(r, FERRY_CALL_mem_map, &a, NULL, NULL, 0), "mem_map");
}
static void rec_unmap(struct ferry_recorder *r, uint64_t i) {
  struct ferry_mem_unmap_args a = {arena_addr(i), 0x200000};
  must(ferry_record(r, FERRY_CALL_mem_unmap, &a, NULL, NULL, 0), "mem_unmap");
}
static void rec_stream(struct ferry_recorder *r, uint32_t h, int destroy) {
  if (destroy) {
    struct ferry_stream_destroy_args a = {h};
    must(ferry_record(r, FERRY_CALL_stream_destroy, &a, NULL, NULL, 0), "stream_destroy");
  } else {
    struct ferry_stream_create_args a = {h, 1, 0};
    must(ferry_record(r, FERRY_CALL_stream_create, &a, NULL, NULL, 0), "stream_create");
  }
}
static void rec_event(struct ferry_recorder *r, uint32_t h, int destroy) {
  if (destroy) {
    struct ferry_event_destroy_args a = {h};
    must(ferry_record(r, FERRY_CALL_event_destroy, &a, NULL, NULL, 0), "event_destroy");
  } else {
    struct ferry_event_create_args a = {h, 2};
    must(ferry_record(r, FERRY_CALL_event_create, &a, NULL, NULL, 0), "event_create");
  }
}
/* a setting: each call replaces the record of the same (func, attr) */
static void rec_attr(struct ferry_recorder *r, uint64_t i) {
  struct ferry_func_set_attribute_args a = {(uint32_t)(1u << 16 | (i % 32)), (uint32_t)(8 + i % 2),
                                            (int32_t)i};
  must(ferry_record(r, FERRY_CALL_func_set_attribute, &a, NULL, NULL, 0), "func_set_attribute");
}

/* a module as a program registers one: 12 kernel names, 4 variables */
static char func_names[512], var_names[128];
static uint32_t func_names_len, var_names_len;
static uint64_t var_info[8];
static const char fatbin[4096];

static void make_names(void) {
  size_t at = 0;
  for (int k = 0; k < 12; k++)
    at += (size_t)snprintf(func_names + at, sizeof func_names - at, "_Z14bench_kernel_%dPfS_iPKf", k) + 1;
  func_names_len = (uint32_t)at;
  at = 0;
  for (int k = 0; k < 4; k++)
    at += (size_t)snprintf(var_names + at, sizeof var_names - at, "bench_var_%d", k) + 1;
  var_names_len = (uint32_t)at;
  for (int k = 0; k < 4; k++) var_info[2 * k] = 0x7f0000000000ull + k * 256, var_info[2 * k + 1] = 256;
}
static void rec_module(struct ferry_recorder *r, uint32_t m, int unload) {
  if (unload) {
    struct ferry_module_unload_args a = {m};
    must(ferry_record(r, FERRY_CALL_module_unload, &a, NULL, NULL, 0), "module_unload");
    return;
  }
  struct ferry_module_load_args a = {m, {func_names, func_names_len}, {var_names, var_names_len}};
  struct ferry_module_load_rets rets = {{NULL, 0}, {var_info, sizeof var_info}};
  must(ferry_record(r, FERRY_CALL_module_load, &a, &rets, fatbin, sizeof fatbin), "module_load");
}

/* a log of n live mem_map records, to run the pairs against */
static void background(struct ferry_recorder *r, uint64_t n) {
  ferry_recorder_init(r);
  for (uint64_t i = 0; i < n; i++) rec_map(r, (1ull << 30) + i);
}

/* ---- 1: ns per record, per kind, beside a log of `live` records ---- */

enum kind { MAP_PAIR, STREAM_PAIR, EVENT_PAIR, ATTR_SET, MODULE_PAIR, NKINDS };
static const char *const kind_names[NKINDS] = {"mem_map+unmap", "stream_create+destroy",
                                               "event_create+destroy", "func_set_attribute",
                                               "module_load+unload"};
static const char *const kind_keys[NKINDS] = {"map_pair", "stream_pair", "event_pair", "func_attr",
                                              "module_pair"};

/* ns per recorded call (a pair counts as two) */
static double per_record(enum kind k, uint64_t live, uint64_t iters) {
  double v[16];
  int n = trials();
  for (int t = 0; t < n; t++) {
    struct ferry_recorder r;
    background(&r, live);
    double t0 = now_ns();
    for (uint64_t i = 0; i < iters; i++) {
      switch (k) {
      case MAP_PAIR: rec_map(&r, i), rec_unmap(&r, i); break;
      case STREAM_PAIR: rec_stream(&r, (uint32_t)i + 1, 0), rec_stream(&r, (uint32_t)i + 1, 1); break;
      case EVENT_PAIR: rec_event(&r, (uint32_t)i + 1, 0), rec_event(&r, (uint32_t)i + 1, 1); break;
      case ATTR_SET: rec_attr(&r, i), rec_attr(&r, i + 1); break;
      case MODULE_PAIR: rec_module(&r, (uint32_t)i + 2, 0), rec_module(&r, (uint32_t)i + 2, 1); break;
      default: break;
      }
    }
    v[t] = (now_ns() - t0) / (2.0 * iters);
    /* a pair leaves nothing behind: a log that kept it would be measured wrong */
    if (k != ATTR_SET && ferry_recorder_live(&r) != live) must(1, "the log after create+destroy pairs");
    ferry_recorder_destroy(&r);
  }
  return median(v, n);
}

/* ---- 2: a log of n records built from nothing, for the fit ---- */

/* the mixed log: what a program records, roughly: mostly allocations, then
   streams, events, settings and now and then a module */
static void rec_mixed(struct ferry_recorder *r, uint64_t i) {
  switch (i % 8) {
  case 0: case 1: case 2: case 3: rec_map(r, i); break;
  case 4: rec_stream(r, (uint32_t)i, 0); break;
  case 5: rec_event(r, (uint32_t)i, 0); break;
  case 6: rec_attr(r, i / 8); break;
  default: if (i % 64 == 7) rec_module(r, (uint32_t)(i / 64) + 1, 0); else rec_map(r, i); break;
  }
}

/* median ns to record n calls into a fresh log, its first allocations and
   page faults included (they are the constant): one log at a time, as a
   program has it */
static double build(uint64_t n, int mixed) {
  uint64_t reps = (1u << 16) / n;
  if (reps > 200) reps = 200;
  if (reps < 5) reps = 5;
  if (quick && reps > 20) reps = 20;
  double *v = malloc(reps * sizeof *v);
  if (!v) must(1, "malloc");
  double best = 0;
  for (int t = 0; t < trials(); t++) {
    for (uint64_t k = 0; k < reps; k++) {
      struct ferry_recorder r;
      ferry_recorder_init(&r);
      double t0 = now_ns();
      for (uint64_t i = 0; i < n; i++) {
        if (mixed) rec_mixed(&r, i);
        else rec_map(&r, i);
      }
      v[k] = now_ns() - t0;
      if (!mixed && ferry_recorder_live(&r) != n) must(1, "the log of mem_map records");
      ferry_recorder_destroy(&r);
    }
    double m = median(v, (int)reps);
    if (!t || m < best) best = m; /* the quietest trial: the machine is shared */
  }
  free(v);
  return best;
}

/* least squares of y = c + b x, weighted by 1/y^2 (relative errors, so the
   short logs weigh as much as the long ones) */
static void fit(const double *x, const double *y, int n, double *c, double *b) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) {
    double w = 1.0 / (y[i] * y[i]);
    sw += w, sx += w * x[i], sy += w * y[i], sxx += w * x[i] * x[i], sxy += w * x[i] * y[i];
  }
  double d = sw * sxx - sx * sx;
  *b = d ? (sw * sxy - sx * sy) / d : 0;
  *c = (sy - *b * sx) / sw;
}

/* ---- 3: calls that are not recorded ---- */

/* call ids the compiler cannot see through: ferry_call's test reads the
   table like this for every call */
static volatile unsigned plain_calls[4] = {FERRY_CALL_launch, FERRY_CALL_memcpy_htod,
                                           FERRY_CALL_stream_synchronize, FERRY_CALL_memset};
static volatile unsigned sink;

static double not_recorded(int through_record, uint64_t iters) {
  double v[16];
  int n = trials();
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  struct ferry_launch_args a = {0};
  for (int t = 0; t < n; t++) {
    unsigned hits = 0;
    double t0 = now_ns();
    for (uint64_t i = 0; i < iters; i++) {
      unsigned call = plain_calls[i & 3];
      if (through_record == 2) hits += call; /* the loop alone */
      else if (through_record) hits += (unsigned)ferry_record(&r, call, &a, NULL, NULL, 0);
      else if (ferry_calls[call].flags & RECORD) hits++;
    }
    v[t] = (now_ns() - t0) / (double)iters;
    sink = hits;
  }
  ferry_recorder_destroy(&r);
  return median(v, n);
}

/* for reference: an uncontended lock and unlock, which every record takes */
static double lock_pair(uint64_t iters) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  double v[16];
  int n = trials();
  for (int t = 0; t < n; t++) {
    double t0 = now_ns();
    for (uint64_t i = 0; i < iters; i++) {
      pthread_mutex_lock(&m);
      sink = (unsigned)i;
      pthread_mutex_unlock(&m);
    }
    v[t] = (now_ns() - t0) / (double)iters;
  }
  return median(v, n);
}

int main(int argc, char **argv) {
  quick = argc > 1 && !strcmp(argv[1], "quick");
  make_names();
  uint64_t iters = quick ? 20000 : 200000;

  printf("# ferry-bench-record: ns per recorded call (median of %d trials)\n", trials());
  printf("# %-24s %14s %14s\n", "calls", "empty log", "1024 live");
  double pr[NKINDS][2];
  for (int k = 0; k < NKINDS; k++) {
    /* a module unload scans the log for its kernels' settings: fewer rounds */
    uint64_t it = k == MODULE_PAIR ? iters / 20 : iters;
    pr[k][0] = per_record((enum kind)k, 0, it);
    pr[k][1] = per_record((enum kind)k, 1024, it);
    printf("# %-24s %14.1f %14.1f\n", kind_names[k], pr[k][0], pr[k][1]);
  }
  for (int k = 0; k < NKINDS; k++) {
    printf("record_ns_%s_empty %.2f ns/record\n", kind_keys[k], pr[k][0]);
    printf("record_ns_%s_live1024 %.2f ns/record\n", kind_keys[k], pr[k][1]);
  }

  printf("# building a log of n records from nothing (ns, median)\n");
  printf("# %8s %14s %10s %14s %10s\n", "n", "mem_map", "ns/rec", "mixed", "ns/rec");
  double x[17], ym[17], yx[17];
  int np = 0;
  for (int e = 0; e <= 16; e++, np++) {
    uint64_t n = 1ull << e;
    x[np] = (double)n;
    ym[np] = build(n, 0);
    yx[np] = build(n, 1);
    printf("# %8llu %14.0f %10.1f %14.0f %10.1f\n", (unsigned long long)n, ym[np], ym[np] / n,
           yx[np], yx[np] / n);
  }
  for (int i = 0; i < np; i++) {
    printf("record_build_map_%.0f %.1f ns\n", x[i], ym[i]);
    printf("record_build_mixed_%.0f %.1f ns\n", x[i], yx[i]);
  }
  double c, b;
  fit(x, ym, np, &c, &b);
  printf("# fit, mem_map log: %.0f ns + %.2f ns/record\n", c, b);
  printf("record_fit_map_const %.1f ns\n", c);
  printf("record_fit_map_per_record %.3f ns/record\n", b);
  fit(x, yx, np, &c, &b);
  printf("# fit, mixed log:   %.0f ns + %.2f ns/record\n", c, b);
  printf("record_fit_mixed_const %.1f ns\n", c);
  printf("record_fit_mixed_per_record %.3f ns/record\n", b);

  double loop = not_recorded(2, iters * 50), flag = not_recorded(0, iters * 50),
         call = not_recorded(1, iters * 50);
  printf("# a call that is not recorded: the flag test %.2f ns (loop alone %.2f ns); "
         "ferry_record() on it %.2f ns\n", flag, loop, call);
  printf("record_not_recorded_loop %.3f ns/call\n", loop);
  printf("record_not_recorded_flag %.3f ns/call\n", flag);
  printf("record_not_recorded_call %.3f ns/call\n", call);
  double lock = lock_pair(iters * 10);
  printf("# for reference: an uncontended mutex lock + unlock %.2f ns\n", lock);
  printf("record_mutex_pair %.3f ns\n", lock);
  return 0;
}
