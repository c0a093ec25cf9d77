/*
 * Numbers from settings (FERRY_* environment variables), read whole and
 * strictly: strtod and atof take "nan", "inf", hex, leading blanks, a
 * trailing "s" and the locale's decimal point, and atof reads garbage as 0,
 * so a mistyped value silently meant something else (nan waited for ever).
 * A value refused here is said in one line and the default is used.
 */
#ifndef FERRY_SETTING_H
#define FERRY_SETTING_H

#include <stdint.h>

/* all of text as a number in [min, max]: decimal digits with an optional
   fraction ("1.5", ".5", "5.") and exponent ("1e3"), nothing else (no sign,
   blanks, hex, nan or inf; '.' whatever the locale). 0, or -1 */
int ferry_parse_real(const char *text, double min, double max, double *out);

/* all of text as an integer in [min, max]: decimal, or hexadecimal after
   0x; no sign or blanks. 0, or -1 */
int ferry_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* all of text as seconds in [0, max_s] (at most INT_MAX / 1000; 0 refused
   unless zero_ok), in milliseconds to the nearest; a positive value under
   half a millisecond is 1 ms, so that only 0 means 0. 0, or -1 */
int ferry_parse_ms(const char *text, double max_s, int zero_ok, int *ms);

/* The environment variable `name`: 1 with its value in *out; 0 when it is
   unset or empty, or refused, which is said in one line: "NAME=VALUE
   ignored: expected <expected>; using <fallback>" */
int ferry_env_uint(const char *name, uint64_t min, uint64_t max, uint64_t *out,
                   const char *expected, const char *fallback);
int ferry_env_ms(const char *name, double max_s, int zero_ok, int *ms, const char *expected,
                 const char *fallback);
/* that line, for a setting with a rule of its own */
void ferry_setting_refused(const char *name, const char *value, const char *expected,
                           const char *fallback);

#endif
