/*
 * A small JSON reader for the CLI (see json_lite.h): the CLI must not link
 * the shim, and the status reply is the only JSON it reads.
 */
#include "json_lite.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32 /* deeper input is refused rather than recursed into */

static const char *ws(const char *p) {
  while (p && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

static const char *skip_string(const char *p) {
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && !*++p) return NULL;
  return *p == '"' ? p + 1 : NULL;
}

static const char *skip(const char *p, int depth) {
  p = ws(p);
  if (!p || depth > MAX_DEPTH) return NULL;
  if (*p == '"') return skip_string(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        if (*p != '"' || !(p = ws(skip_string(p))) || *p != ':') return NULL;
        p++;
      }
      if (!(p = ws(skip(p, depth + 1)))) return NULL;
      if (*p == close) return p + 1;
      if (*p != ',') return NULL;
      p = ws(p + 1);
    }
  }
  const char *start = p;
  while (*p && strchr("+-.0123456789eEabcdfilnrstu", *p)) p++; /* numbers, true, false, null */
  return p > start ? p : NULL;
}

const char *jl_skip(const char *v) { return v ? skip(v, 0) : NULL; }

const char *jl_member(const char *obj, int i, char *key, size_t n) {
  const char *p = ws(obj);
  if (!p || *p != '{') return NULL;
  p = ws(p + 1);
  for (int k = 0; *p == '"'; k++) {
    const char *name = p;
    if (!(p = ws(skip_string(p))) || *p != ':') return NULL;
    const char *value = ws(p + 1);
    if (k == i) {
      if (jl_str(name, key, n)) return NULL;
      return value;
    }
    if (!(p = ws(jl_skip(value)))) return NULL;
    if (*p != ',') return NULL;
    p = ws(p + 1);
  }
  return NULL;
}

const char *jl_get(const char *obj, const char *key) {
  char name[64];
  const char *v;
  for (int i = 0; (v = jl_member(obj, i, name, sizeof name)); i++)
    if (!strcmp(name, key)) return v;
  return NULL;
}

const char *jl_at(const char *arr, int i) {
  const char *p = ws(arr);
  if (!p || *p != '[' || i < 0) return NULL;
  p = ws(p + 1);
  if (*p == ']') return NULL;
  for (int k = 0;; k++) {
    if (k == i) return p;
    if (!(p = ws(jl_skip(p))) || *p != ',') return NULL;
    p = ws(p + 1);
  }
}

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* appends code point c as UTF-8, if all of it fits */
static void put_utf8(char *out, size_t n, size_t *len, unsigned c) {
  char b[4];
  size_t k = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  if (k == 1) b[0] = (char)c;
  else if (k == 2) b[0] = (char)(0xc0 | c >> 6);
  else if (k == 3) b[0] = (char)(0xe0 | c >> 12);
  else b[0] = (char)(0xf0 | c >> 18);
  for (size_t i = 1; i < k; i++) b[i] = (char)(0x80 | ((c >> (6 * (k - 1 - i))) & 0x3f));
  if (*len + k < n) {
    memcpy(out + *len, b, k);
    *len += k;
  }
}

int jl_str(const char *v, char *out, size_t n) {
  const char *p = ws(v);
  if (!p || *p != '"' || !n || !skip_string(p)) return -1;
  size_t len = 0;
  for (p++; *p != '"'; p++) {
    unsigned c = (unsigned char)*p;
    if (c == '\\') {
      c = (unsigned char)*++p;
      switch (c) {
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'u': {
        int u = hex4(p + 1);
        if (u < 0) return -1;
        p += 4;
        c = (unsigned)u;
        if (c >= 0xd800 && c < 0xdc00 && p[1] == '\\' && p[2] == 'u') {
          int lo = hex4(p + 3);
          if (lo >= 0xdc00 && lo < 0xe000) {
            c = 0x10000 + ((c - 0xd800) << 10) + (unsigned)(lo - 0xdc00);
            p += 6;
          }
        }
        if (c >= 0xd800 && c < 0xe000) c = 0xfffd; /* a lone surrogate */
        put_utf8(out, n, &len, c);
        continue;
      }
      default: break; /* \" \\ \/ stand for themselves */
      }
    }
    if (len + 1 < n) out[len++] = (char)c;
  }
  out[len] = '\0';
  return 0;
}

int jl_num(const char *v, double *out) {
  const char *p = ws(v);
  if (!p || !(*p == '-' || (*p >= '0' && *p <= '9'))) return -1;
  char *end;
  *out = strtod(p, &end);
  return end > p ? 0 : -1;
}
