/*
 * Runs a replay log against a target (see replay.h). The calls are the ones
 * the program made, with the same ids and addresses, so the target needs
 * nothing special; only results the program already holds (texture and
 * surface object values, kernel indexes from module_function) must come
 * out equal, and are checked.
 */
#include "replay/replay.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct replay_run {
  const struct ferry_target *t;
  const struct ferry_replay_hooks *hooks;
  struct ferry_replay_stats *stats;
  char *err;
  size_t errlen;
};

_Static_assert(sizeof(struct ferry_tex_destroy_args) == sizeof(struct ferry_surf_destroy_args) &&
                   sizeof(struct ferry_tex_create_rets) == sizeof(struct ferry_surf_create_rets),
               "texture and surface objects travel alike");

static int replay_one(void *ctx, const struct ferry_record *rec) {
  struct replay_run *run = ctx;
  union {
    struct ferry_module_load_rets module;
    struct ferry_module_function_rets func;
    struct ferry_tex_create_rets tex;
    struct ferry_surf_create_rets surf;
    unsigned char any[256];
  } rets;
  memset(&rets, 0, sizeof rets);
  struct ferry_bulk bulk = {.in = rec->bulk, .in_len = rec->bulk_len};
  const struct ferry_target *t = run->t;
  const void *args = rec->args;
  struct ferry_event_record_args ev;
  if (rec->call == FERRY_CALL_event_record) {
    /* a recorded event is complete once drained: recorded again on the
       default stream it is complete here too (its stream may be gone) */
    memcpy(&ev, rec->args, sizeof ev);
    ev.stream = 0;
    args = &ev;
  }
  double t0 = now_ms();
  int rc = t->call(t->ctx, rec->call, args, &rets, &bulk);
  double dt = now_ms() - t0;
  const char *name = ferry_calls[rec->call].name;
  if (rec->call == FERRY_CALL_module_load) {
    run->stats->modules++;
    run->stats->module_ms += dt;
  } else {
    run->stats->other_ms += dt;
  }
  run->stats->records++;
  if (rc) {
    const char *what = run->hooks && run->hooks->error_name ? run->hooks->error_name(rc) : NULL;
    if (what)
      snprintf(run->err, run->errlen, "replaying %s failed on the target GPU: %s%s", name, what,
               rc == 2 ? " (the local GPU is full)" : "");
    else
      snprintf(run->err, run->errlen, "replaying %s failed on the target GPU: cudaError %d", name, rc);
    return rc;
  }
  /* CUDA numbers texture and surface objects in creation order (1, 2, ...;
     measured on driver 580) and the program may hold a later one, after
     others were destroyed: stand-ins use up the numbers below it */
  int tex = rec->call == FERRY_CALL_tex_create;
  if ((tex || rec->call == FERRY_CALL_surf_create) && rets.tex.object < rec->object) {
    uint64_t burned[64];
    unsigned nb = 0;
    while (!rc && rets.tex.object < rec->object && nb < 64) {
      burned[nb++] = rets.tex.object;
      rc = t->call(t->ctx, rec->call, args, &rets, &bulk);
    }
    for (unsigned i = 0; i < nb; i++) {
      struct ferry_tex_destroy_args d = {burned[i]};
      t->call(t->ctx, tex ? FERRY_CALL_tex_destroy : FERRY_CALL_surf_destroy, &d, NULL, NULL);
    }
    if (rc) {
      snprintf(run->err, run->errlen, "re-creating a %s object failed: cudaError %d",
               tex ? "texture" : "surface", rc);
      return rc;
    }
  }
  if ((rec->call == FERRY_CALL_tex_create && rets.tex.object != rec->object) ||
      (rec->call == FERRY_CALL_surf_create && rets.surf.object != rec->object)) {
    snprintf(run->err, run->errlen,
             "the local GPU gave %s object %llu where the program holds %llu; it cannot keep "
             "its handle", rec->call == FERRY_CALL_tex_create ? "texture" : "surface",
             (unsigned long long)rets.tex.object, (unsigned long long)rec->object);
    return 1;
  }
  if (rec->call == FERRY_CALL_module_function && rets.func.index != rec->object) {
    const struct ferry_module_function_args *a = (const void *)rec->args;
    snprintf(run->err, run->errlen,
             "module %u: function %s got index %u on the local GPU where the program holds %llu; "
             "it cannot keep its handle", a->module, a->name ? a->name : "?", rets.func.index,
             (unsigned long long)rec->object);
    return 1;
  }
  if (rec->call == FERRY_CALL_module_load && run->hooks && run->hooks->module_loaded) {
    const struct ferry_module_load_args *a = (const void *)rec->args;
    ferry_blob source = {rec->var_info, rec->var_info_len};
    int h = run->hooks->module_loaded(run->hooks->ctx, a->module, source, rets.module.var_info);
    if (h) {
      snprintf(run->err, run->errlen, "module %u: its variables differ on the local GPU", a->module);
      return h;
    }
  }
  return 0;
}

int ferry_replay(struct ferry_recorder *log, const struct ferry_target *t,
                 const struct ferry_replay_hooks *hooks, struct ferry_replay_stats *stats,
                 char *err, size_t errlen) {
  memset(stats, 0, sizeof *stats);
  struct replay_run run = {t, hooks, stats, err, errlen};
  return ferry_recorder_foreach(log, replay_one, &run);
}

int ferry_replay_ahead(struct ferry_recorder *log, const struct ferry_target *t,
                       const struct ferry_replay_hooks *hooks, struct ferry_replay_stats *stats,
                       char *err, size_t errlen) {
  memset(stats, 0, sizeof *stats);
  struct replay_run run = {t, hooks, stats, err, errlen};
  return ferry_recorder_mark(log, replay_one, &run);
}

int ferry_replay_journal(struct ferry_recorder *log, const struct ferry_target *t,
                         const struct ferry_replay_hooks *hooks, struct ferry_replay_stats *stats,
                         char *err, size_t errlen) {
  struct replay_run run = {t, hooks, stats, err, errlen};
  int rc = ferry_recorder_journal_foreach(log, replay_one, &run);
  if (rc == -1)
    snprintf(err, errlen, "the program changed too much since the log was replayed ahead (a "
             "device reset, or more than %d changes)", FERRY_JOURNAL_MAX);
  return rc;
}
