/* ferry_spank: a Slurm SPANK plugin that gives a job remote GPUs served by
 * ferry-server.
 *
 *   sbatch --ferry-gpus=2 job.sh      (also srun, salloc)
 *
 * In each step of the job (slurmstepd, "remote" context, as root, after the
 * options are known) it picks N GPUs from the site's ferry.conf, records the
 * choice for the job under the state directory, and sets FERRY_DEVICES (and
 * FERRY_CONTROL_DIR, FERRY_TOKEN_FILE where configured) in the job's
 * environment. Every step of a job gets the same GPUs. The job epilog
 * (slurm_spank_job_epilog, as root on the node) forgets the job's record.
 *
 * plugstack.conf:
 *   optional /usr/lib/ferry/slurm/ferry_spank.so conf=/etc/ferry/ferry.conf
 *
 * See docs/scheduling.md and slurm/ferry.conf.example. Built against
 * <slurm/spank.h> (Debian: libslurm-dev) alone; it links nothing, the
 * spank_* symbols come from the Slurm process that loads it.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(ferry, 1);

#define FS_MAX_GPUS 1024     /* GPUs in one ferry.conf, all servers together */
#define FS_URL_MAX 256
#define FS_LIST_MAX 8192     /* one FERRY_DEVICES value */

struct fs_gpu {
  char url[FS_URL_MAX]; /* tcp://host:port/gpu */
  int slots;            /* jobs that may hold it at once */
  int used;             /* jobs that hold it now (from the state directory) */
};

struct fs_conf {
  char path[PATH_MAX];
  char state_dir[PATH_MAX];
  char control_dir[PATH_MAX];
  char token_file[PATH_MAX];
  int max_gpus;
  int ngpus;
  struct fs_gpu gpus[FS_MAX_GPUS];
};

static int fs_requested = -1; /* --ferry-gpus, -1 when not given */

static int fs_opt_cb(int val, const char *optarg, int remote) {
  (void)val;
  (void)remote;
  char *end;
  errno = 0;
  long n = optarg ? strtol(optarg, &end, 10) : -1;
  if (!optarg || errno || end == optarg || *end || n < 0 || n > FS_MAX_GPUS) {
    slurm_error("ferry: --ferry-gpus takes a number of GPUs (0..%d), not '%s'", FS_MAX_GPUS,
                optarg ? optarg : "");
    return -1;
  }
  fs_requested = (int)n;
  return 0;
}

static struct spank_option fs_option = {
    "ferry-gpus", "N", "remote GPUs for the job, served by ferry-server (sets FERRY_DEVICES)", 1, 0,
    fs_opt_cb};

/* every context that parses options: sbatch, salloc, srun, slurmstepd */
int slurm_spank_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR) return 0;
  if (spank_option_register(sp, &fs_option) != ESPANK_SUCCESS) {
    slurm_error("ferry: cannot register --ferry-gpus");
    return -1;
  }
  return 0;
}

/* ---- ferry.conf ---- */

static char *fs_trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  return s;
}

/* "0,1,4-7" -> calls add(i) for each; 0, or -1 on a malformed list */
static int fs_each_index(const char *list, int (*add)(struct fs_conf *, const char *, int, int),
                         struct fs_conf *c, const char *base, int slots) {
  const char *p = list;
  while (*p) {
    char *end;
    errno = 0;
    long a = strtol(p, &end, 10), b;
    if (end == p || errno || a < 0 || a > 65535) return -1;
    b = a;
    p = end;
    if (*p == '-') {
      p++;
      b = strtol(p, &end, 10);
      if (end == p || errno || b < a || b > 65535) return -1;
      p = end;
    }
    for (long i = a; i <= b; i++)
      if (add(c, base, (int)i, slots)) return -1;
    if (*p == ',') p++;
    else if (*p) return -1;
  }
  return 0;
}

static int fs_add_gpu(struct fs_conf *c, const char *base, int index, int slots) {
  if (c->ngpus >= FS_MAX_GPUS) return -1;
  struct fs_gpu *g = &c->gpus[c->ngpus];
  int n = snprintf(g->url, sizeof g->url, "%s/%d", base, index);
  if (n < 0 || (size_t)n >= sizeof g->url) return -1;
  g->slots = slots;
  g->used = 0;
  c->ngpus++;
  return 0;
}

