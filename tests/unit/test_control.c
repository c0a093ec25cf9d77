/* Checks the control socket (shim/migrate/control.c) and the CLI verbs that use it
 * (ferry ls/status/migrate), against test doubles of the migration engine
 * defined here. Three layers: ferry_control_handle as a pure function (every
 * verb and every bad input), the real socket in this process (mode, framing,
 * too-long lines, peers that vanish, status during a migration, the
 * connection cap), and fresh processes (this binary run as "child") for what
 * happens once per process: stale and live sockets, FERRY_CONTROL=off,
 * fork(), removal at exit, and the CLI talking to such a child. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>

#include "shim/migrate/migrate.h"

extern char **environ;

#define GIB (1024ull * 1024 * 1024)
#define WAIT_MS 20000 /* only a hang takes this long; then the test fails instead of hanging */

/* ---- test doubles of the migration engine ---- */

const char *const ferry_phase_names[FERRY_PHASE_COUNT] = {"hold",    "drain", "setup", "replay",
                                                          "memsync", "vars",  "switch"};

static pthread_mutex_t dbl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dbl_cond = PTHREAD_COND_INITIALIZER;
static struct ferry_vgpu_status dbl[4];
static int dbl_count;
static int migrate_calls, last_vgpu, last_gpu;
static char fail_reason[256]; /* non-empty: the next migration fails with it */
static int fail_empty;        /* the next migration fails with no reason */
static int block_migrate;     /* migrations wait for `release` after posting `started` */
static sem_t started, release;
static int polls_to_finish; /* >0: a migration ends after this many status calls (the CLI's polls) */
static int polls;

static void reset_doubles(void) {
  pthread_mutex_lock(&dbl_lock);
  memset(dbl, 0, sizeof dbl);
  dbl_count = 2;
  for (int i = 0; i < 2; i++) {
    dbl[i].index = i;
    snprintf(dbl[i].where, sizeof dbl[i].where, "tcp://gpunode:7420/%d", i);
    dbl[i].records = 10 + (uint64_t)i;
    dbl[i].regions = 2;
    dbl[i].live_bytes = 4096;
    dbl[i].local_gpu = -1;
  }
  migrate_calls = 0;
  last_vgpu = last_gpu = -1;
  fail_reason[0] = '\0';
  fail_empty = block_migrate = polls_to_finish = polls = 0;
  pthread_mutex_unlock(&dbl_lock);
}

int ferry_vgpu_count(void) {
  pthread_mutex_lock(&dbl_lock);
  int n = dbl_count;
  pthread_mutex_unlock(&dbl_lock);
  return n;
}

int ferry_vgpu_status(int index, struct ferry_vgpu_status *out) {
  pthread_mutex_lock(&dbl_lock);
  if (index < 0 || index >= dbl_count) {
    pthread_mutex_unlock(&dbl_lock);
    return -1;
  }
  struct ferry_vgpu_status *s = &dbl[index];
  if (s->state == FERRY_MIG_RUNNING && polls_to_finish) {
    s->bytes_done += GIB; /* each look sees the copy further on */
    polls++;
    pthread_cond_broadcast(&dbl_cond);
  }
  *out = *s;
  pthread_mutex_unlock(&dbl_lock);
  return 0;
}

int ferry_migrate(int vgpu, int local_gpu, char *err, size_t errlen) {
  pthread_mutex_lock(&dbl_lock);
  migrate_calls++;
  last_vgpu = vgpu;
  last_gpu = local_gpu;
  struct ferry_vgpu_status *s = &dbl[vgpu];
  if (s->local) {
    snprintf(err, errlen, "vgpu %d already runs on local GPU %d", vgpu, local_gpu);
    pthread_mutex_unlock(&dbl_lock);
    return -1;
  }
  if (fail_reason[0] || fail_empty) {
    snprintf(err, errlen, "%s", fail_reason);
    s->state = FERRY_MIG_FAILED;
    s->phase = FERRY_PHASE_REPLAY;
    snprintf(s->error, sizeof s->error, "%s", fail_reason);
    pthread_mutex_unlock(&dbl_lock);
    return -1;
  }
  s->state = FERRY_MIG_RUNNING;
  s->phase = FERRY_PHASE_MEMSYNC;
  s->bytes_total = 4 * GIB;
  s->bytes_done = 0;
  if (polls_to_finish) {
    polls = 0;
    while (polls < polls_to_finish) pthread_cond_wait(&dbl_cond, &dbl_lock);
  }
  int block = block_migrate;
  pthread_mutex_unlock(&dbl_lock);
  if (block) {
    sem_post(&started);
    sem_wait(&release);
  }
  pthread_mutex_lock(&dbl_lock);
  s->state = FERRY_MIG_DONE;
  s->phase = FERRY_PHASE_SWITCH;
  s->bytes_done = s->bytes_total;
  s->local = 1;
  s->local_gpu = local_gpu;
  snprintf(s->where, sizeof s->where, "local GPU %d (Sim)", local_gpu);
  for (int i = 0; i < FERRY_PHASE_COUNT; i++) s->phase_ms[i] = i + 0.5;
  s->total_ms = 12.5;
  s->pause_ms = 10.25;
  s->launch_at_start = 5;
  s->records_replayed = 12;
  s->modules_replayed = 1;
  s->replay_module_ms = 2.0;
  s->replay_other_ms = 0.5;
  s->bytes_copied = 4 * GIB;
  s->ranges_copied = 2;
  s->requests = 1;
  pthread_mutex_unlock(&dbl_lock);
  return 0;
}

/* ---- helpers ---- */

static char dir[64]; /* FERRY_CONTROL_DIR of every test */

static char *handle(const char *line) {
  static char reply[65536];
  ferry_control_handle(line, reply, sizeof reply);
  return reply;
}

/* the JSON of a reply or an output, parsed as the CLI parses it; freed by the next call */
static json_t *parsed(const char *text) {
  static __thread json_t *last;
  json_decref(last);
  json_error_t err;
  last = json_loads(text, JSON_REJECT_DUPLICATES, &err);
  if (!last) fail_msg("not JSON (%s at %d): %s", err.text, err.position, text);
  return last;
}

/* obj's member key as a string, or NULL */
static const char *jget_str(const json_t *obj, const char *key) {
  return json_string_value(json_object_get(obj, key));
}

/* the migration object of vGPU i in a status object */
static json_t *jmig(json_t *st, size_t i) {
  return json_object_get(json_array_get(json_object_get(st, "vgpus"), i), "migration");
}

static void sock_path(pid_t pid, char *out, size_t n) {
  snprintf(out, n, "%s/ferry-%d.sock", dir, (int)pid);
}

static int connect_path(const char *path) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  return fd;
}

static int connect_self(void) {
  char path[128];
  sock_path(getpid(), path, sizeof path);
  int fd = connect_path(path);
  assert_true(fd >= 0);
  return fd;
}

static void send_str(int fd, const char *s, size_t n) {
  assert_int_equal(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* one line, without its \n; NULL at end of stream (EOF or reset) */
static char *read_line(int fd, char *buf, size_t n) {
  size_t have = 0;
  while (have + 1 < n) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1); /* 0: the program never answered */
    ssize_t r = read(fd, buf + have, 1);
    if (r <= 0) return NULL;
    if (buf[have] == '\n') {
      buf[have] = '\0';
      return buf;
    }
    have++;
  }
  fail_msg("reply longer than %zu bytes", n);
  return NULL;
}

static char *ask(int fd, const char *line) {
  static __thread char buf[65536];
  send_str(fd, line, strlen(line));
  char *r = read_line(fd, buf, sizeof buf);
  assert_non_null(r);
  return r;
}

static void assert_closed(int fd) {
  char buf[16];
  assert_null(read_line(fd, buf, sizeof buf));
}

/* a socket file with nobody behind it, as a killed program leaves */
static void make_stale(const char *path) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  close(fd);
  assert_int_equal(connect_path(path), -1);
  assert_int_equal(errno, ECONNREFUSED);
}

/* environment for a child: ours with the control variables replaced */
static char **child_env(const char *control) {
  static char dirvar[128], ctlvar[64];
  static char *env[512];
  int n = 0;
  for (char **e = environ; *e && n < 500; e++)
    if (strncmp(*e, "FERRY_CONTROL", 13) && strncmp(*e, "FERRY_DEBUG=", 12)) env[n++] = *e;
  snprintf(dirvar, sizeof dirvar, "FERRY_CONTROL_DIR=%s", dir);
  env[n++] = dirvar;
  if (control) {
    snprintf(ctlvar, sizeof ctlvar, "FERRY_CONTROL=%s", control);
    env[n++] = ctlvar;
  }
  env[n] = NULL;
  return env;
}

struct proc {
  pid_t pid;
  int in, out, err; /* its stdin, stdout and stderr */
};

static uid_t spawn_uid = (uid_t)-1; /* spawn() runs its program as this user, unless -1 */

