/*
 * The extent of a module image (image.h). Every read is checked against
 * max first, and every sum of header fields against overflow, so that a
 * malformed image is refused rather than read past its end.
 */
#include "common/image.h"

#include <stddef.h>
#include <string.h>

#define ELF_HEADER 64u  /* Elf64_Ehdr */
#define ELF_SHDR 64u    /* Elf64_Shdr */
#define ELF_PHDR 56u    /* Elf64_Phdr */
#define SHT_NOBITS 8u
#define PTX_PREFIX 16u  /* bytes of the start that must be printable */


/* off + n * each, or -1 when it overflows or ends past max */
static int span_end(uint64_t off, uint64_t n, uint64_t each, uint64_t max, uint64_t *end) {
  if (each && n > UINT64_MAX / each)
    return -1;
  uint64_t len = n * each;
  if (off > UINT64_MAX - len || off + len > max)
    return -1;
  *end = off + len;
  return 0;
}

static int fatbin_size(const unsigned char *p, uint64_t max, uint64_t *size) {
  if (max < 16)
    return -1;
  uint16_t header = ferry_u16_at(p + 6);
  uint64_t fat = ferry_u64_at(p + 8);
  if (header < 16)
    return -1;
  return span_end(header, fat, 1, max, size);
}

/* the section count, which ELF keeps in section 0's sh_size when e_shnum
   cannot hold it */
static int elf_shnum(const unsigned char *p, uint64_t max, uint64_t shoff, uint64_t *n) {
  *n = ferry_u16_at(p + 60);
  if (*n || !shoff)
    return 0;
  uint64_t end;
  if (span_end(shoff, 1, ELF_SHDR, max, &end))
    return -1;
  *n = ferry_u64_at(p + shoff + 32);
  return 0;
}

/* widens *end to cover [off, off + n * each); -1 past max */
static int cover(uint64_t *end, uint64_t off, uint64_t n, uint64_t each, uint64_t max) {
  uint64_t e;
  if (span_end(off, n, each, max, &e))
    return -1;
  if (e > *end)
    *end = e;
  return 0;
}

static int elf_size(const unsigned char *p, uint64_t max, uint64_t *size) {
  if (max < ELF_HEADER || p[4] != 2 /* ELFCLASS64 */ || p[5] != 1 /* little endian */)
    return -1;
  uint64_t phoff = ferry_u64_at(p + 32), shoff = ferry_u64_at(p + 40);
  uint64_t phnum = ferry_u16_at(p + 56), phent = ferry_u16_at(p + 54), shent = ferry_u16_at(p + 58), shnum;
  uint64_t end = ELF_HEADER;
  if ((phnum && phent < ELF_PHDR) || elf_shnum(p, max, shoff, &shnum) ||
      (shnum && shent < ELF_SHDR))
    return -1;
  if ((phnum && cover(&end, phoff, phnum, phent, max)) ||
      (shnum && cover(&end, shoff, shnum, shent, max)))
    return -1;
  /* the section headers are inside max now */
  for (uint64_t i = 0; i < shnum; i++) {
    const unsigned char *sh = p + shoff + i * shent;
    if (ferry_u32_at(sh + 4) != SHT_NOBITS && cover(&end, ferry_u64_at(sh + 24), ferry_u64_at(sh + 32), 1, max))
      return -1;
  }
  *size = end;
  return 0;
}

static int printable(unsigned char c) {
  return (c >= 0x20 && c < 0x7f) || c == '\t' || c == '\n' || c == '\r';
}

static int ptx_size(const unsigned char *p, uint64_t max, uint64_t *size) {
  const unsigned char *nul = memchr(p, '\0', max > SIZE_MAX ? SIZE_MAX : (size_t)max);
  if (!nul || nul == p)
    return -1;
  uint64_t len = (uint64_t)(nul - p);
  for (uint64_t i = 0; i < len && i < PTX_PREFIX; i++)
    if (!printable(p[i]))
      return -1;
  *size = len + 1;
  return 0;
}

/* the wrapper's layout on LP64: int magic, int version, then the pointer */
static int wrapper_size(const unsigned char *p, uint64_t max, uint64_t *size) {
  const unsigned char *data;
  if (max < 8 + sizeof data)
    return -1;
  memcpy(&data, p + 8, sizeof data);
  if (!data || ferry_u32_at(data) != FERRY_FATBIN_MAGIC)
    return -1;
  return fatbin_size(data, max, size);
}

int ferry_image_size(const void *image, uint64_t max, uint64_t *size, const char **kind) {
  const unsigned char *p = image;
  uint64_t n = 0;
  const char *k = NULL;
  int rc = -1;
  if (!p || !size || !kind || max == 0)
    return -1;
  uint32_t magic = max >= 4 ? ferry_u32_at(p) : 0;
  if (magic == FERRY_FATBIN_MAGIC)
    rc = fatbin_size(p, max, &n), k = "fatbin";
  else if (magic == FERRY_WRAPPER_MAGIC)
    rc = wrapper_size(p, max, &n), k = "wrapper";
  else if (max >= 4 && memcmp(p, "\177ELF", 4) == 0)
    rc = elf_size(p, max, &n), k = "cubin";
  else
    rc = ptx_size(p, max, &n), k = "ptx";
  if (rc)
    return -1;
  *size = n;
  *kind = k;
  return 0;
}
