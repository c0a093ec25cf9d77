/* The driver front end's generated tables (gen_cu.sh makes them from the
   lists gen_symbols.sh took from the CUDA toolkit). */
#ifndef FERRY_CU_TABLES_H
#define FERRY_CU_TABLES_H

struct ferry_cu_export {
  const char *name;
  void *fn;   /* the real definition, or the weak stub that refuses */
  void *stub; /* the stub: fn == stub means ferry does not serve it */
};
struct ferry_cu_proc {
  const char *name; /* as cuGetProcAddress is asked, without suffix */
  int version;      /* the CUDA version since which the signature holds */
  int per_thread;   /* the _ptds/_ptsz variant */
  const char *export_name;
};
struct ferry_cu_error {
  int value;
  const char *name;
};

extern const struct ferry_cu_export ferry_cu_exports[]; /* sorted by name */
extern const unsigned ferry_cu_nexports;
extern const struct ferry_cu_proc ferry_cu_procs[]; /* by name, variant, then version */
extern const unsigned ferry_cu_nprocs;
extern const struct ferry_cu_error ferry_cu_errors[];
extern const unsigned ferry_cu_nerrors;

/* a weak stub's one line per name; CUDA_ERROR_NOT_SUPPORTED */
int ferry_cu_unsupported_call(int *warned, const char *name);

#endif