static struct proc spawn(char *const argv[], char **env) {
  int in[2], out[2], err[2];
  assert_int_equal(pipe2(in, O_CLOEXEC) | pipe2(out, O_CLOEXEC) | pipe2(err, O_CLOEXEC), 0);
  struct proc p = {.pid = fork()};
  assert_true(p.pid >= 0);
  if (p.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans if this test is killed */
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (spawn_uid != (uid_t)-1 && (setgroups(0, NULL) || setgid(spawn_uid) || setuid(spawn_uid)))
      _exit(126);
    execve(argv[0], argv, env);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  p.in = in[1], p.out = out[0], p.err = err[0];
  return p;
}

/* this binary, as a program whose control socket the tests poke */
static struct proc spawn_child(const char *control) {
  static char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(n > 0);
  self[n] = '\0';
  char *argv[] = {self, "child", NULL};
  return spawn(argv, child_env(control));
}

static void child_do(struct proc *c, const char *cmd, const char *answer) {
  char buf[64];
  assert_int_equal(write(c->in, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
  assert_non_null(read_line(c->out, buf, sizeof buf));
  assert_string_equal(buf, answer);
}

/* all of a stream, to its end */
static void slurp(int fd, char *buf, size_t n) {
  size_t have = 0;
  ssize_t r;
  while ((r = read(fd, buf + have, n - 1 - have)) > 0) have += (size_t)r;
  buf[have] = '\0';
}

/* ends the child (EOF on its stdin) and returns its stderr */
static char *child_end(struct proc *c) {
  static char err[8192];
  close(c->in);
  int status;
  assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
  slurp(c->err, err, sizeof err);
  close(c->out);
  close(c->err);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  return err;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* ---- ferry_control_handle ---- */

static void test_help(void **state) {
  (void)state;
  assert_string_equal(handle("help"), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
  assert_string_equal(handle("  help\t"), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
}

static void test_status_json(void **state) {
  (void)state;
  reset_doubles();
  dbl[0].local_gpu = -1;
  dbl[1].local = 1;
  dbl[1].local_gpu = 0;
  snprintf(dbl[1].where, sizeof dbl[1].where, "local GPU 0 (Sim)");
  dbl[1].state = FERRY_MIG_DONE;
  dbl[1].phase = FERRY_PHASE_SWITCH;
  dbl[1].bytes_done = dbl[1].bytes_total = 4096;
  for (int i = 0; i < FERRY_PHASE_COUNT; i++) dbl[1].phase_ms[i] = i * 1.25;
  dbl[1].total_ms = 26.25;
  dbl[1].pause_ms = 20.5;
  dbl[1].launches = 40;
  dbl[1].launch_at_start = 20;
  dbl[1].records_replayed = 11;
  dbl[1].modules_replayed = 1;
  dbl[1].replay_module_ms = 3.0;
  dbl[1].replay_other_ms = 0.75;
  dbl[1].bytes_copied = 8192;
  dbl[1].ranges_copied = 1;
  dbl[1].requests = 3;
  dbl[1].records_ahead = 9;
  dbl[1].ahead_ms = 12.5;
  dbl[1].bytes_precopied = 65536;
  dbl[1].bytes_unchanged = 61440;
  dbl[1].hash_ms = 0.5;
  char expect[4096];
  snprintf(expect, sizeof expect,
           "ok {\"schema\":1,\"pid\":%d,\"vgpus\":["
           "{\"index\":0,\"backend\":\"remote\",\"local_gpu\":-1,\"helper_pid\":0,"
           "\"where\":\"tcp://gpunode:7420/0\",\"records\":10,"
           "\"regions\":2,\"live_bytes\":4096,\"launches\":0,\"prepared\":\"\",\"migration\":{\"state\":\"none\","
           "\"phase\":null,\"bytes_done\":0,\"bytes_total\":0,\"phase_ms\":{\"hold\":0.0,"
           "\"drain\":0.0,\"setup\":0.0,\"replay\":0.0,\"memsync\":0.0,\"vars\":0.0,"
           "\"switch\":0.0},\"total_ms\":0.0,\"pause_ms\":0.0,\"launch_at_start\":0,"
           "\"records_replayed\":0,"
           "\"modules_replayed\":0,\"replay_module_ms\":0.0,\"replay_other_ms\":0.0,"
           "\"bytes_copied\":0,\"ranges_copied\":0,\"requests\":0,\"records_ahead\":0,"
           "\"ahead_ms\":0.0,\"bytes_precopied\":0,\"bytes_unchanged\":0,\"hash_ms\":0.0,"
           "\"error\":\"\"}},"
           "{\"index\":1,\"backend\":\"local\",\"local_gpu\":0,\"helper_pid\":0,"
           "\"where\":\"local GPU 0 (Sim)\",\"records\":11,"
           "\"regions\":2,\"live_bytes\":4096,\"launches\":40,\"prepared\":\"\",\"migration\":{\"state\":\"done\","
           "\"phase\":\"switch\",\"bytes_done\":4096,\"bytes_total\":4096,\"phase_ms\":{"
           "\"hold\":0.0,\"drain\":1.25,\"setup\":2.5,\"replay\":3.75,\"memsync\":5.0,"
           "\"vars\":6.25,\"switch\":7.5},\"total_ms\":26.25,\"pause_ms\":20.5,"
           "\"launch_at_start\":20,"
           "\"records_replayed\":11,\"modules_replayed\":1,\"replay_module_ms\":3.0,"
           "\"replay_other_ms\":0.75,\"bytes_copied\":8192,\"ranges_copied\":1,\"requests\":3,"
           "\"records_ahead\":9,\"ahead_ms\":12.5,\"bytes_precopied\":65536,"
           "\"bytes_unchanged\":61440,\"hash_ms\":0.5,\"error\":\"\"}}]}",
           (int)getpid());
  assert_string_equal(handle("status"), expect);
}

static void test_status_no_vgpu(void **state) {
  (void)state;
  reset_doubles();
  dbl_count = 0;
  char expect[64];
  snprintf(expect, sizeof expect, "ok {\"schema\":1,\"pid\":%d,\"vgpus\":[]}", (int)getpid());
  assert_string_equal(handle("status"), expect);
  assert_string_equal(handle("migrate 0 0"), "error no vgpu 0: this program has no vGPU yet");
  assert_int_equal(migrate_calls, 0);
}

/* strings that need escaping come back intact through a JSON reader */
static void test_status_escaping(void **state) {
  (void)state;
  reset_doubles();
  const char *where = "a\"b\\c\nd\te\x01 caf\xc3\xa9 \x7f";
  snprintf(dbl[0].where, sizeof dbl[0].where, "%s%s", where, "\xff!");
  dbl[0].state = FERRY_MIG_FAILED;
  dbl[0].phase = FERRY_PHASE_REPLAY;
  snprintf(dbl[0].error, sizeof dbl[0].error, "cannot \"reserve\"\r\n0x200000000000");
  const char *r = handle("status");
  assert_memory_equal(r, "ok {", 4);
  for (const char *p = r; *p; p++) assert_true((unsigned char)*p >= 0x20); /* one line */
  json_t *st = parsed(r + 3);
  json_t *v = json_array_get(json_object_get(st, "vgpus"), 0);
  assert_non_null(v);
  char expect[512];
  snprintf(expect, sizeof expect, "%s\xef\xbf\xbd!", where); /* a stray byte reads as U+FFFD */
  assert_string_equal(jget_str(v, "where"), expect);
  json_t *mig = json_object_get(v, "migration");
  assert_string_equal(jget_str(mig, "error"), "cannot \"reserve\"\r\n0x200000000000");
  assert_string_equal(jget_str(mig, "phase"), "replay");
  assert_string_equal(jget_str(mig, "state"), "failed");
  /* overlong forms, surrogates and bytes past U+10FFFF are not UTF-8 either */
  snprintf(dbl[0].where, sizeof dbl[0].where, "\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xf0\x9f\x98\x80");
  st = parsed(handle("status") + 3);
  assert_string_equal(jget_str(json_array_get(json_object_get(st, "vgpus"), 0), "where"),
                      "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd"
                      "\xef\xbf\xbd\xef\xbf\xbd \xf0\x9f\x98\x80");
}

static void test_status_numbers(void **state) {
  (void)state;
  reset_doubles();
  dbl[0].state = FERRY_MIG_RUNNING;
  dbl[0].phase = FERRY_PHASE_MEMSYNC;
  dbl[0].bytes_done = 1ull << 40;
  dbl[0].bytes_total = UINT64_MAX;
  dbl[0].phase_ms[0] = NAN; /* not JSON */
  dbl[0].total_ms = INFINITY;
  const char *r = handle("status");
  /* counts stop at 2^53, where JSON readers stop being exact */
  assert_non_null(strstr(r, "\"phase\":\"memsync\",\"bytes_done\":1099511627776,"
                            "\"bytes_total\":9007199254740992,\"phase_ms\":{\"hold\":0.0,"));
  assert_non_null(strstr(r, "\"total_ms\":0.0,"));
  assert_null(strstr(r, "nan"));
  assert_null(strstr(r, "inf"));
  dbl[0].phase = 99; /* out of range: no name to give */
  assert_non_null(strstr(handle("status"), "\"phase\":null"));
}

static void test_status_too_small(void **state) {
  (void)state;
  reset_doubles();
  char buf[96];
  memset(buf, 'X', sizeof buf);
  ferry_control_handle("status", buf, 64);
  assert_string_equal(buf, "error status does not fit in 64 bytes");
  assert_int_equal(buf[64], 'X');
  memset(buf, 'X', sizeof buf);
  ferry_control_handle("help", buf, 8); /* cut, never overrun */
  assert_string_equal(buf, "ok verb");
  assert_int_equal(buf[8], 'X');
}

/* a server URL as the target: the engine's answer names where it went */
static char last_target[320];
int ferry_migrate_to(int vgpu, const char *target, char *err, size_t errlen) {
  pthread_mutex_lock(&dbl_lock);
  migrate_calls++;
  last_vgpu = vgpu;
  snprintf(last_target, sizeof last_target, "%s", target);
  int bad = strncmp(target, "tcp://", 6) != 0;
  if (bad) snprintf(err, errlen, "'%s' is neither a local GPU nor a server URL", target);
  else {
    snprintf(dbl[vgpu].where, sizeof dbl[vgpu].where, "%s", target);
    dbl[vgpu].state = FERRY_MIG_DONE;
    dbl[vgpu].total_ms = 3.25;
  }
  pthread_mutex_unlock(&dbl_lock);
  return bad ? -1 : 0;
}

/* prepare/cancel: a double that remembers one prepared target per vGPU */
static char prepared_at[2][320];
int ferry_prepare(int vgpu, const char *target, char *err, size_t errlen) {
  if (prepared_at[vgpu][0]) {
    snprintf(err, errlen, "device %d already has a prepared target (cancel it first)", vgpu);
    return -1;
  }
  snprintf(prepared_at[vgpu], sizeof prepared_at[vgpu], "%s", target);
  return 0;
}
static int preparing[2]; /* a prepare still opening its target: cancel stops it */
int ferry_prepare_cancel(int vgpu, char *err, size_t errlen) {
  if (preparing[vgpu]) {
    preparing[vgpu] = 0;
    return 1;
  }
  if (!prepared_at[vgpu][0]) {
    snprintf(err, errlen, "device %d has no prepared target", vgpu);
    return -1;
  }
  prepared_at[vgpu][0] = '\0';
  return 0;
}
double ferry_prepared_ms(int vgpu) { return prepared_at[vgpu][0] ? 131.25 : -1; }

static void test_prepare_cancel(void **state) {
  (void)state;
  reset_doubles();
  memset(prepared_at, 0, sizeof prepared_at);
  assert_string_equal(handle("prepare 1 0"), "ok vgpu 1 prepared on 0 (131.2 ms)");
  assert_string_equal(prepared_at[1], "0");
  assert_string_equal(handle("prepare 1 tcp://b:7420/0"),
                      "error device 1 already has a prepared target (cancel it first)");
  assert_string_equal(handle("cancel 1"), "ok vgpu 1: its prepared target is closed");
  assert_string_equal(handle("cancel 1"), "error device 1 has no prepared target");
  preparing[1] = 1;
  assert_string_equal(handle("cancel 1"), "ok vgpu 1: its prepare is stopped");
  assert_string_equal(handle("prepare 0 tcp://b:7420/0"), "ok vgpu 0 prepared on tcp://b:7420/0 (131.2 ms)");
  assert_string_equal(handle("prepare 5 0"), "error no vgpu 5: this program has 2 (0..1)");
  assert_string_equal(handle("prepare 0"),
                      "error prepare takes 2 arguments, <vgpu> <local-gpu or server URL> (got 1)");
  assert_string_equal(handle("cancel"), "error cancel takes 1 argument, <vgpu> (got 0)");
  assert_string_equal(handle("cancel x"), "error vgpu 'x' is not a number");
  assert_int_equal(migrate_calls, 0); /* neither verb migrates */
}

static void test_migrate_to_server(void **state) {
  (void)state;
  reset_doubles();
  assert_string_equal(handle("migrate 1 tcp://gpunode2:7420/3"),
                      "ok vgpu 1 now on tcp://gpunode2:7420/3 (3.2 ms)");
  assert_int_equal(migrate_calls, 1);
  assert_int_equal(last_vgpu, 1);
  assert_string_equal(last_target, "tcp://gpunode2:7420/3");
  assert_string_equal(handle("migrate 0 ib2://x/0"),
                      "error 'ib2://x/0' is neither a local GPU nor a server URL");
  /* a long URL is quoted cut in its host (32 bytes of it), its end kept */
  char line[256], host[61];
  memset(host, 'b', 60);
  host[60] = '\0';
  snprintf(line, sizeof line, "migrate 1 tcp://%s:7420/3", host);
  assert_string_equal(handle(line), "ok vgpu 1 now on tcp://bbbbbbbbbbbbbbbbbbb...:7420/3 (3.2 ms)");
  memset(prepared_at, 0, sizeof prepared_at);
  snprintf(line, sizeof line, "prepare 1 tcp://%s:7420/3", host);
  assert_string_equal(handle(line), "ok vgpu 1 prepared on tcp://bbbbbbbbbbbbbbbbbbb...:7420/3 (131.2 ms)");
  memset(prepared_at, 0, sizeof prepared_at);
  /* not a URL and not a number: the parser's refusal, the engine never asked */
  assert_string_equal(handle("migrate 0 gpunode2"), "error local GPU 'gpunode2' is not a number");
  assert_int_equal(migrate_calls, 3);
}

static void test_migrate_ok(void **state) {
  (void)state;
  reset_doubles();
  assert_string_equal(handle("migrate 1 0"), "ok vgpu 1 now on local GPU 0 (12.5 ms)");
  assert_int_equal(migrate_calls, 1);
  assert_int_equal(last_vgpu, 1);
  assert_int_equal(last_gpu, 0);
  assert_string_equal(handle("migrate\t0   7 "), "ok vgpu 0 now on local GPU 7 (12.5 ms)");
  assert_int_equal(last_vgpu, 0);
  assert_int_equal(last_gpu, 7);
  /* the engine refuses a second move; the reply carries its reason */
  assert_string_equal(handle("migrate 0 7"), "error vgpu 0 already runs on local GPU 7");
}

static void test_migrate_error(void **state) {
  (void)state;
  reset_doubles();
  snprintf(fail_reason, sizeof fail_reason, "local GPU 1 is full\n(needs 4 GiB)");
  assert_string_equal(handle("migrate 0 1"), "error local GPU 1 is full (needs 4 GiB)");
  reset_doubles();
  fail_empty = 1;
  assert_string_equal(handle("migrate 0 1"), "error migration failed");
  assert_int_equal(migrate_calls, 1);
}

static void test_bad_input(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"", "error empty request (try help)"},
      {" \t ", "error empty request (try help)"},
      {"foo", "error unknown command 'foo' (try help)"},
      {"MIGRATE 0 1", "error unknown command 'MIGRATE' (try help)"},
      {"migrate", "error migrate takes 2 arguments, <vgpu> <local-gpu or server URL> (got 0)"},
      {"migrate 0", "error migrate takes 2 arguments, <vgpu> <local-gpu or server URL> (got 1)"},
      {"migrate 0 1 2", "error migrate takes 2 arguments, <vgpu> <local-gpu or server URL> (got 3)"},
      {"migrate 0 1 2 3 4 5 6", "error migrate takes 2 arguments, <vgpu> <local-gpu or server URL> (got 7)"},
      {"migrate x 1", "error vgpu 'x' is not a number"},
      {"migrate 0 y", "error local GPU 'y' is not a number"},
      {"migrate 1.5 0", "error vgpu '1.5' is not a number"},
      {"migrate 0x1 0", "error vgpu '0x1' is not a number"},
      {"migrate +1 0", "error vgpu '+1' is not a number"},
      {"migrate - 0", "error vgpu '-' is not a number"},
      {"migrate -x 0", "error vgpu '-x' is not a number"},
      {"migrate -1 0", "error vgpu '-1' must not be negative"},
      {"migrate 0 -1", "error local GPU '-1' must not be negative"},
      {"migrate 2 0", "error no vgpu 2: this program has 2 (0..1)"},
      {"migrate 2147483647 0", "error no vgpu 2147483647: this program has 2 (0..1)"},
      {"migrate 2147483648 0", "error vgpu '2147483648' is too large"},
      {"migrate 0 99999999999999999999999", "error local GPU '99999999999999999999999' is too large"},
      {"status 0", "error status takes no arguments (got '0')"},
      {"help me", "error help takes no arguments (got 'me')"},
  };
  reset_doubles();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *r = handle(cases[i][0]);
    if (strcmp(r, cases[i][1])) fail_msg("'%s' -> '%s', expected '%s'", cases[i][0], r, cases[i][1]);
  }
  assert_int_equal(migrate_calls, 0); /* none of them reached the engine */
}

/* what a bad request quotes back is short and printable */
static void test_bad_input_echo(void **state) {
  (void)state;
  char line[200], expect[200];
  memset(line, 'v', 100);
  line[0] = '\x1b';
  line[100] = '\0';
  /* the first 32 bytes, the escape shown as ? */
  snprintf(expect, sizeof expect, "error unknown command '?%.31s...' (try help)", line + 1);
  assert_string_equal(handle(line), expect);
  assert_string_equal(handle("\xc3\xa9t\x7f"), "error unknown command '??t?' (try help)");
}

static void test_line_length(void **state) {
  (void)state;
  char line[300];
  memset(line, ' ', sizeof line);
  memcpy(line, "help", 4);
  line[256] = '\0'; /* the longest line there may be */
  assert_string_equal(handle(line), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
  line[256] = ' ';
  line[257] = '\0';
  assert_string_equal(handle(line), "error line too long (max 256 bytes)");
}

/* ---- the socket, in this process ---- */

static int socket_setup(void **state) {
  (void)state;
  reset_doubles();
  /* with no umask at all, the file's mode can only come from control.c */
  mode_t old = umask(0);
  ferry_control_start(); /* once: later calls do nothing */
  ferry_control_start();
  umask(old);
  return 0;
}

static void test_socket_file(void **state) {
  (void)state;
  char path[128];
  sock_path(getpid(), path, sizeof path);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(st.st_uid, geteuid());
}

static void test_socket_requests(void **state) {
  (void)state;
  int fd = connect_self();
  char a[256], b[65536], c[256], d[256];
  /* several requests in one write, \r\n or \n, one reply each, in order */
  const char *req = "help\nstatus\r\nmigrate 9 0\n\r\n";
  send_str(fd, req, strlen(req));
  assert_string_equal(read_line(fd, a, sizeof a), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
  assert_non_null(read_line(fd, b, sizeof b));
  assert_string_equal(b, handle("status"));
  assert_string_equal(read_line(fd, c, sizeof c), "error no vgpu 9: this program has 2 (0..1)");
  assert_string_equal(read_line(fd, d, sizeof d), "error empty request (try help)");
  /* a request split over several writes */
  send_str(fd, "he", 2);
  send_str(fd, "lp\n", 3);
  assert_string_equal(read_line(fd, a, sizeof a), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
  assert_string_equal(ask(fd, "migrate 1 3\n"), "ok vgpu 1 now on local GPU 3 (12.5 ms)");
  send_str(fd, "he\0lp\n", 6);
  assert_string_equal(read_line(fd, a, sizeof a), "error request holds a NUL byte");
  close(fd);
}

static void test_socket_too_long(void **state) {
  (void)state;
  char line[1100];
  memset(line, ' ', sizeof line);
  memcpy(line, "help", 4);
  /* the longest line, with \r\n, is answered */
  int fd = connect_self();
  memcpy(line + 256, "\r\n", 2);
  send_str(fd, line, 258);
  char r[256];
  assert_string_equal(read_line(fd, r, sizeof r), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
  /* one byte more is refused and the connection closed */
  line[256] = ' ';
  line[257] = '\n';
  send_str(fd, line, 258);
  assert_string_equal(read_line(fd, r, sizeof r), "error line too long (max 256 bytes)");
  assert_closed(fd);
  close(fd);
  /* so is an endless line with no newline at all */
  fd = connect_self();
  memset(line, 'x', sizeof line);
  send_str(fd, line, sizeof line);
  assert_string_equal(read_line(fd, r, sizeof r), "error line too long (max 256 bytes)");
  assert_closed(fd);
  close(fd);
  fd = connect_self();
  assert_string_equal(ask(fd, "help\n"), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
  close(fd);
}

static void test_socket_disconnect_mid_line(void **state) {
  (void)state;
  reset_doubles();
  int fd = connect_self();
  send_str(fd, "help\nmigrate 0 1", 16);
  shutdown(fd, SHUT_WR); /* gone before the newline */
  char r[256];
  assert_string_equal(read_line(fd, r, sizeof r), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
  assert_closed(fd);
  close(fd);
  fd = connect_self();
  send_str(fd, "migrate 0", 9);
  close(fd); /* and one that vanishes outright */
  fd = connect_self();
  assert_memory_equal(ask(fd, "status\n"), "ok {", 4);
  close(fd);
  assert_int_equal(migrate_calls, 0); /* the partial line never ran */
}

/* status is answered while a migration blocks its own connection */
static void test_socket_status_during_migrate(void **state) {
  (void)state;
  reset_doubles();
  block_migrate = 1;
  int m = connect_self();
  send_str(m, "migrate 0 1\n", 12);
  sem_wait(&started);
  int s = connect_self();
  json_t *mig = jmig(parsed(ask(s, "status\n") + 3), 0);
  assert_string_equal(jget_str(mig, "state"), "running");
  assert_string_equal(jget_str(mig, "phase"), "memsync");
  assert_string_equal(ask(s, "help\n"), "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> <local-gpu or server URL> | cancel <vgpu> | status | help");
  sem_post(&release);
  char r[256];
  assert_string_equal(read_line(m, r, sizeof r), "ok vgpu 0 now on local GPU 1 (12.5 ms)");
  assert_non_null(strstr(ask(s, "status\n"), "\"backend\":\"local\",\"local_gpu\":1,\"helper_pid\":0,\"where\":\"local GPU 1 (Sim)\""));
  close(m);
  close(s);
}

/* all 16 connections answered: this test holds every slot. 0 while the
   threads of earlier tests' connections have not yet seen their hang-ups */
static int fill(int fds[16]) {
  char r[256];
  int ok = 1;
  for (int i = 0; i < 16; i++) {
    fds[i] = connect_self();
    send_str(fds[i], "help\n", 5);
    ok &= read_line(fds[i], r, sizeof r) && !strncmp(r, "ok ", 3);
  }
  for (int i = 0; i < 16 && !ok; i++) close(fds[i]);
  return ok;
}

/* more connections than the cap: told "busy", the others keep working */
static void test_socket_busy(void **state) {
  (void)state;
  int fds[16], full = 0;
  for (int tries = 0; tries < 1000 && !(full = fill(fds)); tries++)
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  assert_true(full);
  int extra = connect_self();
  char r[256];
  assert_string_equal(read_line(extra, r, sizeof r), "error busy (too many control connections)");
  assert_closed(extra);
  close(extra);
  assert_memory_equal(ask(fds[7], "help\n"), "ok ", 3);
  for (int i = 0; i < 16; i++) close(fds[i]);
  /* the slots come back once their threads see the hang-ups */
  int ok = 0;
  for (int tries = 0; tries < 1000 && !ok; tries++) {
    int fd = connect_self();
    send_str(fd, "help\n", 5);
    ok = read_line(fd, r, sizeof r) && !strncmp(r, "ok ", 3);
    close(fd);
    if (!ok) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  assert_true(ok);
}

/* ---- once per process: children ---- */

static void test_stale_socket_replaced(void **state) {
  (void)state;
  struct proc c = spawn_child(NULL);
  char path[128];
  sock_path(c.pid, path, sizeof path);
  make_stale(path);
  child_do(&c, "go\n", "started");
  int fd = connect_path(path);
  assert_true(fd >= 0);
  assert_memory_equal(ask(fd, "help\n"), "ok ", 3);
  close(fd);
  assert_string_equal(child_end(&c), "");
  struct stat st;
  assert_int_equal(lstat(path, &st), -1); /* removed at exit */
}

static void test_live_socket_kept(void **state) {
  (void)state;
  struct proc c = spawn_child(NULL);
  char path[128];
  sock_path(c.pid, path, sizeof path);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  int live = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  assert_int_equal(bind(live, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(live, 4), 0);
  struct stat before, after;
  assert_int_equal(lstat(path, &before), 0);
  child_do(&c, "go\n", "started");
  assert_int_equal(lstat(path, &after), 0);
  assert_true(before.st_ino == after.st_ino);
  int fd = connect_path(path); /* still ours */
  assert_true(fd >= 0);
  int got = -1;
  for (int i = 0; i < 2 && got < 0; i++) got = accept(live, NULL, NULL); /* the child's probe, then ours */
  assert_true(got >= 0);
  close(got);
  close(fd);
  const char *err = child_end(&c);
  assert_non_null(strstr(err, "a live program answers there; not started"));
  assert_int_equal(count_lines(err), 1);
  assert_int_equal(lstat(path, &after), 0); /* the child did not remove what it did not make */
  assert_true(before.st_ino == after.st_ino);
  close(live);
  unlink(path);
}

static void test_not_a_socket_kept(void **state) {
  (void)state;
  struct proc c = spawn_child(NULL);
  char path[128];
  sock_path(c.pid, path, sizeof path);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("keep me", f);
  fclose(f);
  child_do(&c, "go\n", "started");
  const char *err = child_end(&c);
  assert_non_null(strstr(err, "a file that is not a socket is in the way"));
  assert_int_equal(count_lines(err), 1);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_size, 7);
  unlink(path);
}

static void test_control_off(void **state) {
  (void)state;
  struct proc c = spawn_child("off");
  char path[128];
  sock_path(c.pid, path, sizeof path);
  child_do(&c, "go\n", "started");
  struct stat st;
  assert_int_equal(lstat(path, &st), -1);
  assert_string_equal(child_end(&c), "");
}

static void test_bad_dir(void **state) {
  (void)state;
  char saved[sizeof dir];
  memcpy(saved, dir, sizeof dir);
  snprintf(dir, sizeof dir, "%s/missing", saved);
  struct proc c = spawn_child(NULL);
  memcpy(dir, saved, sizeof dir);
  child_do(&c, "go\n", "started"); /* the program goes on */
  child_do(&c, "go\n", "started");
  const char *err = child_end(&c);
  assert_non_null(strstr(err, "missing/ferry-"));
  assert_int_equal(count_lines(err), 1); /* said once */
}

/* a fork() child exiting leaves its parent's socket alone */
static void test_fork_keeps_socket(void **state) {
  (void)state;
  struct proc c = spawn_child(NULL);
  char path[128];
  sock_path(c.pid, path, sizeof path);
  child_do(&c, "go\n", "started");
  child_do(&c, "fork\n", "forked");
  int fd = connect_path(path);
  assert_true(fd >= 0);
  assert_memory_equal(ask(fd, "help\n"), "ok ", 3);
  close(fd);
  assert_string_equal(child_end(&c), "");
  struct stat st;
  assert_int_equal(lstat(path, &st), -1);
}

/* ---- the CLI against a child ---- */

struct cli_result {
  int rc;
  char out[65536], err[8192];
};

static uid_t cli_uid = (uid_t)-1; /* cli() runs the CLI as this user, unless -1 */
static char cli_path[256] = FERRY_CLI;

static struct cli_result *cli(const char *a1, const char *a2, const char *a3, const char *a4,
                              const char *a5, const char *a6) {
  static struct cli_result res;
  char *argv[] = {cli_path,   (char *)a1, (char *)a2, (char *)a3,
                  (char *)a4, (char *)a5, (char *)a6, NULL};
  spawn_uid = cli_uid;
  struct proc p = spawn(argv, child_env(NULL));
  spawn_uid = (uid_t)-1;
  close(p.in);
  /* stderr is small; read stdout first, then stderr */
  slurp(p.out, res.out, sizeof res.out);
  slurp(p.err, res.err, sizeof res.err);
  int status;
  assert_int_equal(waitpid(p.pid, &status, 0), p.pid);
  close(p.out);
  close(p.err);
  assert_true(WIFEXITED(status));
  res.rc = WEXITSTATUS(status);
  return &res;
}

static long mono_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}

/* the CLI, started and not waited for (cli_finish collects it) */
static struct proc cli_start(const char *a1, const char *a2, const char *a3, const char *a4,
                             const char *a5) {
  char *argv[] = {cli_path, (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5, NULL};
  struct proc p = spawn(argv, child_env(NULL));
  close(p.in);
  return p;
}

/* the result of a CLI that cli_start started, which must end by `deadline`
   (mono_ms); one that has not is killed and the test fails */
static void cli_finish(struct proc *p, struct cli_result *res, long deadline, const char *what) {
  int fds[2] = {p->out, p->err};
  char *buf[2] = {res->out, res->err};
  size_t cap[2] = {sizeof res->out, sizeof res->err}, have[2] = {0, 0};
  while (fds[0] >= 0 || fds[1] >= 0) {
    struct pollfd pf[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = fds[1], .events = POLLIN}};
    long left = deadline - mono_ms();
    int r = left > 0 ? poll(pf, 2, (int)left) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, NULL, 0);
      fail_msg("%s: still running at its deadline", what);
    }
    for (int i = 0; i < 2; i++) {
      if (fds[i] < 0 || !pf[i].revents) continue;
      ssize_t got = read(fds[i], buf[i] + have[i], cap[i] - 1 - have[i]);
      if (got > 0) {
        have[i] += (size_t)got;
      } else {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  res->out[have[0]] = '\0';
  res->err[have[1]] = '\0';
  int status;
  assert_int_equal(waitpid(p->pid, &status, 0), p->pid);
  assert_true(WIFEXITED(status));
  res->rc = WEXITSTATUS(status);
}

static void test_cli_ls(void **state) {
  (void)state;
  struct proc c = spawn_child(NULL);
  child_do(&c, "go\n", "started");
  char path[128], stale[128], row[512];
  sock_path(c.pid, path, sizeof path);
  sock_path(999999, stale, sizeof stale);
  unlink(stale);
  make_stale(stale);
  struct cli_result *r = cli("ls", NULL, NULL, NULL, NULL, NULL);
  assert_int_equal(r->rc, 0);
  assert_memory_equal(r->out, "PID ", 4);
  snprintf(row, sizeof row, "%-8d %-5s %-8s %-40s %s\n", (int)c.pid, "1", "remote", "tcp://gpunode:7420/1", path);
  if (!strstr(r->out, row)) fail_msg("no row '%s' in:\n%s", row, r->out);
  assert_null(strstr(r->out, "999999")); /* the dead one is skipped */
  r = cli("ls", "--json", NULL, NULL, NULL, NULL);
  assert_int_equal(r->rc, 0);
  json_t *all = parsed(r->out), *mine = NULL, *e;
  size_t i;
  assert_true(json_is_array(all));
  json_array_foreach(all, i, e)
    if (json_integer_value(json_object_get(e, "pid")) == c.pid) mine = e;
  assert_non_null(mine);
  assert_string_equal(json_object_iter_key(json_object_iter(mine)), "socket"); /* first */
  assert_string_equal(jget_str(mine, "socket"), path);
  assert_int_equal(json_integer_value(json_object_get(mine, "schema")), 1);
  assert_non_null(json_array_get(json_object_get(mine, "vgpus"), 1));
  r = cli("ls", "-l", NULL, NULL, NULL, NULL);
  assert_int_equal(r->rc, 2);
  child_end(&c);
  unlink(stale);
}

static void test_cli_status(void **state) {
  (void)state;
  struct proc c = spawn_child(NULL);
  child_do(&c, "go\n", "started");
  char pid[32], path[128], expect[4096];
  snprintf(pid, sizeof pid, "%d", (int)c.pid);
  sock_path(c.pid, path, sizeof path);
  struct cli_result *r = cli("status", "--pid", pid, NULL, NULL, NULL);
  assert_int_equal(r->rc, 0);
  snprintf(expect, sizeof expect,
           "pid %s  socket %s\n"
           "vGPU 0  remote  tcp://gpunode:7420/0\n"
           "  records 10, live regions 2 (4.0 KiB), launches 0\n"
           "  migration: none\n"
           "vGPU 1  remote  tcp://gpunode:7420/1\n",
           pid, path);
  if (strncmp(r->out, expect, strlen(expect))) fail_msg("got:\n%s\nexpected:\n%s", r->out, expect);
  r = cli("status", "--json", "--socket", path, NULL, NULL);
  assert_int_equal(r->rc, 0);
  int fd = connect_path(path);
  snprintf(expect, sizeof expect, "%s\n", ask(fd, "status\n") + 3);
  close(fd);
  assert_string_equal(r->out, expect); /* as the program sent it */
  child_end(&c);
}

static void test_cli_migrate(void **state) {
  (void)state;
  struct proc c = spawn_child(NULL);
  child_do(&c, "go\n", "started");
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)c.pid);
  struct cli_result *r = cli("migrate", "--pid", pid, "0", "1", NULL);
  if (r->rc) fail_msg("rc %d, stderr: %s", r->rc, r->err);
  assert_string_equal(r->out, "vgpu 0 now on local GPU 1 (12.5 ms)\n");
  /* the child's engine finishes only after the CLI looked three times */
  assert_non_null(strstr(r->err, "ferry: vgpu 0 memsync 1.0/4.0 GiB (25%)\n"));
  assert_non_null(strstr(r->err, "ferry: vgpu 0 memsync 3.0/4.0 GiB (75%)\n"));
  r = cli("status", "--pid", pid, NULL, NULL, NULL);
  assert_non_null(strstr(r->out, "vGPU 0  local  local GPU 1 (Sim)\n"));
  assert_non_null(strstr(r->out, "  migration: done in 12.5 ms, the program held 10.2 ms (hold 0.5, "
                                 "drain 1.5, setup 2.5, "
                                 "replay 3.5, memsync 4.5, vars 5.5, switch 6.5 ms)\n"
                                 "             at launch 5; replayed 12 records, 1 modules (2.0 ms, "
                                 "rest 0.5 ms); copied 4.0 GiB in 2 ranges, 1 requests\n"));
  r = cli("migrate", "--pid", pid, "0", "1", NULL);
  assert_int_equal(r->rc, 1);
  assert_string_equal(r->err, "ferry migrate: vgpu 0 already runs on local GPU 1\n");
  r = cli("migrate", "--pid", pid, "5", "0", NULL);
  assert_int_equal(r->rc, 1);
  assert_string_equal(r->err, "ferry migrate: no vgpu 5: this program has 2 (0..1)\n");
  child_end(&c);
}

static void test_cli_errors(void **state) {
  (void)state;
  char gone[32], path[128];
  /* a process that has ended: its pid is free for a while */
  struct proc c = spawn_child(NULL);
  child_end(&c);
  snprintf(gone, sizeof gone, "%d", (int)c.pid);
  struct cli_result *r = cli("status", "--pid", gone, NULL, NULL, NULL);
  assert_int_equal(r->rc, 1);
  assert_non_null(strstr(r->err, "no ferry program with pid"));
  sock_path(c.pid, path, sizeof path);
  make_stale(path);
  r = cli("migrate", "--pid", gone, "0", "1", NULL);
  assert_int_equal(r->rc, 1);
  assert_non_null(strstr(r->err, "is gone"));
  unlink(path);
  static const char *const usage[][6] = {
      {"migrate", "--pid", "1", "0", NULL},
      {"migrate", "--pid", "1", "a", "1"},
      {"migrate", "--pid", "1", "-1", "1"},
      {"migrate", "--pid", "1", "0", "1", "2"},
      {"migrate", "0", "1", NULL},
      {"migrate", "--pid", "x", "0", "1"},
      {"migrate", "--pid", NULL},
      {"status", NULL},
      {"status", "--pid", "1", "--socket", "/x"},
      {"status", "--pid", "1", "--bogus"},
      {"frobnicate", NULL},
  };
  for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
    r = cli(usage[i][0], usage[i][1], usage[i][2], usage[i][3], usage[i][4], usage[i][5]);
    if (r->rc != 2 || !r->err[0]) fail_msg("case %zu: rc %d, stderr '%s'", i, r->rc, r->err);
  }
}

/* ---- the schema (docs/ferry-status.schema.json) against real output ---- */

/* A tiny JSON Schema checker: the keywords the schema file uses ($ref to
   #/$defs/, type, enum, const, minimum, maximum, required, properties,
   items). Anything else in the file is a test failure, so that no check
   is silently skipped. */
static json_t *schema_root;

static json_t *resolve(json_t *node) {
  const char *ref = jget_str(node, "$ref");
  if (!ref) return node;
  if (strncmp(ref, "#/$defs/", 8)) fail_msg("unsupported $ref %s", ref);
  json_t *def = json_object_get(json_object_get(schema_root, "$defs"), ref + 8);
  if (!def) fail_msg("no $defs entry for %s", ref);
  return resolve(def);
}

static int type_is(const json_t *v, const char *t) {
  if (!strcmp(t, "object")) return json_is_object(v);
  if (!strcmp(t, "array")) return json_is_array(v);
  if (!strcmp(t, "string")) return json_is_string(v);
  if (!strcmp(t, "integer")) return json_is_integer(v);
  if (!strcmp(t, "number")) return json_is_number(v);
  if (!strcmp(t, "boolean")) return json_is_boolean(v);
  if (!strcmp(t, "null")) return json_is_null(v);
  fail_msg("unknown type %s", t);
  return 0;
}

static int type_ok(const json_t *v, const json_t *type) {
  if (json_is_string(type)) return type_is(v, json_string_value(type));
  const json_t *t;
  size_t i;
  json_array_foreach(type, i, t) if (type_is(v, json_string_value(t))) return 1;
  return 0;
}

static int in_enum(const json_t *v, const json_t *e) {
  const json_t *x;
  size_t i;
  json_array_foreach(e, i, x) if (json_equal(v, x)) return 1;
  return 0;
}

/* a < b; integers as integers (2^53 + 1 is not a double) */
static int below(const json_t *a, const json_t *b) {
  if (json_is_integer(a) && json_is_integer(b)) return json_integer_value(a) < json_integer_value(b);
  return json_number_value(a) < json_number_value(b);
}

/* 0 when v matches the schema node; -1 with why (and where) */
static int check(json_t *node, const json_t *v, const char *at, char *why, size_t n) {
  static const char *const known[] = {"$ref", "$schema", "title", "description", "$defs", "type",
                                      "enum", "const", "minimum", "maximum", "required",
                                      "properties", "items"};
  const char *k;
  json_t *x;
  node = resolve(node);
  json_object_foreach(node, k, x) {
    size_t i = 0;
    while (i < sizeof known / sizeof known[0] && strcmp(known[i], k)) i++;
    if (i == sizeof known / sizeof known[0]) fail_msg("the checker does not know '%s'", k);
  }
  json_t *t = json_object_get(node, "type"), *min = json_object_get(node, "minimum"),
         *max = json_object_get(node, "maximum"), *e = json_object_get(node, "enum"),
         *c = json_object_get(node, "const");
  if (t && !type_ok(v, t)) return snprintf(why, n, "%s: wrong type", at), -1;
  if (e && !in_enum(v, e)) return snprintf(why, n, "%s: not in enum", at), -1;
  if (c && !json_equal(v, c)) return snprintf(why, n, "%s: not the const", at), -1;
  if (min && json_is_number(v) && below(v, min)) return snprintf(why, n, "%s: below minimum", at), -1;
  if (max && json_is_number(v) && below(max, v)) return snprintf(why, n, "%s: above maximum", at), -1;
  json_t *req = json_object_get(node, "required"), *props = json_object_get(node, "properties");
  size_t i;
  json_array_foreach(req, i, x) {
    if (!json_object_get(v, json_string_value(x)))
      return snprintf(why, n, "%s: lacks %s", at, json_string_value(x)), -1;
  }
  char sub[256];
  json_object_foreach(props, k, x) {
    json_t *m = json_object_get(v, k);
    snprintf(sub, sizeof sub, "%s.%s", at, k);
    if (m && check(x, m, sub, why, n)) return -1;
  }
  json_t *items = json_object_get(node, "items"), *el;
  json_array_foreach(items ? v : NULL, i, el) {
    snprintf(sub, sizeof sub, "%s[%zu]", at, i);
    if (check(items, el, sub, why, n)) return -1;
  }
  return 0;
}

static void load_schema(void) {
  json_error_t err;
  json_decref(schema_root);
  schema_root = json_load_file(FERRY_SCHEMA, JSON_REJECT_DUPLICATES, &err);
  if (!schema_root) fail_msg("%s: %s at line %d", FERRY_SCHEMA, err.text, err.line);
}

/* checks doc against the $defs entry def ("" : the root); 0 or -1 */
static int validate(const json_t *doc, const char *def, char *why, size_t n) {
  json_t *node = schema_root;
  if (*def) node = json_object_get(json_object_get(schema_root, "$defs"), def);
  assert_non_null(node);
  return check(node, doc, "$", why, n);
}

/* a value of a type the node does not allow */
static json_t *wrong_type(json_t *node) {
  const json_t *t = json_object_get(resolve(node), "type");
  json_t *obj = json_object();
  int is_obj = type_ok(obj, t);
  json_decref(obj);
  return is_obj ? json_array() : json_object();
}

/* Every check of the schema must be able to fail: for each member of the
   real output (doc, under schema node) in turn, it is removed (when
   required), given a wrong type, a value outside its enum, const or bounds;
   each such copy must be refused. Returns how many mutations were tried. */
static int mutate(json_t *whole, const char *def, json_t *node, json_t *v) {
  char why[512];
  int tried = 0;
  node = resolve(node);
  const char *k;
  json_t *sub;
  json_t *props = json_object_get(node, "properties"), *req = json_object_get(node, "required");
  json_object_foreach(props, k, sub) {
    json_t *keep = json_incref(json_object_get(v, k));
    if (!keep) continue;
    json_t *bad[5] = {wrong_type(sub), NULL, NULL, NULL, NULL};
    json_t *r = resolve(sub), *min = json_object_get(r, "minimum"), *max = json_object_get(r, "maximum");
    if (json_object_get(r, "enum")) bad[1] = json_string("not-in-the-enum");
    if (json_object_get(r, "const")) bad[2] = json_integer(json_integer_value(json_object_get(r, "const")) + 1);
    if (min) bad[3] = json_real(json_number_value(min) - 1);
    if (max) bad[4] = json_real(json_number_value(max) * 2 + 1);
    for (int b = 0; b < 5; b++) {
      if (!bad[b]) continue;
      if (b >= 3 && json_is_integer(keep)) { /* an integer stays one */
        json_int_t i = (json_int_t)json_real_value(bad[b]);
        json_decref(bad[b]);
        bad[b] = json_integer(b == 3 ? i : json_integer_value(max) + 1);
      }
      json_object_set_new(v, k, bad[b]);
      if (!validate(whole, def, why, sizeof why)) fail_msg("mutation %d of %s was not refused", b, k);
      tried++;
    }
    json_t *name = json_string(k);
    int required = in_enum(name, req);
    json_decref(name);
    if (required) {
      json_object_del(v, k);
      if (!validate(whole, def, why, sizeof why)) fail_msg("missing %s was not refused", k);
      tried++;
    }
    json_object_set(v, k, keep);
    tried += mutate(whole, def, sub, keep);
    json_decref(keep);
  }
  json_t *items = json_object_get(node, "items"), *el;
  size_t i;
  json_array_foreach(items ? v : NULL, i, el) tried += mutate(whole, def, items, el);
  return tried;
}

/* every key of the output is in the schema, and every key of the schema is
   in docs/control.md as `key` */
static void documented(json_t *node, const json_t *v, const char *doc) {
  node = resolve(node);
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    json_t *sub = json_object_get(json_object_get(node, "properties"), k);
    if (!sub) fail_msg("'%s' is not in the schema", k);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "`%s`", k);
    if (!strstr(doc, quoted)) fail_msg("'%s' is not in docs/control.md", k);
    documented(sub, x, doc);
  }
  json_t *items = json_object_get(node, "items");
  size_t i;
  json_array_foreach(items ? v : NULL, i, x) documented(items, x, doc);
}

static void check_output(json_t *doc, const char *def) {
  char why[512];
  if (validate(doc, def, why, sizeof why)) fail_msg("real output refused: %s", why);
  static char md[1 << 17];
  int fd = open(FERRY_CONTROL_DOC, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  slurp(fd, md, sizeof md);
  close(fd);
  json_t *node = *def ? json_object_get(json_object_get(schema_root, "$defs"), def) : schema_root;
  documented(node, doc, md);
  int tried = mutate(doc, def, node, doc);
  if (tried < 100) fail_msg("only %d mutations of %s", tried, def);
  if (validate(doc, def, why, sizeof why)) fail_msg("restored output refused: %s", why);
}

/* `ferry status --json` and `ferry ls --json` of a program (vGPU 0 moved,
   vGPU 1 not: phase a string and null) against the schema file */
static void test_schema(void **state) {
  (void)state;
  load_schema();
  char why[512];
  if (!validate(parsed("{\"schema\":1,\"pid\":1}"), "", why, sizeof why)) fail_msg("no vgpus passed");
  struct proc c = spawn_child(NULL);
  child_do(&c, "go\n", "started");
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)c.pid);
  struct cli_result *r = cli("migrate", "--pid", pid, "0", "1", NULL);
  if (r->rc) fail_msg("migrate: %s", r->err);
  r = cli("status", "--pid", pid, "--json", NULL, NULL);
  assert_int_equal(r->rc, 0);
  json_t *st = json_deep_copy(parsed(r->out));
  assert_string_equal(jget_str(jmig(st, 0), "phase"), "switch");
  assert_true(json_is_null(json_object_get(jmig(st, 1), "phase")));
  check_output(st, "");
  json_decref(st);
  r = cli("ls", "--json", NULL, NULL, NULL, NULL);
  assert_int_equal(r->rc, 0);
  json_t *all = json_deep_copy(parsed(r->out));
  assert_true(json_array_size(all) >= 1);
  check_output(all, "ls");
  json_decref(all);
  child_end(&c);
  json_decref(schema_root);
  schema_root = NULL;
}

/* ---- the CLI against fake programs: forged sockets, hostile replies ---- */

/* A forked process that plays a program: it listens on DIR/NAME, or on
   DIR/ferry-<its pid + name_off>.sock, as `uid` (unless -1), with the mode a
   forger would give it (0777), answers every `status` with status_reply and
   every `migrate` with migrate_reply 600 ms later (the CLI polls status
   meanwhile). Each connection is served by a child, which keeps the
   listener's credentials (SO_PEERCRED reports who called listen()). */
struct fake {
  pid_t pid;
  char path[256];
};
static struct fake fakes[4]; /* running, for fakes_teardown */
static int nfakes;
static char leftover[256]; /* a file a test made, for fakes_teardown */

/* a status_reply that is never finished: a byte every 100 ms, for ever */
static const char trickle[] = "trickle";

static void fake_serve(int c, const char *status_reply, const char *migrate_reply) {
  char line[512];
  size_t have = 0;
  for (;;) {
    ssize_t r = read(c, line + have, 1);
    if (r <= 0) _exit(0);
    if (line[have] != '\n') {
      if (have + 1 < sizeof line) have++;
      continue;
    }
    line[have] = '\0';
    have = 0;
    const char *reply = "error unknown";
    if (!strcmp(line, "status") && status_reply == trickle) {
      for (;;) { /* until the CLI hangs up */
        if (write(c, "o", 1) != 1) _exit(0);
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
      }
    } else if (!strcmp(line, "status")) {
      reply = status_reply;
    } else if (!strncmp(line, "migrate ", 8)) {
      nanosleep(&(struct timespec){0, 600 * 1000 * 1000}, NULL);
      reply = migrate_reply;
    }
    if (write(c, reply, strlen(reply)) < 0 || write(c, "\n", 1) != 1) _exit(0);
  }
}

static struct fake fake_start(const char *where, const char *name, int name_off, uid_t uid,
                              const char *status_reply, const char *migrate_reply) {
  int ready[2];
  assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
  struct fake f = {.pid = fork()};
  assert_true(f.pid >= 0);
  if (f.pid == 0) {
    /* ctest waits for whoever holds the test's stdout and stderr */
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(null, 2);
    signal(SIGCHLD, SIG_IGN); /* connection children reap themselves */
    if (uid != (uid_t)-1 && (setgroups(0, NULL) || setgid(uid) || setuid(uid))) _exit(3);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* after setuid, which clears it */
    if (getppid() == 1) _exit(0);
    char path[256];
    if (name) snprintf(path, sizeof path, "%s/%s", where, name);
    else snprintf(path, sizeof path, "%s/ferry-%d.sock", where, (int)getpid() + name_off);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || chmod(path, 0777) || listen(s, 8))
      _exit(4);
    if (write(ready[1], "r", 1) != 1) _exit(5);
    for (;;) {
      int c = accept(s, NULL, NULL);
      if (c < 0) continue;
      if (fork() == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fake_serve(c, status_reply, migrate_reply);
      }
      close(c);
    }
  }
  close(ready[1]);
  if (name) snprintf(f.path, sizeof f.path, "%s/%s", where, name);
  else snprintf(f.path, sizeof f.path, "%s/ferry-%d.sock", where, (int)f.pid + name_off);
  fakes[nfakes++] = f;
  char b;
  if (read(ready[0], &b, 1) != 1) fail_msg("the fake program did not start");
  close(ready[0]);
  return f;
}

static void fake_stop(struct fake *f) {
  for (int i = 0; i < nfakes; i++)
    if (fakes[i].pid == f->pid) fakes[i] = fakes[--nfakes];
  kill(f->pid, SIGKILL);
  waitpid(f->pid, NULL, 0);
  unlink(f->path);
}

/* a failed assertion skips the test's own clean-up: stop what it left */
static int fakes_teardown(void **state) {
  (void)state;
  while (nfakes) fake_stop(&fakes[0]);
  if (leftover[0]) unlink(leftover);
  leftover[0] = '\0';
  return 0;
}

static const char *const plain_status =
    "ok {\"pid\":1,\"vgpus\":[{\"index\":0,\"backend\":\"remote\","
    "\"where\":\"forged\",\"migration\":{\"state\":\"none\"}}]}";
static const char *const forged_ok = "ok vgpu 0 now on local GPU 0 (1.0 ms)";

/* the pid named in the socket's name is not the process behind it: someone
   bound the name of a pid to come */
static void test_cli_forged_pid(void **state) {
  (void)state;
  struct fake f = fake_start(dir, NULL, 1, (uid_t)-1, plain_status, forged_ok);
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)f.pid + 1);
  struct cli_result *r = cli("migrate", "--pid", pid, "0", "0", NULL);
  assert_int_equal(r->rc, 1);
  assert_string_equal(r->out, "");
  assert_non_null(strstr(r->err, "ferry migrate: refusing "));
  char want[128];
  snprintf(want, sizeof want, "is pid %d, not pid %s", (int)f.pid, pid);
  if (!strstr(r->err, want)) fail_msg("no '%s' in: %s", want, r->err);
  r = cli("status", "--pid", pid, NULL, NULL, NULL);
  assert_int_equal(r->rc, 1);
  assert_non_null(strstr(r->err, want));
  assert_null(strstr(r->out, "forged"));
  r = cli("status", "--socket", f.path, NULL, NULL, NULL); /* the name still says which pid */
  assert_int_equal(r->rc, 1);
  assert_non_null(strstr(r->err, want));
  r = cli("ls", NULL, NULL, NULL, NULL, NULL);
  assert_int_equal(r->rc, 0);
  assert_null(strstr(r->out, "forged"));
  assert_non_null(strstr(r->err, "ferry ls: refusing "));
  assert_non_null(strstr(r->err, want));
  r = cli("ls", "--json", NULL, NULL, NULL, NULL);
  assert_null(strstr(r->out, "forged"));
  fake_stop(&f);

  /* the same fake under its own pid's name, or an unnumbered name, is believed */
  f = fake_start(dir, NULL, 0, (uid_t)-1, plain_status, forged_ok);
  snprintf(pid, sizeof pid, "%d", (int)f.pid);
  r = cli("status", "--pid", pid, NULL, NULL, NULL);
  if (r->rc) fail_msg("rc %d: %s", r->rc, r->err);
  assert_non_null(strstr(r->out, "vGPU 0  remote  forged\n"));
  fake_stop(&f);
  f = fake_start(dir, "any-name.sock", 0, (uid_t)-1, plain_status, forged_ok);
  r = cli("migrate", "--socket", f.path, "0", "0", NULL);
  if (r->rc) fail_msg("rc %d: %s", r->rc, r->err);
  assert_string_equal(r->out, "vgpu 0 now on local GPU 0 (1.0 ms)\n");
  fake_stop(&f);
}

/* ferry-<pid>.sock is a symbolic link (to a socket that would answer) */
static void test_cli_symlink(void **state) {
  (void)state;
  struct fake f = fake_start(dir, "elsewhere.sock", 0, (uid_t)-1, plain_status, forged_ok);
  char link[128], pid[32];
  sock_path(f.pid, link, sizeof link);
  assert_int_equal(symlink(f.path, link), 0);
  snprintf(leftover, sizeof leftover, "%s", link);
  snprintf(pid, sizeof pid, "%d", (int)f.pid);
  struct cli_result *r = cli("migrate", "--pid", pid, "0", "0", NULL);
  assert_int_equal(r->rc, 1);
  assert_string_equal(r->out, "");
  assert_non_null(strstr(r->err, "symbolic link"));
  r = cli("ls", NULL, NULL, NULL, NULL, NULL);
  assert_null(strstr(r->out, "forged"));
  assert_non_null(strstr(r->err, "symbolic link"));
  fake_stop(&f);
}

/* Another user's socket in a shared directory (as /tmp is): the CLI runs as
   uid 65532, the forger as 65534 (nobody). Needs root, to be both. */
#define CALLER_UID 65532
#define FORGER_UID 65534

static void copy_file(const char *from, const char *to, mode_t mode) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  assert_true(in >= 0 && out >= 0);
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0) assert_int_equal(write(out, buf, (size_t)n), n);
  close(in);
  close(out);
  assert_int_equal(chmod(to, mode), 0);
}

