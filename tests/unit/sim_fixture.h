/*
 * What the simulation's unit tests share (test_sim.c with one device,
 * test_sim_multi.c with three): the driver table, a VMM allocation
 * property and a fat binary container.
 */
#ifndef FERRY_TEST_SIM_FIXTURE_H
#define FERRY_TEST_SIM_FIXTURE_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "executor/driver.h"

#define MiB (1ull << 20)
#define HINT 0x300000000000ull

static const struct ferry_driver *d;

static CUmemAllocationProp prop(void) {
  CUmemAllocationProp p = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                           .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  return p;
}

/* a fat binary container: all the simulation checks is the magic */
static const unsigned char fatbin[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};


#endif
