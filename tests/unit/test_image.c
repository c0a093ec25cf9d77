/*
 * ferry_image_size (common/image.c) on images nvcc made (fat binary,
 * cubin, PTX, and a wrapper around the fat binary) and on hand-made
 * malformed ones: every answer must be the image's exact extent, or -1,
 * without a read past max.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/image.h"
#include "image_files.h"

/* the image with exactly max readable bytes: a copy in a buffer of that size */
static int size_within(const void *image, uint64_t max, uint64_t *size, const char **kind) {
  unsigned char *copy = malloc(max ? max : 1);
  memcpy(copy, image, max);
  int rc = ferry_image_size(copy, max, size, kind);
  free(copy);
  return rc;
}

static void put16(unsigned char *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static void fatbin_is_header_plus_payload(void **state) {
  (void)state;
  uint64_t len, size = 0;
  const char *kind = NULL;
  unsigned char *fb = slurp("kernels.fatbin", &len);
  assert_int_equal(size_within(fb, len, &size, &kind), 0);
  assert_int_equal(size, len);
  assert_string_equal(kind, "fatbin");
  assert_int_equal(ferry_image_size(fb, UINT64_MAX, &size, &kind), 0); /* max only bounds */
  assert_int_equal(size, len);
  assert_int_equal(size_within(fb, len - 1, &size, &kind), -1);
  assert_int_equal(size_within(fb, 15, &size, &kind), -1); /* not even the header */
  /* sizes that overflow, a header smaller than itself */
  unsigned char h[16];
  memcpy(h, fb, 16);
  put64(h + 8, UINT64_MAX - 8);
  assert_int_equal(ferry_image_size(h, UINT64_MAX, &size, &kind), -1);
  put64(h + 8, 0);
  put16(h + 6, 8);
  assert_int_equal(ferry_image_size(h, 16, &size, &kind), -1);
  put16(h + 6, 16);
  assert_int_equal(ferry_image_size(h, 16, &size, &kind), 0);
  assert_int_equal(size, 16);
  free(fb);
}

static void wrapper_gives_its_container(void **state) {
  (void)state;
  uint64_t len, size = 0;
  const char *kind = NULL;
  unsigned char *fb = slurp("kernels.fatbin", &len);
  struct {
    int magic, version;
    const unsigned long long *data;
    void *filename_or_fatbins;
  } w = {(int)FERRY_WRAPPER_MAGIC, 1, (const unsigned long long *)(void *)fb, NULL};
  assert_int_equal(ferry_image_size(&w, len, &size, &kind), 0);
  assert_int_equal(size, len);
  assert_string_equal(kind, "wrapper");
  assert_int_equal(ferry_image_size(&w, len - 1, &size, &kind), -1); /* the container > max */
  assert_int_equal(ferry_image_size(&w, 12, &size, &kind), -1);      /* the wrapper > max */
  w.data = NULL;
  assert_int_equal(ferry_image_size(&w, len, &size, &kind), -1);
  static const unsigned long long not_a_container[2] = {0x1234};
  w.data = not_a_container;
  assert_int_equal(ferry_image_size(&w, len, &size, &kind), -1);
  free(fb);
}

static void cubin_spans_headers_and_sections(void **state) {
  (void)state;
  uint64_t len, size = 0;
  const char *kind = NULL;
  unsigned char *elf = slurp("kernels.cubin", &len);
  assert_int_equal(size_within(elf, len, &size, &kind), 0);
  assert_int_equal(size, len);
  assert_string_equal(kind, "cubin");
  assert_int_equal(size_within(elf, len - 1, &size, &kind), -1);
  assert_int_equal(size_within(elf, 40, &size, &kind), -1); /* a truncated ELF header */
  free(elf);
}

/* a minimal ELF64: header, then n section headers at 64 */
static unsigned char *make_elf(unsigned n, uint64_t *len) {
  *len = 64 + 64ull * n + 32;
  unsigned char *p = calloc(1, *len);
  memcpy(p, "\177ELF", 4);
  p[4] = 2;
  p[5] = 1;
  put64(p + 40, 64);  /* e_shoff */
  put16(p + 58, 64);  /* e_shentsize */
  put16(p + 60, (uint16_t)n);
  for (unsigned i = 1; i < n; i++) { /* each section's 32 bytes after the headers */
    put32(p + 64 + 64 * i + 4, 1);   /* PROGBITS */
    put64(p + 64 + 64 * i + 24, 64 + 64ull * n);
    put64(p + 64 + 64 * i + 32, 32);
  }
  return p;
}

static void malformed_cubins_are_refused(void **state) {
  (void)state;
  uint64_t len, size = 0;
  const char *kind = NULL;
  unsigned char *p = make_elf(3, &len);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), 0);
  assert_int_equal(size, len);
  /* a section whose bytes lie past max, or wrap around */
  put64(p + 64 + 64 * 2 + 24, len);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  put64(p + 64 + 64 * 2 + 24, 64);
  put64(p + 64 + 64 * 2 + 32, UINT64_MAX - 32);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  /* unless it is NOBITS: then it has no bytes in the file */
  put32(p + 64 + 64 * 2 + 4, 8);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), 0);
  assert_int_equal(size, len);
  /* section headers past max, smaller than a section header, ELF32, big endian */
  put16(p + 60, 200);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  put16(p + 60, 3);
  put16(p + 58, 40);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  put16(p + 58, 64);
  p[4] = 1;
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  p[4] = 2;
  p[5] = 2;
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  p[5] = 1;
  /* program headers past max, or overflowing */
  put64(p + 32, len - 10);
  put16(p + 54, 56);
  put16(p + 56, 1);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  put64(p + 32, UINT64_MAX - 20);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  put16(p + 56, 0);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), 0);
  free(p);
}