static char shared[64], saved_dir[sizeof dir];

static int other_uid_setup(void **state) {
  (void)state;
  snprintf(shared, sizeof shared, "/tmp/ferry-shared-XXXXXX");
  if (!mkdtemp(shared) || chmod(shared, 01777)) return -1; /* like /tmp */
  /* the CLI as another user may not reach the build tree: a copy it can run */
  snprintf(cli_path, sizeof cli_path, "%s/ferry", shared);
  copy_file(FERRY_CLI, cli_path, 0755);
  memcpy(saved_dir, dir, sizeof dir);
  snprintf(dir, sizeof dir, "%s", shared);
  return 0;
}

static int other_uid_teardown(void **state) {
  fakes_teardown(state);
  cli_uid = (uid_t)-1;
  unlink(cli_path);
  snprintf(cli_path, sizeof cli_path, "%s", FERRY_CLI);
  memcpy(dir, saved_dir, sizeof dir);
  return rmdir(shared);
}

static void test_cli_other_uid(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("not root: cannot play two users; skipped\n");
    skip();
  }
  char pid[32];
  struct fake f = fake_start(shared, NULL, 0, FORGER_UID, plain_status, forged_ok);
  snprintf(pid, sizeof pid, "%d", (int)f.pid);
  cli_uid = CALLER_UID;
  struct cli_result *r = cli("migrate", "--pid", pid, "0", "0", NULL);
  assert_int_equal(r->rc, 1);
  assert_string_equal(r->out, "");
  if (!strstr(r->err, "belongs to uid 65534, not to you (uid 65532)"))
    fail_msg("stderr: %s", r->err);
  r = cli("status", "--pid", pid, NULL, NULL, NULL);
  assert_int_equal(r->rc, 1);
  assert_null(strstr(r->out, "forged"));
  r = cli("ls", NULL, NULL, NULL, NULL, NULL);
  assert_null(strstr(r->out, "forged")); /* another user's program: not listed */

  /* the file made ours (only root can), the listener still another user's */
  assert_int_equal(chown(f.path, CALLER_UID, CALLER_UID), 0);
  r = cli("migrate", "--pid", pid, "0", "0", NULL);
  assert_int_equal(r->rc, 1);
  assert_string_equal(r->out, "");
  if (!strstr(r->err, "runs as uid 65534, not as uid 65532")) fail_msg("stderr: %s", r->err);
  r = cli("ls", NULL, NULL, NULL, NULL, NULL);
  assert_null(strstr(r->out, "forged"));
  assert_non_null(strstr(r->err, "runs as uid 65534"));

  /* root may look at any user's program, but not at a file whose owner is
     not the process behind it */
  cli_uid = (uid_t)-1;
  r = cli("status", "--pid", pid, NULL, NULL, NULL);
  assert_int_equal(r->rc, 1);
  assert_non_null(strstr(r->err, "runs as uid 65534, not as uid 65532"));
  assert_int_equal(chown(f.path, FORGER_UID, FORGER_UID), 0);
  r = cli("status", "--pid", pid, NULL, NULL, NULL);
  if (r->rc) fail_msg("root, rc %d: %s", r->rc, r->err);
  assert_non_null(strstr(r->out, "forged"));
  fake_stop(&f);
}

