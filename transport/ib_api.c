/* dlopen of rdma-core; see ib_api.h for why it is not linked directly. */
#include "ib_api.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct ferry_ib_api api;
static char load_err[256];
static int loaded; /* 1 ok, -1 failed */
static pthread_once_t once = PTHREAD_ONCE_INIT;

struct sym {
  void **slot;
  const char *name;
  int cm; /* from librdmacm rather than libibverbs */
};

static void load(void) {
  void *verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!verbs) {
    snprintf(load_err, sizeof load_err,
             "cannot load libibverbs.so.1 (%s); install rdma-core's libibverbs1 and "
             "ibverbs-providers, or use tcp://",
             dlerror());
    loaded = -1;
    return;
  }
  void *cm = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cm) {
    snprintf(load_err, sizeof load_err,
             "cannot load librdmacm.so.1 (%s); install rdma-core's librdmacm1, or use tcp://",
             dlerror());
    loaded = -1;
    return;
  }
#define V(field, name) {(void **)&api.field, name, 0}
#define C(field, name) {(void **)&api.field, name, 1}
  const struct sym syms[] = {
      V(get_device_list, "ibv_get_device_list"),
      V(free_device_list, "ibv_free_device_list"),
      V(alloc_pd, "ibv_alloc_pd"),
      V(dealloc_pd, "ibv_dealloc_pd"),
      V(reg_mr, "ibv_reg_mr"),
      V(dereg_mr, "ibv_dereg_mr"),
      V(create_comp_channel, "ibv_create_comp_channel"),
      V(destroy_comp_channel, "ibv_destroy_comp_channel"),
      V(create_cq, "ibv_create_cq"),
      V(destroy_cq, "ibv_destroy_cq"),
      V(get_cq_event, "ibv_get_cq_event"),
      V(ack_cq_events, "ibv_ack_cq_events"),
      V(wc_status_str, "ibv_wc_status_str"),
      C(create_event_channel, "rdma_create_event_channel"),
      C(destroy_event_channel, "rdma_destroy_event_channel"),
      C(create_id, "rdma_create_id"),
      C(destroy_id, "rdma_destroy_id"),
      C(bind_addr, "rdma_bind_addr"),
      C(listen, "rdma_listen"),
      C(resolve_addr, "rdma_resolve_addr"),
      C(resolve_route, "rdma_resolve_route"),
      C(create_qp, "rdma_create_qp"),
      C(destroy_qp, "rdma_destroy_qp"),
      C(connect, "rdma_connect"),
      C(accept, "rdma_accept"),
      C(reject, "rdma_reject"),
      C(disconnect, "rdma_disconnect"),
      C(get_cm_event, "rdma_get_cm_event"),
      C(ack_cm_event, "rdma_ack_cm_event"),
      C(event_str, "rdma_event_str"),
      C(get_src_port, "rdma_get_src_port"),
  };
#undef V
#undef C
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(syms[i].cm ? cm : verbs, syms[i].name);
    if (!*syms[i].slot) {
      snprintf(load_err, sizeof load_err, "%s lacks %s; its rdma-core is too old, use tcp://",
               syms[i].cm ? "librdmacm.so.1" : "libibverbs.so.1", syms[i].name);
      loaded = -1;
      return;
    }
  }
  loaded = 1;
}

const struct ferry_ib_api *ferry_ib_api(char *err, size_t errlen) {
  pthread_once(&once, load);
  if (loaded == 1) return &api;
  snprintf(err, errlen, "%s", load_err);
  return NULL;
}

int ferry_ib_have_device(char *err, size_t errlen) {
  DIR *d = opendir("/sys/class/infiniband");
  int found = 0;
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') found = 1;
    closedir(d);
  }
  if (found) return 0;
  snprintf(err, errlen,
           "no RDMA device on this host (/sys/class/infiniband is empty: no InfiniBand or RoCE "
           "adapter, and no soft-RoCE rxe device); use tcp:// instead");
  return -1;
}
