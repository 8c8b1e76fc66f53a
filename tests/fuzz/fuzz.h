/*
 * fuzz.h - what every libFuzzer target in tests/fuzz/ shares: the entry
 * point libFuzzer calls, and fuzz_assert, which traps (no message, no
 * stdio) so libFuzzer reports the input that broke a promise as a crash.
 */
#ifndef RAMSTER_FUZZ_H
#define RAMSTER_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* One input of size bytes. @return 0 (libFuzzer's other values are unused here). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_assert(c)                                                                             \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

#endif /* RAMSTER_FUZZ_H */
