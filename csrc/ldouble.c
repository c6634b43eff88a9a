/* Long double arithmetic for INCRBYFLOAT and HINCRBYFLOAT.
 *
 * Redis computes these increments in C `long double` (80-bit extended on
 * x86-64) and prints the result with "%.17Lf", trimming trailing zeroes.
 * Rust has no 80-bit float, so to return byte-identical results we do the
 * same arithmetic here, exactly as Redis's string2ld/ld2string do. */
#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LONG_DOUBLE_CHARS 5 * 1024

/* Parse like Redis's string2ld. Returns 1 on success. */
static int parse_ld(const char *s, size_t len, long double *out) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    char *eptr;
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (memchr(s, '\0', len)) return 0;
    errno = 0;
    long double value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' ||
        (errno == ERANGE && (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        isnan(value))
        return 0;
    *out = value;
    return 1;
}

/* Format like Redis's ld2string in LD_STR_HUMAN mode. Returns the length,
 * or 0 if it does not fit. */
static int format_ld(long double value, char *buf, size_t len) {
    int l = snprintf(buf, len, "%.17Lf", value);
    if (l < 0 || (size_t)l + 1 > len) return 0;
    if (strchr(buf, '.') != NULL) {
        char *p = buf + l - 1;
        while (*p == '0') { p--; l--; }
        if (*p == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') { buf[0] = '0'; l = 1; }
    buf[l] = '\0';
    return l;
}

/* current + incr, both as strings. Returns:
 *  >0  length of the result written to out
 *  -1  current value is not a valid float
 *  -2  increment is not a valid float
 *  -3  result is NaN or infinite */
int kvstore_ld_add(const char *cur, size_t cur_len, const char *incr, size_t incr_len, char *out, size_t out_len) {
    long double a = 0, b;
    if (cur != NULL && !parse_ld(cur, cur_len, &a)) return -1;
    if (!parse_ld(incr, incr_len, &b)) return -2;
    long double r = a + b;
    if (isnan(r) || isinf(r)) return -3;
    int l = format_ld(r, out, out_len);
    return l > 0 ? l : -3;
}

/* ceill(value * scale) of a decimal string, as Redis converts a timeout in
 * seconds to milliseconds. Returns 0 with *out set, -1 when the string is
 * not a valid float, -2 when the value is infinite or the result does not
 * fit a long long. */
int kvstore_ld_scaled_ceil(const char *s, size_t len, double scale, long long *out) {
    long double v;
    if (!parse_ld(s, len, &v)) return -1;
    v *= (long double)scale;
    if (isinf(v) || v >= (long double)LLONG_MAX || v <= (long double)LLONG_MIN) return -2;
    *out = (long long)ceill(v);
    return 0;
}
