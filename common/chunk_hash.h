/*
 * The hash of one piece of device memory, for migration's change check
 * (the mem_hash call): the same bytes must hash the same on any GPU and in
 * the CPU simulation, so it is defined once, here, and compiles both as C11
 * and inside nvcc's .cu files (executor/hash_kernel.cu).
 *
 * Words w_i are the piece's 8-byte little-endian words, the last one
 * zero-padded; h = sum of mix64(w_i + (i + 1) * golden) mod 2^64; the hash is
 * mix64(h ^ len). The sum is commutative, so a GPU block may add its
 * threads' partial sums in any order; len keeps zero padding apart from
 * real zero bytes.
 */
#ifndef FERRY_CHUNK_HASH_H
#define FERRY_CHUNK_HASH_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define FERRY_HD __host__ __device__
#else
#define FERRY_HD
#endif

/* full words are loaded in host order below (and a GPU is little endian) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ferry_chunk_hash assumes a little-endian host"
#endif

/* the mem_hash kernel: its name in the PTX, and its block size, which its
   reduction is written for (one block per piece) */
#define FERRY_HASH_KERNEL "ferry_hash_pieces"
#define FERRY_HASH_THREADS 256

/* the splitmix64 finalizer */
static inline FERRY_HD uint64_t ferry_mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ull;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z;
}

/* word i's term of the sum */
static inline FERRY_HD uint64_t ferry_hash_term(uint64_t w, uint64_t i) {
  return ferry_mix64(w + (i + 1) * 0x9E3779B97F4A7C15ull);
}

/* the last n (1..7) bytes, little endian, zero-padded to a word */
static inline FERRY_HD uint64_t ferry_hash_tail(const unsigned char *p, uint64_t n) {
  uint64_t w = 0;
  for (uint64_t k = 0; k < n; k++)
    w |= (uint64_t)p[k] << (8 * k);
  return w;
}

static inline FERRY_HD uint64_t ferry_hash_final(uint64_t sum, uint64_t len) {
  return ferry_mix64(sum ^ len);
}

/* the hash of len bytes at p, on the CPU (tests, the simulation's twin) */
static inline uint64_t ferry_chunk_hash(const void *p, uint64_t len) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t n = len / 8, sum = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t w;
    memcpy(&w, b + 8 * i, 8);
    sum += ferry_hash_term(w, i);
  }
  if (len % 8)
    sum += ferry_hash_term(ferry_hash_tail(b + 8 * n, len % 8), n);
  return ferry_hash_final(sum, len);
}

#endif
