/*
 * Just enough JSON reading for the ferry CLI to print a program's `status`
 * reply for people: find a member, an element, a string or a number. Values
 * are pointers into the text; nothing is allocated.
 */
#ifndef FERRY_JSON_LITE_H
#define FERRY_JSON_LITE_H

#include <stddef.h>

/* just past the value at v (leading blanks skipped), or NULL if malformed */
const char *jl_skip(const char *v);
/* the value of member `key` of the object at obj, or NULL */
const char *jl_get(const char *obj, const char *key);
/* the value of the i-th member of the object at obj, its key decoded into
   key (cut to n bytes), or NULL past the last */
const char *jl_member(const char *obj, int i, char *key, size_t n);
/* the i-th element of the array at arr, or NULL */
const char *jl_at(const char *arr, int i);
/* the string at v, unescaped into out (cut to n bytes): 0, or -1 when v is
   not a string */
int jl_str(const char *v, char *out, size_t n);
/* the number at v: 0, or -1 when v is not a number */
int jl_num(const char *v, double *out);

#endif
