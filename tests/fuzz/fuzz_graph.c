/*
 * Fuzz harness: the graph node blob walk (protocol/graph.c), which reads
 * what graph_instantiate carries from a client. Checks besides the
 * sanitizers': a blob the walk accepts holds exactly the nodes it reported,
 * and writing those nodes again gives the same bytes (one encoding per
 * graph, so the recorder's copy replays as it came).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int rewrite(void *ctx, uint32_t index, const struct ferry_gnode *n) {
  struct ferry_gbuf *b = ctx;
  if (index != b->nnodes || ferry_graph_put(b, n)) {
    fprintf(stderr, "fuzz_graph: node %u of an accepted blob does not write back\n", index);
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy: a read past the blob is an ASan report */
  unsigned char *blob = malloc(size ? size : 1);
  if (!blob) return 0;
  memcpy(blob, data, size);
  int count = ferry_graph_walk(blob, size, NULL, NULL);
  struct ferry_gbuf b = {0};
  int again = ferry_graph_walk(blob, size, rewrite, &b);
  if (again != count) {
    fprintf(stderr, "fuzz_graph: the walk counted %d nodes, then %d\n", count, again);
    abort();
  }
  /* zero nodes: nothing is written back (a header alone or no bytes) */
  if (count > 0 && (b.len != size || memcmp(b.data, blob, size))) {
    fprintf(stderr, "fuzz_graph: %d nodes wrote back as other bytes\n", count);
    abort();
  }
  ferry_gbuf_free(&b);
  free(blob);
  return 0;
}