/* `server URL gpus=LIST [slots=N]`; 0 or -1 after saying why */
static int fs_parse_server(struct fs_conf *c, char *rest, int lineno) {
  char *save = NULL, *url = strtok_r(rest, " \t", &save), *w;
  const char *gpus = "0";
  int slots = 1;
  if (!url || (strncmp(url, "tcp://", 6) && strncmp(url, "ib://", 5))) {
    slurm_error("ferry: %s:%d: server takes a tcp:// or ib:// URL first", c->path, lineno);
    return -1;
  }
  size_t ul = strlen(url);
  while (ul && url[ul - 1] == '/') url[--ul] = 0;
  if (strchr(strchr(url, ':') + 3, '/')) {
    slurm_error("ferry: %s:%d: give the server's URL without a GPU (%s), and gpus=LIST", c->path,
                lineno, url);
    return -1;
  }
  while ((w = strtok_r(NULL, " \t", &save))) {
    if (!strncmp(w, "gpus=", 5)) gpus = w + 5;
    else if (!strncmp(w, "slots=", 6)) {
      char *end;
      long n = strtol(w + 6, &end, 10);
      if (end == w + 6 || *end || n < 1 || n > 1000) {
        slurm_error("ferry: %s:%d: slots takes 1..1000, not '%s'", c->path, lineno, w + 6);
        return -1;
      }
      slots = (int)n;
    } else {
      slurm_error("ferry: %s:%d: unknown server setting '%s'", c->path, lineno, w);
      return -1;
    }
  }
  if (fs_each_index(gpus, fs_add_gpu, c, url, slots)) {
    slurm_error("ferry: %s:%d: bad GPU list '%s' (like 0,1,4-7), or too many GPUs", c->path,
                lineno, gpus);
    return -1;
  }
  return 0;
}

static int fs_set_path(struct fs_conf *c, char *dst, const char *key, const char *val, int lineno) {
  if (val[0] != '/' || strlen(val) >= PATH_MAX) {
    slurm_error("ferry: %s:%d: %s takes an absolute path", c->path, lineno, key);
    return -1;
  }
  strcpy(dst, val);
  return 0;
}

/* 0, or -1 after saying why */
static int fs_load_conf(struct fs_conf *c, const char *path) {
  memset(c, 0, sizeof *c);
  snprintf(c->path, sizeof c->path, "%s", path);
  strcpy(c->state_dir, "/var/lib/ferry-slurm");
  c->max_gpus = 16;
  FILE *f = fopen(path, "r");
  if (!f) {
    slurm_error("ferry: cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  char line[4096];
  int lineno = 0, rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f)) {
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *s = fs_trim(line), *val = s;
    if (!*s) continue;
    while (*val && !isspace((unsigned char)*val)) val++;
    if (*val) *val++ = 0;
    val = fs_trim(val);
    if (!strcmp(s, "server")) rc = fs_parse_server(c, val, lineno);
    else if (!strcmp(s, "state_dir")) rc = fs_set_path(c, c->state_dir, s, val, lineno);
    else if (!strcmp(s, "control_dir")) rc = fs_set_path(c, c->control_dir, s, val, lineno);
    else if (!strcmp(s, "token_file")) rc = fs_set_path(c, c->token_file, s, val, lineno);
    else if (!strcmp(s, "max_gpus")) {
      char *end;
      long n = strtol(val, &end, 10);
      if (end == val || *end || n < 1 || n > FS_MAX_GPUS) {
        slurm_error("ferry: %s:%d: max_gpus takes 1..%d", path, lineno, FS_MAX_GPUS);
        rc = -1;
      } else c->max_gpus = (int)n;
    }
    /* the hook's settings (ferry-slurm-hook reads the same file) */
    else if (!strcmp(s, "policy") || !strcmp(s, "ferry") || !strcmp(s, "local_gpus") ||
             !strcmp(s, "migrate_timeout") || !strcmp(s, "max_tries") || !strcmp(s, "log"))
      continue;
    else slurm_info("ferry: %s:%d: unknown setting '%s' ignored", path, lineno, s);
  }
  fclose(f);
  return rc;
}

static const char *fs_arg(int ac, char **av, const char *key, const char *dflt) {
  size_t n = strlen(key);
  for (int i = 0; i < ac; i++)
    if (!strncmp(av[i], key, n) && av[i][n] == '=') return av[i] + n + 1;
  return dflt;
}

static const char *fs_conf_path(int ac, char **av) {
  return fs_arg(ac, av, "conf", "/etc/ferry/ferry.conf");
}

/* ---- the state directory: job.<id> holds the job's FERRY_DEVICES ---- */

