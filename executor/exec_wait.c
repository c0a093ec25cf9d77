/*
 * The calls that wait for the GPU (WAITS in calls.def): synchronize or
 * query the device, a stream or an event. Each is split into resolving its
 * handle, which needs the executor, and the wait, which needs only the
 * driver (exec.h), so that local mode waits outside its lock; the server
 * runs both steps at once, through the handlers here.
 */
#include "executor/exec_internal.h"

static int on_stream(struct ferry_exec *ex, uint32_t id, int query, struct ferry_wait *w) {
  w->on = FERRY_WAIT_STREAM;
  w->query = query;
  return exec_stream(ex, id, &w->stream);
}

static int on_event(struct ferry_exec *ex, uint32_t id, int query, struct ferry_wait *w) {
  w->on = FERRY_WAIT_EVENT;
  w->query = query;
  return exec_event(ex, id, &w->event);
}

int ferry_exec_wait_of(struct ferry_exec *ex, unsigned call, const void *args, struct ferry_wait *w) {
  *w = (struct ferry_wait){.d = ex->d, .on = FERRY_WAIT_DEVICE};
  switch (call) {
  case FERRY_CALL_device_synchronize:
    return EXEC_OK;
  case FERRY_CALL_stream_synchronize:
    return on_stream(ex, ((const struct ferry_stream_synchronize_args *)args)->stream, 0, w);
  case FERRY_CALL_stream_query:
    return on_stream(ex, ((const struct ferry_stream_query_args *)args)->stream, 1, w);
  case FERRY_CALL_event_synchronize:
    return on_event(ex, ((const struct ferry_event_synchronize_args *)args)->event, 0, w);
  case FERRY_CALL_event_query:
    return on_event(ex, ((const struct ferry_event_query_args *)args)->event, 1, w);
  default:
    return EXEC_INVALID_VALUE;
  }
}

int ferry_exec_wait(const struct ferry_wait *w) {
  const struct ferry_driver *d = w->d;
  switch (w->on) {
  case FERRY_WAIT_STREAM:
    return CU(w->query ? d->StreamQuery(w->stream) : d->StreamSynchronize(w->stream));
  case FERRY_WAIT_EVENT:
    return CU(w->query ? d->EventQuery(w->event) : d->EventSynchronize(w->event));
  case FERRY_WAIT_DEVICE:
    break;
  }
  return CU(d->CtxSynchronize());
}

static int wait_now(struct ferry_exec *ex, unsigned call, const void *args) {
  struct ferry_wait w;
  int rc = ferry_exec_wait_of(ex, call, args, &w);
  return rc ? rc : ferry_exec_wait(&w);
}

int ferry_x_device_synchronize(struct ferry_exec *ex, const struct ferry_device_synchronize_args *a,
                               struct ferry_device_synchronize_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return wait_now(ex, FERRY_CALL_device_synchronize, a);
}

int ferry_x_stream_synchronize(struct ferry_exec *ex, const struct ferry_stream_synchronize_args *a,
                               struct ferry_stream_synchronize_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return wait_now(ex, FERRY_CALL_stream_synchronize, a);
}

int ferry_x_stream_query(struct ferry_exec *ex, const struct ferry_stream_query_args *a,
                         struct ferry_stream_query_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return wait_now(ex, FERRY_CALL_stream_query, a);
}

int ferry_x_event_synchronize(struct ferry_exec *ex, const struct ferry_event_synchronize_args *a,
                              struct ferry_event_synchronize_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return wait_now(ex, FERRY_CALL_event_synchronize, a);
}

int ferry_x_event_query(struct ferry_exec *ex, const struct ferry_event_query_args *a,
                        struct ferry_event_query_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return wait_now(ex, FERRY_CALL_event_query, a);
}