/* a status reply with numbers no program sends: every one is clamped before
   it is printed, divided or converted (numbers JSON cannot carry are refused
   whole: test_cli_not_json) */
static const char *const hostile_status =
    "ok {\"socket\":\"/forged\",\"pid\":1e300,\"vgpus\":["
    "{\"index\":0,\"backend\":\"remote\",\"where\":\"w0\",\"records\":-1e308,\"regions\":-0.0,"
    "\"live_bytes\":1e300,\"launches\":1e20,\"migration\":{\"state\":\"running\",\"phase\":"
    "\"memsync\",\"bytes_done\":1e12,\"bytes_total\":1}},"
    "{\"index\":1e300,\"backend\":\"local\",\"where\":\"w1\",\"records\":3.7,\"regions\":-5,"
    "\"live_bytes\":-1,\"launches\":2,\"migration\":{\"state\":\"done\",\"phase\":\"switch\","
    "\"phase_ms\":{\"hold\":-1,\"drain\":1e308,\"setup\":-1e-300},\"total_ms\":1e308,"
    "\"pause_ms\":-1e308,"
    "\"launch_at_start\":1e300,\"records_replayed\":-3,\"modules_replayed\":1e19,"
    "\"replay_module_ms\":1e300,\"replay_other_ms\":0.5,\"bytes_copied\":1e300,"
    "\"ranges_copied\":1e300,\"requests\":-1}},"
    "{\"index\":-7,\"backend\":\"remote\",\"where\":\"w2\",\"live_bytes\":1099511627776,"
    "\"migration\":{\"state\":\"running\",\"phase\":\"memsync\",\"bytes_done\":-5,"
    "\"bytes_total\":1.7e308}}]}";