/* e_shnum 0 with section headers: the count is section 0's sh_size */
static void cubin_with_extended_section_count(void **state) {
  (void)state;
  uint64_t len, size = 0;
  const char *kind = NULL;
  unsigned char *p = make_elf(3, &len);
  put16(p + 60, 0);
  put64(p + 64 + 32, 3);
  assert_int_equal(ferry_image_size(p, len, &size, &kind), 0);
  assert_int_equal(size, len);
  put64(p + 64 + 32, 1ull << 40); /* a count far past max */
  assert_int_equal(ferry_image_size(p, len, &size, &kind), -1);
  free(p);
}

static void ptx_is_text_up_to_its_nul(void **state) {
  (void)state;
  uint64_t len, size = 0;
  const char *kind = NULL;
  unsigned char *ptx = slurp("kernels.ptx", &len);
  assert_int_equal(size_within(ptx, len + 1, &size, &kind), 0);
  assert_int_equal(size, len + 1);
  assert_string_equal(kind, "ptx");
  assert_int_equal(size_within(ptx, len, &size, &kind), -1); /* no NUL within max */
  free(ptx);
  assert_int_equal(ferry_image_size("x", 2, &size, &kind), 0); /* shorter than a magic */
  assert_int_equal(size, 2);
  assert_int_equal(ferry_image_size("", 1, &size, &kind), -1);
  assert_int_equal(ferry_image_size("\x01\x02 binary", 10, &size, &kind), -1);
  assert_int_equal(ferry_image_size(".version\x80", 10, &size, &kind), -1);
}

static void nothing_to_measure(void **state) {
  (void)state;
  uint64_t size = 7;
  const char *kind = "unchanged";
  assert_int_equal(ferry_image_size(NULL, 100, &size, &kind), -1);
  assert_int_equal(ferry_image_size("abc", 0, &size, &kind), -1);
  assert_int_equal(size, 7);
  assert_string_equal(kind, "unchanged");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fatbin_is_header_plus_payload),
      cmocka_unit_test(wrapper_gives_its_container),
      cmocka_unit_test(cubin_spans_headers_and_sections),
      cmocka_unit_test(malformed_cubins_are_refused),
      cmocka_unit_test(cubin_with_extended_section_count),
      cmocka_unit_test(ptx_is_text_up_to_its_nul),
      cmocka_unit_test(nothing_to_measure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
