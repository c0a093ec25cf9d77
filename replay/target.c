/* The executor as a migration target (see target.h). */
#include "replay/target.h"

static int exec_target_call(void *ctx, unsigned call, const void *args, void *rets,
                            const struct ferry_bulk *bulk) {
  struct ferry_exec *ex = ctx;
  const struct ferry_driver *d = ferry_exec_driver(ex);
  d->CtxSetCurrent(ferry_exec_context(ex));
  int rc = ferry_exec_call_mem(ex, call, args, rets, bulk);
  /* reported now: it must not come back again from a later call */
  if (rc && (ferry_calls[call].flags & ASYNC)) ferry_exec_take_async_error(ex);
  if (!rc && (ferry_calls[call].flags & SYNC)) rc = ferry_exec_take_async_error(ex);
  return rc;
}

struct ferry_target ferry_exec_target(struct ferry_exec *ex) {
  return (struct ferry_target){exec_target_call, ex};
}