static void test_cli_hostile_numbers(void **state) {
  (void)state;
  struct fake f = fake_start(dir, NULL, 0, (uid_t)-1, hostile_status, "ok moved");
  char pid[32], expect[2048];
  snprintf(pid, sizeof pid, "%d", (int)f.pid);
  struct cli_result *r = cli("status", "--pid", pid, NULL, NULL, NULL);
  if (r->rc) fail_msg("rc %d: %s", r->rc, r->err);
  snprintf(expect, sizeof expect,
           "pid 2147483647  socket %s\n"
           "vGPU 0  remote  w0\n"
           "  records 0, live regions 0 (8.0 PiB), launches 9007199254740992\n"
           "  migration: running, memsync 1/1 B (100%%)\n"
           "vGPU 2147483647  local  w1\n"
           "  records 4, live regions 0 (0 B), launches 2\n"
           "  migration: done in 1000000000000.0 ms, the program held 0.0 ms (hold 0.0, drain "
           "1000000000000.0, setup 0.0 ms)\n"
           "             at launch 9007199254740992; replayed 0 records, 9007199254740992 modules "
           "(1000000000000.0 ms, rest 0.5 ms); copied 8.0 PiB in 9007199254740992 ranges, 0 "
           "requests\n"
           "vGPU 0  remote  w2\n"
           "  records 0, live regions 0 (1.0 TiB), launches 0\n"
           "  migration: running, memsync 0.0/8.0 PiB (0%%)\n",
           f.path);
  if (strcmp(r->out, expect)) fail_msg("got:\n%s\nexpected:\n%s", r->out, expect);
  r = cli("migrate", "--pid", pid, "0", "1", NULL);
  if (r->rc) fail_msg("rc %d: %s", r->rc, r->err);
  assert_string_equal(r->out, "moved\n");
  if (!strstr(r->err, "ferry: vgpu 0 memsync 1/1 B (100%)\n")) fail_msg("stderr: %s", r->err);
  assert_null(strstr(r->err, "-"));
  r = cli("ls", NULL, NULL, NULL, NULL, NULL);
  char row[512];
  snprintf(row, sizeof row, "%-8d %-5s %-8s %-40s %s\n", (int)f.pid, "2147483647", "local", "w1",
           f.path);
  if (!strstr(r->out, row)) fail_msg("no row '%s' in:\n%s", row, r->out);
  r = cli("ls", "--json", NULL, NULL, NULL, NULL);
  assert_int_equal(r->rc, 0);
  json_t *all = parsed(r->out), *e, *mine = NULL;
  size_t i;
  json_array_foreach(all, i, e) /* this process's own socket is listed too */
    if (!strcmp(jget_str(e, "socket"), f.path)) mine = e;
  assert_non_null(mine); /* the socket the program claims is not believed */
  assert_int_equal(json_object_size(mine), 3);
  fake_stop(&f);
}

