/*
 * The doors that run upward. The client's rooms are layered: driver front
 * end -> runtime front end -> migration -> core; a room calls only its own
 * and those below it. Where a lower room must let an upper one act (a
 * device reset the driver front end must hear of, a migration that moves
 * the module variables the front ends handed out), it calls a hook here,
 * which the upper room fills in when the library loads (a constructor). A
 * hook left empty is a room that is not linked in (unit tests build parts
 * of the client); callers check.
 */
#ifndef FERRY_CORE_HOOKS_H
#define FERRY_CORE_HOOKS_H

#include <stdint.h>

#include "protocol/wire.h"

typedef int (*ferry_global_lookup_fn)(void *ctx, uint32_t module, const char *name, uint64_t *addr,
                                      uint64_t *size);
typedef int (*ferry_global_copy_fn)(void *ctx, uint64_t src, uint64_t dst, uint64_t size);

struct ferry_hooks {
  /* core (init.c): every vGPU is connected. Migration starts the control
     socket and reads FERRY_MIGRATE_AT. */
  void (*started)(void);
  /* runtime front end (cudaDeviceReset): vgpu lost its modules. The
     driver front end forgets its modules, loads its libraries again when
     next used and looks its globals up again. */
  void (*device_reset)(int vgpu);
  /* runtime front end: where a module global the driver front end handed
     out lives now (addr itself when it is none, or nothing moved) */
  uint64_t (*global_now)(int vgpu, uint64_t addr);
  /* migration: a module's variables live at var_info's addresses on the
     GPU vgpu moved to (the runtime front end's registered modules) */
  void (*module_moved)(int vgpu, uint32_t module, ferry_blob var_info);
  /* migration: each global the driver front end handed out is looked up
     on the target and its contents asked to be copied there; 0 or
     non-zero. commit: the switch happened, the new addresses hold. */
  int (*globals_prepare)(int vgpu, ferry_global_lookup_fn lookup, ferry_global_copy_fn add_copy,
                         void *ctx);
  void (*globals_commit)(int vgpu);
};
extern struct ferry_hooks ferry_hooks;

#endif
