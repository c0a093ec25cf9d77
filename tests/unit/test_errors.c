/* Checks the error name/message table, the one-time warning of unsupported
 * calls, and the generated weak stubs: a stub answers cudaErrorNotSupported,
 * and a strong definition of the same name (here cudaDeviceReset, defined in
 * this file; in the library, the real implementations) replaces the stub. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda_profiler_api.h>

#include "shim/core/errors.h"

/* Strong definition: must win over the weak stub in the generated file. */
static int strong_reset_calls;
cudaError_t cudaDeviceReset(void)
{
    strong_reset_calls++;
    return cudaErrorNotReady;
}

/* Runs fn with stderr sent to a temporary file; returns what it wrote. */
static char captured[8192];
static const char *capture_stderr(void (*fn)(void))
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    fflush(stderr);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    fn();
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(captured, 1, sizeof(captured) - 1, tmp);
    captured[n] = '\0';
    fclose(tmp);
    return captured;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_known_names_and_strings(void **state)
{
    (void)state;
    assert_string_equal(cudaGetErrorName(cudaSuccess), "cudaSuccess");
    assert_string_equal(cudaGetErrorString(cudaSuccess), "no error");
    assert_string_equal(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
    assert_string_equal(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
    assert_string_equal(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
    assert_string_equal(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    assert_string_equal(cudaGetErrorName(cudaErrorNotSupported), "cudaErrorNotSupported");
    assert_string_equal(cudaGetErrorName(cudaErrorTensorMemoryLeak), "cudaErrorTensorMemoryLeak");
    assert_string_equal(cudaGetErrorName(cudaErrorInvalidResourceConfiguration),
                        "cudaErrorInvalidResourceConfiguration");
    assert_string_equal(cudaGetErrorName(cudaErrorUnknown), "cudaErrorUnknown");
    assert_string_equal(cudaGetErrorName(cudaErrorApiFailureBase), "cudaErrorApiFailureBase");
}

static void test_unrecognized_codes(void **state)
{
    (void)state;
    const int bad[] = {10, 11, 33, 99, 998, 1000, 9999, 10001, -1, 0x7fffffff};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_string_equal(cudaGetErrorName((cudaError_t)bad[i]), "unrecognized error code");
        assert_string_equal(cudaGetErrorString((cudaError_t)bad[i]), "unrecognized error code");
    }
}

/* Every code of the table: sorted (the lookup is a binary search), found by
 * its own code, name spelled like an enum value, message non-empty. */
static void test_table_consistent(void **state)
{
    (void)state;
    unsigned n = ferry_error_count();
    assert_int_equal(n, 134); /* cudaError values in the CUDA 13.0 headers */
    for (unsigned i = 0; i < n; i++) {
        cudaError_t c = ferry_error_code_at(i);
        if (i > 0)
            assert_true((int)ferry_error_code_at(i - 1) < (int)c);
        const char *name = cudaGetErrorName(c);
        const char *text = cudaGetErrorString(c);
        assert_true(strncmp(name, "cuda", 4) == 0);
        assert_string_not_equal(name, "unrecognized error code");
        assert_true(text[0] != '\0');
        assert_string_not_equal(text, "unrecognized error code");
        for (unsigned j = 0; j < i; j++)
            assert_string_not_equal(cudaGetErrorName(ferry_error_code_at(j)), name);
    }
}

static int flag_once;
static void call_unsupported_three_times(void)
{
    for (int i = 0; i < 3; i++)
        assert_int_equal(ferry_unsupported_call(&flag_once, "cudaFooBar"), 801);
}

static void test_unsupported_warns_once(void **state)
{
    (void)state;
    const char *out = capture_stderr(call_unsupported_three_times);
    assert_string_equal(out, "ferry: cudaFooBar is not supported by ferry; returning cudaErrorNotSupported\n");
    assert_int_equal(flag_once, 1);
}

static int flag_race;
static void *race_body(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        if (ferry_unsupported_call(&flag_race, "cudaRace") != 801)
            return (void *)1;
    return NULL;
}

static void race_threads(void)
{
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, race_body, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *ret;
        assert_int_equal(pthread_join(t[i], &ret), 0);
        assert_null(ret);
    }
}

static void test_unsupported_warns_once_across_threads(void **state)
{
    (void)state;
    const char *out = capture_stderr(race_threads);
    assert_int_equal(count_lines(out), 1);
    assert_non_null(strstr(out, "cudaRace"));
}

static void call_stubs(void)
{
    /* Generated weak stubs; called through their real prototypes, as a program would. */
    assert_int_equal(cudaGraphDestroy(NULL), cudaErrorNotSupported);
    assert_int_equal(cudaGraphDestroy(NULL), cudaErrorNotSupported);
    assert_int_equal(cudaProfilerStart(), cudaErrorNotSupported);
}

static void test_stubs_return_not_supported(void **state)
{
    (void)state;
    const char *out = capture_stderr(call_stubs);
    assert_string_equal(out,
                        "ferry: cudaGraphDestroy is not supported by ferry; returning cudaErrorNotSupported\n"
                        "ferry: cudaProfilerStart is not supported by ferry; returning cudaErrorNotSupported\n");
}

static void test_strong_definition_wins(void **state)
{
    (void)state;
    /* cudaDeviceReset is in the stub list; this file's definition must be the one called. */
    assert_int_equal(cudaDeviceReset(), cudaErrorNotReady);
    assert_int_equal(strong_reset_calls, 1);
    /* errors.c's strong cudaGetErrorString beats its stub as well. */
    assert_string_equal(cudaGetErrorString(cudaErrorNotSupported), "operation not supported");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_names_and_strings),
        cmocka_unit_test(test_unrecognized_codes),
        cmocka_unit_test(test_table_consistent),
        cmocka_unit_test(test_unsupported_warns_once),
        cmocka_unit_test(test_unsupported_warns_once_across_threads),
        cmocka_unit_test(test_stubs_return_not_supported),
        cmocka_unit_test(test_strong_definition_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