/* replies that are not JSON, or are ambiguous, are refused whole: nothing
   of them is printed */
static void test_cli_not_json(void **state) {
  (void)state;
  static const char *const bad[][2] = {
      {"ok {\"pid\":1,\"vgpus\":[{\"index\":0,\"records\":-nan}]}", "invalid token"},
      {"ok {\"pid\":1,\"vgpus\":[{\"index\":0,\"records\":NaN}]}", "invalid token"},
      {"ok {\"pid\":1e999,\"vgpus\":[]}", "real number overflow"},
      {"ok {\"pid\":99999999999999999999,\"vgpus\":[]}", "too big integer"},
      {"ok {\"pid\":1,\"pid\":2,\"vgpus\":[]}", "duplicate object key"},
      {"ok {\"pid\":1,\"vgpus\":[]} trailing", "end of file expected"},
      {"ok {\"pid\":1,\"vgpus\":[{\"where\":\"\xff\"}]}", "unable to decode byte 0xff"},
      {"ok {\"pid\":1,\"vgpus\":[", "end of file"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct fake f = fake_start(dir, NULL, 0, (uid_t)-1, bad[i][0], "ok moved");
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)f.pid);
    struct cli_result *r = cli("status", "--pid", pid, NULL, NULL, NULL);
    if (r->rc != 1 || r->out[0] || !strstr(r->err, "not valid JSON") || !strstr(r->err, bad[i][1]))
      fail_msg("case %zu: rc %d, out '%s', err '%s'", i, r->rc, r->out, r->err);
    r = cli("status", "--pid", pid, "--json", NULL, NULL);
    if (r->rc != 1 || r->out[0]) fail_msg("case %zu --json: rc %d, out '%s'", i, r->rc, r->out);
    r = cli("ls", "--json", NULL, NULL, NULL, NULL);
    assert_int_equal(r->rc, 0);
    json_t *all = parsed(r->out), *e;
    size_t k;
    json_array_foreach(all, k, e) /* this process's own socket is listed */
      assert_int_not_equal(json_integer_value(json_object_get(e, "pid")), f.pid);
    assert_non_null(strstr(r->err, "not valid JSON"));
    fake_stop(&f);
  }
}

