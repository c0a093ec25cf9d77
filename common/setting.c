/*
 * Numbers from settings, read whole and strictly (setting.h says why).
 * Decimals are read by hand rather than by strtod, which also takes nan,
 * inf, hex and the program's locale's decimal comma.
 */
#include "setting.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "log.h"

static int digit(char c) { return c >= '0' && c <= '9'; }

/* digits[.digits][(e|E)[+|-]digits], all of text, times 10^shift (so that
   seconds become milliseconds without a rounding on the way); *nonzero: a
   digit other than 0 was seen (a value that underflows to 0 is not zero).
   0, or -1 */
static int parse_decimal(const char *text, int shift, double *out, int *nonzero) {
  const char *p = text;
  uint64_t mant = 0;
  long scale = 0; /* the value is mant * 10^scale */
  int any = 0, seen = 0;
  if (!p) return -1;
  for (int frac = 0;; p++) {
    if (*p == '.' && !frac) {
      frac = 1;
      continue;
    }
    if (!digit(*p)) break;
    any = 1;
    seen |= *p != '0';
    if (mant < 100000000000000000ull) { /* 18 significant digits; the rest only scale */
      mant = mant * 10 + (uint64_t)(*p - '0');
      scale -= frac;
    } else {
      scale += !frac;
    }
  }
  if (!any) return -1;
  if (*p == 'e' || *p == 'E') {
    p++;
    int neg = *p == '-';
    if (*p == '-' || *p == '+') p++;
    if (!digit(*p)) return -1;
    long e = 0;
    for (; digit(*p); p++)
      if (e < 100000) e = e * 10 + (*p - '0');
    scale += neg ? -e : e;
  }
  if (*p) return -1;
  scale += shift;
  double v = (double)mant;
  /* past 10^±400 a double is infinite or 0 anyway */
  for (long i = 0; i < scale && i < 400 && v != 0; i++) v *= 10;
  for (long i = 0; i > scale && i > -400 && v != 0; i--) v /= 10;
  if (scale <= -400) v = 0;
  if (scale >= 400 && v != 0) v = HUGE_VAL;
  *out = v;
  *nonzero = seen;
  return 0;
}

int ferry_parse_real(const char *text, double min, double max, double *out) {
  double v;
  int nonzero;
  /* v == v and v - v == 0: neither NaN nor infinite */
  if (parse_decimal(text, 0, &v, &nonzero) || v - v != 0 || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int ferry_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
  const char *p = text;
  unsigned base = 10;
  if (!p || !*p) return -1;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
    if (!*p) return -1;
  }
  uint64_t v = 0;
  for (; *p; p++) {
    unsigned d;
    if (digit(*p)) d = (unsigned)(*p - '0');
    else if (base == 16 && *p >= 'a' && *p <= 'f') d = (unsigned)(*p - 'a' + 10);
    else if (base == 16 && *p >= 'A' && *p <= 'F') d = (unsigned)(*p - 'A' + 10);
    else return -1;
    if (v > (UINT64_MAX - d) / base) return -1; /* overflow */
    v = v * base + d;
  }
  if (v < min || v > max) return -1;
  *out = v;
  return 0;
}

int ferry_parse_ms(const char *text, double max_s, int zero_ok, int *ms) {
  double m;
  int nonzero;
  if (max_s > INT_MAX / 1000) max_s = INT_MAX / 1000;
  if (parse_decimal(text, 3, &m, &nonzero) || m - m != 0 || m > max_s * 1000) return -1;
  if (!nonzero && !zero_ok) return -1;
  int v = (int)(m + 0.5);
  /* 0 means "never": a positive value must not round to it */
  *ms = v == 0 && nonzero ? 1 : v;
  return 0;
}

void ferry_setting_refused(const char *name, const char *value, const char *expected,
                           const char *fallback) {
  ferry_log("%s=%s ignored: expected %s; using %s", name, value, expected, fallback);
}

int ferry_env_uint(const char *name, uint64_t min, uint64_t max, uint64_t *out,
                   const char *expected, const char *fallback) {
  const char *e = getenv(name);
  if (!e || !*e) return 0;
  if (!ferry_parse_uint(e, min, max, out)) return 1;
  ferry_setting_refused(name, e, expected, fallback);
  return 0;
}

int ferry_env_ms(const char *name, double max_s, int zero_ok, int *ms, const char *expected,
                 const char *fallback) {
  const char *e = getenv(name);
  if (!e || !*e) return 0;
  if (!ferry_parse_ms(e, max_s, zero_ok, ms)) return 1;
  ferry_setting_refused(name, e, expected, fallback);
  return 0;
}
