/*
 * fuzz_records.c - libFuzzer target for the small decoders added with the
 * collective's warm restart and the elastic donation: the restart image's
 * remote records (remote_record_check, node/remote/remote_restart.c) and the
 * readers of kernel text (node/elastic/psi.c: PSI, /proc/meminfo,
 * /proc/self/cgroup), and the restart image's NBD records (an export's,
 * nbd_record_parse; a connection handed over, nbd_conn_record_parse). The
 * first byte picks the decoder; none may read out of bounds, and what they
 * accept must be within their stated limits.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/elastic/elastic_int.h"
#include "node/nbd/nbd.h"
#include "node/remote/remote.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, out[64];
	uint64_t a = 0, b = 0;

	if (size < 4)
		return 0;
	switch (data[0] % 7) {
	case 5: { /* an export's record (an exact-size copy) */
		struct nbd_saved s;
		uint8_t *rec = malloc(size - 1);

		if (!rec)
			return 0;
		memcpy(rec, data + 1, size - 1);
		if (!nbd_record_parse(rec, size - 1, &s))
			fuzz_assert(s.size && s.size % 4096 == 0 && s.backing <= 1 && s.name[0] &&
				    strlen(s.name) < sizeof(s.name) && s.maps > rec &&
				    s.maps <= rec + size - 1);
		free(rec);
		return 0;
	}
	case 6: { /* a connection's record */
		struct nbd_conn_saved s;
		uint8_t *rec = malloc(size - 1);

		if (!rec)
			return 0;
		memcpy(rec, data + 1, size - 1);
		if (!nbd_conn_record_parse(rec, size - 1, &s))
			fuzz_assert(s.fd >= 3 && s.unread == rec + 16 &&
				    16 + (size_t)s.unread_len == size - 1);
		free(rec);
		return 0;
	}
	case 0: { /* a remote record: tag, self, then the record (an exact-size copy) */
		uint16_t tag = (uint16_t)(0x5200 | (data[1] & 7));
		uint8_t *rec = malloc(size - 3);

		if (!rec)
			return 0;
		memcpy(rec, data + 3, size - 3);
		(void)remote_record_check(tag, rec, size - 3, data[2] % 66);
		free(rec);
		return 0;
	}
	default:
		break;
	}
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	switch (data[0] % 7) {
	case 1:
		(void)psi_parse_some(text, &a);
		break;
	case 2:
		if (!psi_parse_meminfo(text, &a, &b))
			fuzz_assert(a % 1024 == 0 && b % 1024 == 0);
		break;
	case 3:
		if (!psi_parse_cgroup(text, "0::", out, sizeof(out)))
			fuzz_assert(strlen(out) < sizeof(out) && out[0] == '/' &&
				    !strstr(out, "/.."));
		break;
	case 4:
		if (!psi_parse_cgroup(text, ":memory:", out, sizeof(out)))
			fuzz_assert(strlen(out) < sizeof(out) && out[0] == '/' &&
				    !strstr(out, "/.."));
		break;
	}
	free(text);
	return 0;
}
