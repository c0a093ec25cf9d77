/*
 * Text that comes from a program's control socket (names, errors, URLs,
 * `where`...), made harmless for the terminal the CLI prints to: a user's
 * program must not be able to write escape sequences into the terminal of
 * whoever runs `ferry ls` (root, a scheduler's operator).
 */
#ifndef FERRY_CLI_ESCAPE_H
#define FERRY_CLI_ESCAPE_H

#include <stddef.h>

/* in, escaped, into out (n > 0 bytes, always terminated; cut before an
   escape that does not fit). Printable ASCII and printable UTF-8 stay as
   they are; a backslash is doubled; every byte of a control character (C0,
   DEL, C1), of a bidirectional or line-separator format character, or of
   what is not UTF-8 becomes \xNN. Returns out. */
char *cli_escape(char *out, size_t n, const char *in);

#endif
