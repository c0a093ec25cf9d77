/*
 * TOOLS_MODULE entry 7 (export.c's table), which cuFFT calls once per plan
 * on the module it just loaded with cuModuleLoadData, to get the module's
 * kernel. Seen through a pass-through driver on driver 580
 * (docs/driver-export-tables.md): entry 7 (a0, module, callback, user,
 * module, a5) calls callback(user, function, name, 0, 0, module, &stderr,
 * a5, module) for the module's function and returns 1; cuFFT's callback
 * stores the function in *user. Every cuFFT module seen held one function,
 * so what the driver does with several is unknown: ferry serves modules of
 * one function, which it lists on the vGPU's GPU, and refuses others in
 * one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/driver/cu.h"

typedef uintptr_t (*each_function_cb)(void *user, CUfunction fn, const char *name, uintptr_t zero1,
                                      uintptr_t zero2, CUmodule module, void *out_stream,
                                      void *a5, CUmodule module_again);

int ferry_cu_module_each_function(void *a0, CUmodule module, void *callback, void *user,
                                  CUmodule module2, void *a5) {
  (void)a0;
  unsigned count = 0;
  char *names = NULL;
  CUfunction fn = NULL;
  if (!callback || module2 != module) {
    ferry_cu_unsupported("entry 7 of the driver's private table TOOLS_MODULE with arguments "
                         "unlike cuFFT's");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUresult rc = ferry_cu_function_names(module, &names, &count);
  if (!rc && count != 1) {
    char what[160];
    snprintf(what, sizeof what, "entry 7 of the driver's private table TOOLS_MODULE on a module "
                                "of %u functions", count);
    rc = ferry_cu_unsupported(what);
  }
  const char *name = NULL; /* the function's own copy: it lives as long as the module */
  if (!rc) rc = cuModuleGetFunction(&fn, module, names);
  if (!rc) rc = cuFuncGetName(&name, fn);
  free(names);
  if (rc) return rc;
  each_function_cb cb;
  memcpy(&cb, &callback, sizeof cb);
  /* the arguments as the driver passes them, stderr's address included */
  cb(user, fn, name, 0, 0, module, (void *)&stderr, a5, module);
  return 1;
}
