/*
 * libibverbs and librdmacm reached through dlopen, so that ferry's
 * libcudart.so.13 (which links this backend) still loads on machines
 * without rdma-core; only a program that asks for ib:// needs it. The fast
 * path (post_send, post_recv, poll_cq, req_notify_cq) is inline in verbs.h
 * and goes through the device's own ops table, so it needs no symbol here.
 */
#ifndef FERRY_IB_API_H
#define FERRY_IB_API_H

#include <stddef.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

struct ferry_ib_api {
  struct ibv_device **(*get_device_list)(int *n);
  void (*free_device_list)(struct ibv_device **list);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
  int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
  struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_ctx,
                              struct ibv_comp_channel *ch, int vector);
  int (*destroy_cq)(struct ibv_cq *cq);
  int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_ctx);
  void (*ack_cq_events)(struct ibv_cq *cq, unsigned n);
  const char *(*wc_status_str)(enum ibv_wc_status status);

  struct rdma_event_channel *(*create_event_channel)(void);
  void (*destroy_event_channel)(struct rdma_event_channel *ch);
  int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                   enum rdma_port_space ps);
  int (*destroy_id)(struct rdma_cm_id *id);
  int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
  int (*listen)(struct rdma_cm_id *id, int backlog);
  int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                      int timeout_ms);
  int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
  int (*create_qp)(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  void (*destroy_qp)(struct rdma_cm_id *id);
  int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *param);
  int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *param);
  int (*reject)(struct rdma_cm_id *id, const void *data, uint8_t len);
  int (*disconnect)(struct rdma_cm_id *id);
  int (*get_cm_event)(struct rdma_event_channel *ch, struct rdma_cm_event **ev);
  int (*ack_cm_event)(struct rdma_cm_event *ev);
  const char *(*event_str)(enum rdma_cm_event_type ev);
  __be16 (*get_src_port)(struct rdma_cm_id *id);
};

/* loads both libraries once per process; NULL with a reason in err */
const struct ferry_ib_api *ferry_ib_api(char *err, size_t errlen);

/*
 * Checks that this host has an RDMA device without opening one: a look at
 * /sys/class/infiniband, which is safe in a process that will fork (the
 * server's parent). 0, or -1 with a reason (naming what is missing) in err.
 */
int ferry_ib_have_device(char *err, size_t errlen);

#endif
