/* Handle tables: stale and foreign handles are refused, ids are reused safely. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>

#include "common/handles.h"

static void add_get_remove(void **state) {
  (void)state;
  struct ferry_handles h;
  ferry_handles_init(&h);
  int a, b;
  uint64_t ha = ferry_handle_add(&h, &a), hb = ferry_handle_add(&h, &b);
  assert_true(ha && hb && ha != hb);
  assert_true(ha > 2 && hb > 2); /* never NULL, cudaStreamLegacy or cudaStreamPerThread */
  assert_ptr_equal(ferry_handle_get(&h, ha), &a);
  assert_ptr_equal(ferry_handle_get(&h, hb), &b);
  assert_true(ferry_handle_id(ha) >= FERRY_HANDLE_FIRST_ID);
  assert_true(ferry_handle_id(ha) != ferry_handle_id(hb));
  assert_ptr_equal(ferry_handle_remove(&h, ha), &a);
  assert_null(ferry_handle_get(&h, ha));    /* stale */
  assert_null(ferry_handle_remove(&h, ha)); /* double destroy */
  /* the slot is reused, but the old handle stays dead */
  int c;
  uint64_t hc = ferry_handle_add(&h, &c);
  assert_int_equal(ferry_handle_id(hc), ferry_handle_id(ha));
  assert_true(hc != ha);
  assert_null(ferry_handle_get(&h, ha));
  assert_ptr_equal(ferry_handle_get(&h, hc), &c);
  ferry_handles_destroy(&h);
}

static void garbage_values(void **state) {
  (void)state;
  struct ferry_handles h;
  ferry_handles_init(&h);
  int a;
  uint64_t ha = ferry_handle_add(&h, &a);
  assert_null(ferry_handle_get(&h, 0));
  assert_null(ferry_handle_get(&h, 1));
  assert_null(ferry_handle_get(&h, (uint64_t)(uintptr_t)&a)); /* a real pointer */
  assert_null(ferry_handle_get(&h, ha + 1));                    /* index out of range */
  ferry_handles_destroy(&h);
}

static int is_odd(void *obj, void *ctx) {
  (void)ctx;
  return *(int *)obj % 2;
}

static void remove_if(void **state) {
  (void)state;
  struct ferry_handles h;
  ferry_handles_init(&h);
  int v[100];
  uint64_t hv[100];
  for (int i = 0; i < 100; i++) {
    v[i] = i;
    hv[i] = ferry_handle_add(&h, &v[i]);
  }
  assert_int_equal(ferry_handles_remove_if(&h, is_odd, NULL, NULL), 50);
  for (int i = 0; i < 100; i++) {
    if (i % 2) assert_null(ferry_handle_get(&h, hv[i]));
    else assert_ptr_equal(ferry_handle_get(&h, hv[i]), &v[i]);
  }
  ferry_handles_destroy(&h);
}

/* a destroyed handle's wire id is not reused before its destroy reached
   the server (ferry_handle_release): an object created meanwhile gets another */
static void take_holds_the_id(void **state) {
  (void)state;
  struct ferry_handles h;
  ferry_handles_init(&h);
  int a, b, c;
  uint64_t ha = ferry_handle_add(&h, &a);
  assert_ptr_equal(ferry_handle_take(&h, ha), &a);
  assert_null(ferry_handle_get(&h, ha)); /* gone at once */
  uint64_t hb = ferry_handle_add(&h, &b);
  assert_int_not_equal(ferry_handle_id(hb), ferry_handle_id(ha));
  ferry_handle_release(&h, ha);
  uint64_t hc = ferry_handle_add(&h, &c);
  assert_int_equal(ferry_handle_id(hc), ferry_handle_id(ha)); /* free again */
  assert_true(hc != ha);                                       /* a new generation */
  assert_null(ferry_handle_get(&h, ha));
  ferry_handles_destroy(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(add_get_remove),
      cmocka_unit_test(garbage_values),
      cmocka_unit_test(remove_if),
      cmocka_unit_test(take_holds_the_id),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