static int fs_lock(const struct fs_conf *c) {
  if (mkdir(c->state_dir, 0755) && errno != EEXIST) {
    slurm_error("ferry: cannot create %s: %s", c->state_dir, strerror(errno));
    return -1;
  }
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/lock", c->state_dir);
  int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || flock(fd, LOCK_EX)) {
    slurm_error("ferry: cannot lock %s: %s", p, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

/* the contents of a small file, without its trailing newline; 0 if found */
static int fs_read_small(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t got = fread(buf, 1, n - 1, f);
  fclose(f);
  buf[got] = 0;
  buf[strcspn(buf, "\n")] = 0;
  return 0;
}

/* counts, for each configured GPU, the jobs whose record names it */
static void fs_count_used(struct fs_conf *c) {
  DIR *d = opendir(c->state_dir);
  if (!d) return;
  struct dirent *e;
  char p[PATH_MAX * 2], list[FS_LIST_MAX];
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "job.", 4) || strchr(e->d_name, '~')) continue;
    snprintf(p, sizeof p, "%s/%s", c->state_dir, e->d_name);
    if (fs_read_small(p, list, sizeof list)) continue;
    char *save = NULL;
    for (char *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save))
      for (int i = 0; i < c->ngpus; i++)
        if (!strcmp(c->gpus[i].url, u)) c->gpus[i].used++;
  }
  closedir(d);
}

/* chooses n GPUs: each time the one with the most free slots (ties: the
   first in ferry.conf), never the same twice; 0, or -1 if too few are free */
static int fs_choose(struct fs_conf *c, int n, char *out, size_t outn) {
  static char taken[FS_MAX_GPUS];
  memset(taken, 0, sizeof taken);
  out[0] = 0;
  for (int k = 0; k < n; k++) {
    int best = -1;
    for (int i = 0; i < c->ngpus; i++) {
      if (taken[i] || c->gpus[i].used >= c->gpus[i].slots) continue;
      if (best < 0 || c->gpus[i].slots - c->gpus[i].used > c->gpus[best].slots - c->gpus[best].used)
        best = i;
    }
    if (best < 0) return -1;
    taken[best] = 1;
    size_t l = strlen(out);
    if (l + strlen(c->gpus[best].url) + 2 > outn) return -1;
    snprintf(out + l, outn - l, "%s%s", k ? "," : "", c->gpus[best].url);
  }
  return 0;
}

static int fs_write_record(const struct fs_conf *c, uint32_t job, const char *list) {
  char p[PATH_MAX + 32], tmp[PATH_MAX + 40];
  snprintf(p, sizeof p, "%s/job.%u", c->state_dir, job);
  snprintf(tmp, sizeof tmp, "%s~", p);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  int bad = fprintf(f, "%s\n", list) < 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, p)) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* the per-user directory for control sockets: <control_dir>/<uid>, 0700 */
static int fs_control_dir(spank_t sp, const struct fs_conf *c, char *out, size_t n) {
  uid_t uid;
  gid_t gid;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
    return -1;
  if (mkdir(c->control_dir, 0755) && errno != EEXIST) return -1;
  snprintf(out, n, "%s/%u", c->control_dir, (unsigned)uid);
  if (mkdir(out, 0700) && errno != EEXIST) return -1;
  struct stat st;
  if (lstat(out, &st) || !S_ISDIR(st.st_mode)) return -1;
  if ((st.st_uid != uid || st.st_gid != gid) && chown(out, uid, gid)) return -1;
  if ((st.st_mode & 07777) != 0700 && chmod(out, 0700)) return -1;
  return 0;
}