/* A program that trickles its status reply, a byte every 100 ms, holds
   none of status, ls and migrate's progress beyond one deadline per reply
   (the CLI's 5 s; 3x that leaves room for a loaded machine) */
#define CLI_REPLY_MS 5000

static void test_cli_trickle(void **state) {
  (void)state;
  struct fake f = fake_start(dir, NULL, 0, (uid_t)-1, trickle, "ok moved");
  char pid[32], want[300];
  snprintf(pid, sizeof pid, "%d", (int)f.pid);
  static struct cli_result res[3];
  static const char *const what[3] = {"ferry status", "ferry ls", "ferry migrate"};
  long t0 = mono_ms();
  struct proc p[3] = {cli_start("status", "--pid", pid, NULL, NULL),
                      cli_start("ls", NULL, NULL, NULL, NULL),
                      cli_start("migrate", "--pid", pid, "0", "1")};
  long took[3];
  for (int i = 0; i < 3; i++) {
    cli_finish(&p[i], &res[i], t0 + 3 * CLI_REPLY_MS, what[i]);
    took[i] = mono_ms() - t0;
  }
  assert_true(took[0] >= CLI_REPLY_MS); /* the deadline, not a shorter one */
  if (res[0].rc != 1 || res[0].out[0] ||
      !strstr(res[0].err, "ferry status: the program's reply was not complete within 5000 ms"))
    fail_msg("status: rc %d, out '%s', err '%s'", res[0].rc, res[0].out, res[0].err);
  snprintf(want, sizeof want, "ferry ls: %s: the program's reply was not complete within 5000 ms",
           f.path);
  if (res[1].rc != 0 || !strstr(res[1].err, want))
    fail_msg("ls: rc %d, err '%s'", res[1].rc, res[1].err);
  /* migrate's progress polls give up on the status; the migration's own
     reply (after 600 ms) is still read */
  if (res[2].rc != 0 || strcmp(res[2].out, "moved\n"))
    fail_msg("migrate: rc %d, out '%s', err '%s'", res[2].rc, res[2].out, res[2].err);
  fake_stop(&f);
}

