/*
 * Room in a growing array: the doubling every table of the project needs,
 * written once.
 */
#ifndef FERRY_COMMON_GROW_H
#define FERRY_COMMON_GROW_H

#include <stddef.h>

/* room for `need` elements of `elem` bytes in *arr (capacity *cap,
   doubled as often as needed): 0, or -1 with *arr and *cap as they were */
int ferry_grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
