/*
 * Parsing and printing of ferry server addresses. Users type these by hand
 * (FERRY_SERVER=tcp://gpu-box:7420/1, or the rCUDA form gpu-box@7420:1), so
 * every rejection names the part that is wrong instead of failing later at
 * connect time with a confusing resolver error.
 */
#include "transport.h"

#include <ctype.h>

#include "common/log.h"
#include <stdio.h>
#include <string.h>

/* GPU indexes beyond this are certainly typos, not real machines */
#define MAX_GPU_INDEX 4095

/* the address as typed is quoted cut (ferry_echo_url): a long one must
   not crowd out why it is bad */
static int fail(char *err, size_t errlen, const char *text, const char *why) {
  char shown[FERRY_ECHO_MAX + 4];
  if (err && errlen)
    snprintf(err, errlen, "bad server address '%s': %s", ferry_echo_url(text, shown, sizeof shown), why);
  return -1;
}

/* parses [0-9]+ up to `end`; -1 on no digits, non-digits or overflow past max */
static long parse_number(const char *p, const char *end, long max) {
  if (p == end) return -1;
  long v = 0;
  for (; p < end; p++) {
    if (!isdigit((unsigned char)*p)) return -1;
    v = v * 10 + (*p - '0');
    if (v > max) return -1;
  }
  return v;
}

static int host_char_ok(char c) {
  return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}
static int ipv6_char_ok(char c) {
  /* hex digits, colons, dots (v4-mapped) and a %zone suffix such as %eth0 */
  return isalnum((unsigned char)c) || c == ':' || c == '.' || c == '%';
}

/*
 * Reads the host at *pp: either [v6-literal] or a name/IPv4 made of
 * host_char_ok characters; stops before any other character.
 */
static int parse_host(const char **pp, struct ferry_url *url, const char *text, char *err,
                      size_t errlen) {
  const char *p = *pp, *start, *end;
  if (*p == '[') {
    start = p + 1;
    end = strchr(start, ']');
    if (!end) return fail(err, errlen, text, "'[' opens an IPv6 address that no ']' closes");
    for (const char *q = start; q < end; q++)
      if (!ipv6_char_ok(*q)) return fail(err, errlen, text, "invalid character in IPv6 address");
    if (end == start) return fail(err, errlen, text, "empty IPv6 address '[]'");
    *pp = end + 1;
  } else {
    start = p;
    end = p;
    while (*end && host_char_ok(*end)) end++;
    if (end == start) {
      if (*end) {
        char why[64];
        snprintf(why, sizeof why, "unexpected character '%c' where a host name belongs", *end);
        return fail(err, errlen, text, why);
      }
      return fail(err, errlen, text, "missing host name");
    }
    *pp = end;
  }
  size_t n = (size_t)(end - start);
  if (n >= sizeof url->host) return fail(err, errlen, text, "host name is too long");
  memcpy(url->host, start, n);
  url->host[n] = '\0';
  return 0;
}

static int set_scheme(struct ferry_url *url, const char *s, size_t n, const char *text, char *err,
                      size_t errlen) {
  if (n == 0) return fail(err, errlen, text, "missing scheme before '://' (use tcp://)");
  if (n >= sizeof url->scheme) return fail(err, errlen, text, "scheme is too long (use tcp://)");
  for (size_t i = 0; i < n; i++)
    if (!isalpha((unsigned char)s[i]) && !(i && isdigit((unsigned char)s[i])))
      return fail(err, errlen, text, "scheme must be letters, like tcp://");
  for (size_t i = 0; i < n; i++) url->scheme[i] = (char)tolower((unsigned char)s[i]);
  url->scheme[n] = '\0';
  return 0;
}

static int parse_port(const char *p, const char *end, struct ferry_url *url, const char *text,
                      char *err, size_t errlen) {
  if (p == end) return fail(err, errlen, text, "missing port number after ':'");
  /* port 0 is accepted: when listening it asks the kernel for a free port */
  long port = parse_number(p, end, 65535);
  if (port < 0) return fail(err, errlen, text, "port must be a number from 0 to 65535");
  url->port = (int)port;
  return 0;
}

static int parse_gpu(const char *p, const char *end, struct ferry_url *url, const char *text,
                     char *err, size_t errlen) {
  long gpu = parse_number(p, end, MAX_GPU_INDEX);
  if (gpu < 0) return fail(err, errlen, text, "GPU index must be a small non-negative number");
  url->gpu = (int)gpu;
  return 0;
}

