/*
 * What the simulation reads from a module image: which kernels a cubin or
 * a PTX text declares, so that cuModuleGetFunction finds those and no
 * others (their CPU twins run them). A fat binary's members may be
 * compressed, so from a container any twin's name is taken, as before.
 * ferry_image_size has checked that the headers and sections lie inside
 * the image; every offset inside them is checked here.
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image.h"

#define SIM_MAX_IMAGE (4ull << 30)
#define SHT_SYMTAB 2u
#define SHT_NOBITS 8u
#define STT_FUNC 2u
#define ELF_SYM 24u /* Elf64_Sym */

struct names {
  char **v;
  size_t n, cap;
};


/* adds the first len bytes of s once; -1 when out of memory */
static int add_name(struct names *nm, const char *s, size_t len) {
  for (size_t i = 0; i < nm->n; i++)
    if (strlen(nm->v[i]) == len && memcmp(nm->v[i], s, len) == 0)
      return 0;
  if (nm->n == nm->cap) {
    size_t cap = nm->cap ? nm->cap * 2 : 8;
    char **v = realloc(nm->v, cap * sizeof *v);
    if (!v)
      return -1;
    nm->v = v;
    nm->cap = cap;
  }
  char *c = strndup(s, len);
  if (!c)
    return -1;
  nm->v[nm->n++] = c;
  return 0;
}

/* an ELF section as the parser needs it */
struct section {
  uint32_t name, type, link;
  uint64_t off, size, entsize;
};

struct elf {
  const unsigned char *p;
  uint64_t size, shoff, shent, shnum;
};

static int section(const struct elf *e, uint64_t i, struct section *s) {
  if (i >= e->shnum)
    return -1;
  const unsigned char *h = e->p + e->shoff + i * e->shent;
  *s = (struct section){ferry_u32_at(h), ferry_u32_at(h + 4), ferry_u32_at(h + 40), ferry_u64_at(h + 24), ferry_u64_at(h + 32),
                        ferry_u64_at(h + 56)};
  /* contents of NOBITS sections are not in the file */
  return s->type == SHT_NOBITS || s->off > e->size || s->size > e->size - s->off ? -1 : 0;
}

/* the NUL-terminated string at off of a string table, or NULL */
static const char *string_at(const struct elf *e, const struct section *strtab, uint64_t off,
                             size_t *len) {
  if (off >= strtab->size)
    return NULL;
  const char *s = (const char *)e->p + strtab->off + off;
  const char *nul = memchr(s, '\0', strtab->size - off);
  if (!nul)
    return NULL;
  *len = (size_t)(nul - s);
  return s;
}

/* STT_FUNC symbols of one symbol table */
static int symtab_names(const struct elf *e, const struct section *sym, struct names *nm) {
  struct section str;
  if (sym->entsize < ELF_SYM || section(e, sym->link, &str))
    return 0; /* unusable: no names from it */
  for (uint64_t i = 0; i < sym->size / sym->entsize; i++) {
    const unsigned char *s = e->p + sym->off + i * sym->entsize;
    size_t len;
    const char *name = string_at(e, &str, ferry_u32_at(s), &len);
    if ((s[4] & 0xf) == STT_FUNC && name && len && add_name(nm, name, len))
      return -1;
  }
  return 0;
}

static int elf_names(const unsigned char *p, uint64_t size, struct names *nm) {
  struct elf e = {p, size, ferry_u64_at(p + 40), ferry_u16_at(p + 58), ferry_u16_at(p + 60)};
  if (!e.shnum && e.shoff)
    e.shnum = ferry_u64_at(p + e.shoff + 32); /* extended numbering, as ferry_image_size reads it */
  struct section shstr, s;
  int have_shstr = section(&e, ferry_u16_at(p + 62), &shstr) == 0;
  for (uint64_t i = 0; i < e.shnum; i++) {
    if (section(&e, i, &s))
      continue;
    if (s.type == SHT_SYMTAB && symtab_names(&e, &s, nm))
      return -1;
    size_t len;
    const char *name = have_shstr ? string_at(&e, &shstr, s.name, &len) : NULL;
    if (name && len > 6 && strncmp(name, ".text.", 6) == 0 && add_name(nm, name + 6, len - 6))
      return -1;
  }
  return 0;
}

