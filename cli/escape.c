/*
 * Program-supplied text made harmless for a terminal (escape.h says why).
 * UTF-8 is decoded strictly (no overlong forms, surrogates or code points
 * past U+10FFFF), so that a byte a terminal might read as a control never
 * passes as part of a character.
 */
#include "escape.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* the length of the UTF-8 character at s and its code point, or 0 when s
   does not start one */
static size_t utf8_char(const unsigned char *s, uint32_t *cp) {
  unsigned char c = s[0];
  size_t len;
  uint32_t v, min;
  if (c >= 0xc2 && c <= 0xdf) len = 2, v = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) len = 3, v = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) len = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0; /* the terminating NUL included */
    v = v << 6 | (s[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return len;
}

/* characters that act on a terminal or on how a line reads: C1 controls
   (U+009B is CSI), and the format characters that reorder or break text */
static int harmful(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

char *cli_escape(char *out, size_t n, const char *in) {
  const unsigned char *s = (const unsigned char *)in;
  size_t o = 0;
  while (*s) {
    char piece[4 * 4 + 1];
    size_t plen, take = 0;
    uint32_t cp = 0;
    if (*s == '\\') {
      memcpy(piece, "\\\\", plen = 2), take = 1;
    } else if (*s >= 0x20 && *s < 0x7f) {
      piece[0] = (char)*s, plen = 1, take = 1;
    } else if (*s >= 0x80 && (take = utf8_char(s, &cp)) && !harmful(cp)) {
      memcpy(piece, s, plen = take);
    } else {
      /* one character's bytes, or the one byte that starts none */
      take = *s >= 0x80 && take ? take : 1;
      plen = 0;
      for (size_t i = 0; i < take; i++) plen += (size_t)snprintf(piece + plen, 5, "\\x%02x", s[i]);
    }
    if (o + plen >= n) break;
    memcpy(out + o, piece, plen);
    o += plen;
    s += take;
  }
  out[o] = '\0';
  return out;
}