static struct fs_conf fs_conf; /* big: not on slurmstepd's stack */

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  if (!spank_remote(sp) || fs_requested <= 0) return 0;
  struct fs_conf *c = &fs_conf;
  if (fs_load_conf(c, fs_conf_path(ac, av))) return -1;
  if (fs_requested > c->max_gpus) {
    slurm_error("ferry: --ferry-gpus=%d is more than this site's max_gpus (%d)", fs_requested,
                c->max_gpus);
    return -1;
  }
  uint32_t job;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
    slurm_error("ferry: no job id");
    return -1;
  }
  int lock = fs_lock(c);
  if (lock < 0) return -1;
  char rec[PATH_MAX + 32], list[FS_LIST_MAX];
  snprintf(rec, sizeof rec, "%.*s/job.%u", PATH_MAX - 1, c->state_dir, job);
  int rc = 0;
  if (fs_read_small(rec, list, sizeof list) == 0 && list[0]) {
    /* a later step of the job: the GPUs it already has */
  } else {
    fs_count_used(c);
    if (fs_choose(c, fs_requested, list, sizeof list)) {
      int free_gpus = 0;
      for (int i = 0; i < c->ngpus; i++) free_gpus += c->gpus[i].used < c->gpus[i].slots;
      slurm_error("ferry: job %u asks for %d ferry GPUs, %d of the %d in %s are free", job,
                  fs_requested, free_gpus, c->ngpus, c->path);
      rc = -1;
    } else if (fs_write_record(c, job, list)) {
      slurm_error("ferry: cannot write %s: %s", rec, strerror(errno));
      rc = -1;
    } else {
      slurm_info("ferry: job %u gets FERRY_DEVICES=%s", job, list);
    }
  }
  close(lock);
  if (rc) return rc;
  if (spank_setenv(sp, "FERRY_DEVICES", list, 1) != ESPANK_SUCCESS) {
    slurm_error("ferry: cannot set FERRY_DEVICES");
    return -1;
  }
  if (c->token_file[0]) spank_setenv(sp, "FERRY_TOKEN_FILE", c->token_file, 0);
  if (c->control_dir[0]) {
    char dir[PATH_MAX + 16];
    if (fs_control_dir(sp, c, dir, sizeof dir)) {
      slurm_error("ferry: cannot make the control directory under %s: %s", c->control_dir,
                  strerror(errno));
      return -1;
    }
    spank_setenv(sp, "FERRY_CONTROL_DIR", dir, 1);
  }
  return 0;
}

/* control sockets left by programs that died without removing theirs (a
   scancel, SIGKILL): <control_dir>/<uid>/ferry-<pid>.sock whose pid is gone */
static void fs_sweep_sockets(const struct fs_conf *c) {
  if (!c->control_dir[0]) return;
  DIR *top = opendir(c->control_dir);
  if (!top) return;
  struct dirent *u, *e;
  char dir[PATH_MAX * 2], p[PATH_MAX * 3];
  while ((u = readdir(top))) {
    if (u->d_name[0] == '.') continue;
    snprintf(dir, sizeof dir, "%s/%s", c->control_dir, u->d_name);
    DIR *d = opendir(dir);
    if (!d) continue;
    while ((e = readdir(d))) {
      char *end;
      if (strncmp(e->d_name, "ferry-", 6)) continue;
      long pid = strtol(e->d_name + 6, &end, 10);
      if (end == e->d_name + 6 || strcmp(end, ".sock") || pid <= 0) continue;
      if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      struct stat st;
      if (!lstat(p, &st) && S_ISSOCK(st.st_mode) && !unlink(p))
        slurm_info("ferry: removed %s (pid %ld is gone)", p, pid);
    }
    closedir(d);
  }
  closedir(top);
}

/* hook=PATH: runs `PATH --conf CONF epilog` (ferry-slurm-hook) and puts
   each line it prints into the Slurm log (slurmd's) */
static void fs_run_hook(const char *hook, const char *conf, uint32_t job) {
  if (!hook || !*hook) return;
  if (strchr(hook, '\'') || strchr(conf, '\'')) {
    slurm_error("ferry: hook= and conf= must not hold a quote");
    return;
  }
  char cmd[2 * PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "'%s' --conf '%s' epilog 2>&1", hook, conf);
  FILE *p = popen(cmd, "r");
  if (!p) {
    slurm_error("ferry: job %u: cannot run %s: %s", job, hook, strerror(errno));
    return;
  }
  char line[1024];
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = 0;
    slurm_info("ferry: job %u: %s", job, line);
  }
  int st = pclose(p);
  if (st) slurm_info("ferry: job %u: %s ended with status %d", job, hook, st);
}

/* the job epilog, on each node of the job (root): the job's GPUs are free;
   with hook=, local GPUs the job held go to running ferry programs */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
  uint32_t job;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
  fs_run_hook(fs_arg(ac, av, "hook", NULL), fs_conf_path(ac, av), job);
  struct fs_conf *c = &fs_conf;
  if (fs_load_conf(c, fs_conf_path(ac, av))) return 0; /* never drain the node for this */
  fs_sweep_sockets(c);
  char rec[PATH_MAX + 32];
  snprintf(rec, sizeof rec, "%.*s/job.%u", PATH_MAX - 1, c->state_dir, job);
  if (access(rec, F_OK)) return 0;
  int lock = fs_lock(c);
  if (lock < 0) return 0;
  if (unlink(rec) == 0) slurm_info("ferry: job %u gave back its ferry GPUs", job);
  close(lock);
  return 0;
}