static int ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '%' || c == '.';
}
static int space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* `.entry name(` and `.visible .entry name (`: the text is NUL-terminated */
static int ptx_names(const char *text, struct names *nm) {
  for (const char *p = strstr(text, ".entry"); p; p = strstr(p, ".entry")) {
    int starts = p == text || space(p[-1]);
    p += 6;
    if (!starts || !space(*p))
      continue;
    while (space(*p))
      p++;
    size_t len = 0;
    while (ident_char(p[len]))
      len++;
    if (len && add_name(nm, p, len))
      return -1;
    p += len;
  }
  return 0;
}

void sim_image_names_free(char **names, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
}

CUresult sim_image_kernels(const void *image, char ***names, size_t *n, int *named) {
  uint64_t size;
  const char *kind;
  struct names nm = {0};
  *names = NULL;
  *n = 0;
  *named = 0;
  /* a wrapper is what cuModuleLoadFatBinary takes, not cuModuleLoadData */
  if (ferry_image_size(image, SIM_MAX_IMAGE, &size, &kind) || strcmp(kind, "wrapper") == 0)
    return CUDA_ERROR_INVALID_IMAGE;
  if (strcmp(kind, "fatbin") == 0)
    return CUDA_SUCCESS;
  if (strcmp(kind, "ptx") == 0 && !strstr(image, ".version"))
    return CUDA_ERROR_INVALID_PTX; /* text, but no PTX module */
  int rc = strcmp(kind, "ptx") == 0 ? ptx_names(image, &nm) : elf_names(image, size, &nm);
  if (rc) {
    sim_image_names_free(nm.v, nm.n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *names = nm.v;
  *n = nm.n;
  *named = 1;
  return CUDA_SUCCESS;
}

/* the line of text's offset at (1-based), for ptxas-like messages */
static unsigned line_of(const char *text, const char *at) {
  unsigned line = 1;
  for (const char *p = text; p < at; p++)
    line += *p == '\n';
  return line;
}

/* what the simulation can tell of a PTX text's form: a module header, and
   braces that close (a truncated or mangled text fails so, as with ptxas) */
CUresult sim_ptx_check(const char *text, char *why, size_t n) {
  if (!strstr(text, ".version") || !strstr(text, ".target")) {
    snprintf(why, n, "ptxas application ptx input, line 1; fatal   : Missing .version or .target directive");
    return CUDA_ERROR_INVALID_PTX;
  }
  long depth = 0;
  for (const char *p = text; *p; p++) {
    if (p[0] == '/' && p[1] == '/') { /* comments may hold anything */
      while (p[1] && p[1] != '\n')
        p++;
      continue;
    }
    depth += (*p == '{') - (*p == '}');
    if (depth < 0) {
      snprintf(why, n, "ptxas application ptx input, line %u; fatal   : Parsing error near '}': syntax error",
               line_of(text, p));
      return CUDA_ERROR_INVALID_PTX;
    }
  }
  if (depth) {
    snprintf(why, n, "ptxas application ptx input, line %u; fatal   : Parsing error near '': syntax error",
             line_of(text, text + strlen(text)));
    return CUDA_ERROR_INVALID_PTX;
  }
  return CUDA_SUCCESS;
}

/* `.func` declarations: `[.extern|.visible|.weak] .func [(ret)] name(`,
   each into defined or externs */
CUresult sim_ptx_funcs(const char *text, char ***defined, size_t *nd, char ***externs, size_t *ne) {
  struct names d = {0}, e = {0};
  int oom = 0;
  for (const char *p = strstr(text, ".func"); p && !oom; p = strstr(p, ".func")) {
    int starts = p == text || space(p[-1]);
    const char *line = p;
    while (line > text && line[-1] != '\n')
      line--;
    p += 5;
    if (!starts || !(space(*p) || *p == '('))
      continue;
    while (space(*p))
      p++;
    if (*p == '(') { /* the return value */
      const char *close = strchr(p, ')');
      if (!close)
        break;
      p = close + 1;
      while (space(*p))
        p++;
    }
    size_t len = 0;
    while (ident_char(p[len]))
      len++;
    if (!len)
      continue;
    /* .extern before .func on its line */
    const char *ext = strstr(line, ".extern");
    int is_extern = ext && ext < p;
    oom = add_name(is_extern ? &e : &d, p, len);
    p += len;
  }
  if (oom) {
    sim_image_names_free(d.v, d.n);
    sim_image_names_free(e.v, e.n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *defined = d.v, *nd = d.n, *externs = e.v, *ne = e.n;
  return CUDA_SUCCESS;
}
