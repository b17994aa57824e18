/* The one way the C code reports why it refused: a message in the caller's buffer, and -1. */
#ifndef SOPERATOR_FAIL_H
#define SOPERATOR_FAIL_H

#include <stddef.h>

int soperator_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