static int parse_plain(const char *text, struct ferry_url *url, char *err, size_t errlen);

/* ?streams=N, the one query there is: FERRY_STREAMS for one server */
#define MAX_STREAMS 16
int ferry_url_parse(const char *text, struct ferry_url *url, char *err, size_t errlen) {
  const char *q = text ? strchr(text, '?') : NULL;
  if (!q) return parse_plain(text, url, err, errlen);
  char head[600];
  if ((size_t)(q - text) >= sizeof head) return fail(err, errlen, text, "address is too long");
  memcpy(head, text, (size_t)(q - text));
  head[q - text] = '\0';
  if (parse_plain(head, url, err, errlen)) return -1;
  if (strncmp(q + 1, "streams=", 8))
    return fail(err, errlen, text, "the only parameter after '?' is streams=N");
  long n = parse_number(q + 9, q + strlen(q), MAX_STREAMS);
  if (n < 1) return fail(err, errlen, text, "streams must be a count from 1 to 16");
  if (strcmp(url->scheme, "tcp")) return fail(err, errlen, text, "streams= applies to tcp:// only");
  url->streams = (int)n;
  return 0;
}

static int parse_plain(const char *text, struct ferry_url *url, char *err, size_t errlen) {
  memset(url, 0, sizeof *url);
  url->port = FERRY_DEFAULT_PORT;
  url->gpu = -1;
  if (!text || !*text) return fail(err, errlen, text ? text : "", "empty address");
  const char *sep = strstr(text, "://");
  if (!sep) return fail(err, errlen, text, "expected scheme://host[:port][/gpu], e.g. tcp://host:7420/0");
  if (set_scheme(url, text, (size_t)(sep - text), text, err, errlen)) return -1;
  if (!strcmp(url->scheme, "ib")) url->port = FERRY_DEFAULT_IB_PORT;
  const char *p = sep + 3;
  if (parse_host(&p, url, text, err, errlen)) return -1;
  if (*p == ':') {
    const char *q = p + 1, *end = q;
    while (*end && *end != '/') end++;
    if (parse_port(q, end, url, text, err, errlen)) return -1;
    p = end;
  }
  if (*p == '/') {
    p++;
    const char *end = p + strlen(p);
    if (end == p) return 0; /* a bare trailing slash names no GPU */
    return parse_gpu(p, end, url, text, err, errlen);
  }
  if (*p) {
    char why[80];
    snprintf(why, sizeof why, "unexpected '%.20s' after the host", p);
    return fail(err, errlen, text, why);
  }
  return 0;
}

int ferry_url_parse_rcuda(const char *text, const char *scheme, struct ferry_url *url, char *err,
                          size_t errlen) {
  memset(url, 0, sizeof *url);
  url->port = FERRY_DEFAULT_PORT;
  url->gpu = -1;
  if (!text || !*text) return fail(err, errlen, text ? text : "", "empty address");
  if (!scheme) scheme = "tcp";
  if (set_scheme(url, scheme, strlen(scheme), text, err, errlen)) return -1;
  if (!strcmp(url->scheme, "ib")) url->port = FERRY_DEFAULT_IB_PORT;
  const char *p = text;
  if (parse_host(&p, url, text, err, errlen)) return -1;
  if (*p == '@') {
    const char *q = p + 1, *end = q;
    while (*end && *end != ':') end++;
    if (parse_port(q, end, url, text, err, errlen)) return -1;
    p = end;
  }
  if (*p == ':') {
    p++;
    if (!*p) return fail(err, errlen, text, "missing GPU index after ':'");
    return parse_gpu(p, p + strlen(p), url, text, err, errlen);
  }
  if (*p) {
    char why[80];
    snprintf(why, sizeof why, "unexpected '%.20s' (expected host[@port][:gpu])", p);
    return fail(err, errlen, text, why);
  }
  return 0;
}

void ferry_url_format(const struct ferry_url *url, char *out, size_t n) {
  if (!n) return;
  int v6 = strchr(url->host, ':') != NULL;
  int len = snprintf(out, n, "%s://%s%s%s:%d", url->scheme, v6 ? "[" : "", url->host,
                     v6 ? "]" : "", url->port);
  if (url->gpu >= 0 && len >= 0 && (size_t)len < n)
    snprintf(out + len, n - (size_t)len, "/%d", url->gpu);
}