/* Text from a program (names, errors, URLs, where, phase names, raw
   replies, and what Jansson quotes of a bad one) reaches the terminal with
   its control characters escaped as \xNN, backslashes doubled: a program
   cannot write escape sequences into its caller's terminal. Printable UTF-8
   stays as it is; C1 controls, bidirectional overrides and bytes that are
   not UTF-8 are escaped too. --json stays JSON, all ASCII. */
static const char *const escape_status =
    "ok {\"pid\":1,\"vgpus\":[{\"index\":0,\"backend\":\"re\\u001b[2Jmote\","
    "\"where\":\"\\u001b]0;owned\\u0007caf\\u00e9\\\\\\u009b1m\\u202e\\u007f\","
    "\"prepared\":\"\\u001b[5m\",\"migration\":{\"state\":\"failed\",\"phase\":\"replay\\u001b\","
    "\"error\":\"bad\\r\\u001b[1Kthing\",\"phase_ms\":{\"ho\\u001bld\":1},\"total_ms\":2}}]}";
static const char *const where_shown = "\\x1b]0;owned\\x07caf\xc3\xa9\\\\\\xc2\\x9b1m"
                                       "\\xe2\\x80\\xae\\x7f";

/* no byte of s may act on a terminal */
static void assert_inert(const char *s, const char *what) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if ((*p < 0x20 && *p != '\n') || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0) ||
        (p[0] == 0xe2 && p[1] == 0x80 && p[2] == 0xae))
      fail_msg("%s: a control character at byte %zu: %s", what, (size_t)(p - (const unsigned char *)s), s);
}

static void test_cli_escapes(void **state) {
  (void)state;
  struct fake f = fake_start(dir, NULL, 0, (uid_t)-1, escape_status, "ok \x1b]0;x\x07moved");
  char pid[32], want[512];
  snprintf(pid, sizeof pid, "%d", (int)f.pid);
  struct cli_result *r = cli("status", "--pid", pid, NULL, NULL, NULL);
  if (r->rc) fail_msg("rc %d: %s", r->rc, r->err);
  assert_inert(r->out, "status");
  snprintf(want, sizeof want, "vGPU 0  re\\x1b[2Jmote  %s\n", where_shown);
  if (!strstr(r->out, want)) fail_msg("no '%s' in:\n%s", want, r->out);
  assert_non_null(strstr(r->out, "  prepared: \\x1b[5m\n"));
  assert_non_null(strstr(r->out, "  migration: failed in replay\\x1b after 2.0 ms: bad\\x0d\\x1b[1Kthing\n"));
  assert_non_null(strstr(r->out, "phases: ho\\x1bld 1.0 ms"));
  r = cli("status", "--pid", pid, "--json", NULL, NULL);
  assert_int_equal(r->rc, 0);
  for (const char *p = r->out; *p; p++) /* JSON, all ASCII (DEL, which JSON allows raw, aside) */
    if (((unsigned char)*p < 0x20 && *p != '\n') || (unsigned char)*p > 0x7f) fail_msg("--json: %s", r->out);
  json_t *st = parsed(r->out);
  assert_string_equal(jget_str(json_array_get(json_object_get(st, "vgpus"), 0), "where"),
                      "\x1b]0;owned\x07""caf\xc3\xa9\\\xc2\x9b""1m\xe2\x80\xae\x7f");
  r = cli("ls", NULL, NULL, NULL, NULL, NULL);
  assert_int_equal(r->rc, 0);
  assert_inert(r->out, "ls");
  snprintf(want, sizeof want, "%-8d %-5s %-8s %-40s %s\n", (int)f.pid, "0", "re\\x1b[2Jmote", where_shown,
           f.path);
  if (!strstr(r->out, want)) fail_msg("no row '%s' in:\n%s", want, r->out);
  r = cli("migrate", "--pid", pid, "0", "1", NULL);
  assert_int_equal(r->rc, 0);
  assert_string_equal(r->out, "\\x1b]0;x\\x07moved\n");
  fake_stop(&f);

  /* replies that are not a status, errors, and what Jansson quotes */
  static const char *const bad[][3] = {
      {"nonsense \x1b[2J\x9b", "error \x1b[2Jboom", "the program answered: nonsense \\x1b[2J\\x9b"},
      {"ok {\x1b[2J}", "\x1b[2J", "not valid JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    f = fake_start(dir, NULL, 0, (uid_t)-1, bad[i][0], bad[i][1]);
    snprintf(pid, sizeof pid, "%d", (int)f.pid);
    r = cli("status", "--pid", pid, NULL, NULL, NULL);
    assert_int_equal(r->rc, 1);
    assert_inert(r->err, "status's error");
    if (!strstr(r->err, bad[i][2])) fail_msg("case %zu: no '%s' in '%s'", i, bad[i][2], r->err);
    r = cli("ls", NULL, NULL, NULL, NULL, NULL);
    assert_inert(r->err, "ls's error");
    r = cli("migrate", "--pid", pid, "0", "1", NULL);
    assert_int_equal(r->rc, 1);
    assert_inert(r->err, "migrate's error");
    assert_non_null(strstr(r->err, i ? "ferry migrate: \\x1b[2J\n" : "ferry migrate: \\x1b[2Jboom\n"));
    fake_stop(&f);
  }
}

/* ---- this binary as the program under control ---- */

/* LeakSanitizer's exit check cannot stop the world in a fork() child of a
   threaded process (it hangs or complains); the hook turns it off there */
static int in_fork_child;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return in_fork_child; }

static int child_main(void) {
  reset_doubles();
  polls_to_finish = 3;
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (!strcmp(line, "go\n")) {
      ferry_control_start();
      printf("started\n");
    } else if (!strcmp(line, "fork\n")) {
      pid_t p = fork();
      if (p == 0) {
        in_fork_child = 1;
        exit(0); /* runs the atexit handlers */
      }
      waitpid(p, NULL, 0);
      printf("forked\n");
    }
    fflush(stdout);
  }
  return 0;
}

static int group_setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/ferry-ctl-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  return setenv("FERRY_CONTROL_DIR", dir, 1);
}

static int group_teardown(void **state) {
  (void)state;
  char path[128];
  sock_path(getpid(), path, sizeof path);
  unlink(path);
  if (rmdir(dir)) {
    fprintf(stderr, "rmdir %s: %s (a socket file was left behind)\n", dir, strerror(errno));
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "child")) return child_main();
  signal(SIGPIPE, SIG_IGN);
  sem_init(&started, 0, 0);
  sem_init(&release, 0, 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help),
      cmocka_unit_test(test_status_json),
      cmocka_unit_test(test_status_no_vgpu),
      cmocka_unit_test(test_status_escaping),
      cmocka_unit_test(test_status_numbers),
      cmocka_unit_test(test_status_too_small),
      cmocka_unit_test(test_migrate_ok),
      cmocka_unit_test(test_migrate_to_server),
      cmocka_unit_test(test_prepare_cancel),
      cmocka_unit_test(test_migrate_error),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_bad_input_echo),
      cmocka_unit_test(test_line_length),
      cmocka_unit_test_setup(test_socket_file, socket_setup),
      cmocka_unit_test_setup(test_socket_requests, socket_setup),
      cmocka_unit_test_setup(test_socket_too_long, socket_setup),
      cmocka_unit_test_setup(test_socket_disconnect_mid_line, socket_setup),
      cmocka_unit_test_setup(test_socket_status_during_migrate, socket_setup),
      cmocka_unit_test_setup(test_socket_busy, socket_setup),
      cmocka_unit_test(test_stale_socket_replaced),
      cmocka_unit_test(test_live_socket_kept),
      cmocka_unit_test(test_not_a_socket_kept),
      cmocka_unit_test(test_control_off),
      cmocka_unit_test(test_bad_dir),
      cmocka_unit_test(test_fork_keeps_socket),
      cmocka_unit_test(test_cli_ls),
      cmocka_unit_test(test_cli_status),
      cmocka_unit_test(test_cli_migrate),
      cmocka_unit_test(test_cli_errors),
      cmocka_unit_test(test_schema),
      cmocka_unit_test_teardown(test_cli_forged_pid, fakes_teardown),
      cmocka_unit_test_teardown(test_cli_symlink, fakes_teardown),
      cmocka_unit_test_setup_teardown(test_cli_other_uid, other_uid_setup, other_uid_teardown),
      cmocka_unit_test_teardown(test_cli_hostile_numbers, fakes_teardown),
      cmocka_unit_test_teardown(test_cli_not_json, fakes_teardown),
      cmocka_unit_test_teardown(test_cli_trickle, fakes_teardown),
      cmocka_unit_test_teardown(test_cli_escapes, fakes_teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
