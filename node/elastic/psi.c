/*
 * psi.c - what the elastic controller reads (elastic_int.h): the memory
 * stall of the host (/proc/pressure/memory) and of the node's own cgroup
 * (memory.pressure), MemAvailable, and the room below the cgroup's
 * memory.max, and the stall a second between two readings. Parsers take
 * text, so the unit tests feed them files' bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/elastic/elastic_int.h"

int psi_parse_some(const char *text, uint64_t *us)
{
	const char *p = strstr(text, "some ");
	char *end;

	if (!p || (p != text && p[-1] != '\n'))
		return -EINVAL;
	p = strstr(p, "total=");
	if (!p)
		return -EINVAL;
	errno = 0;
	*us = strtoull(p + 6, &end, 10);
	if (errno || end == p + 6 || (*end && *end != '\n'))
		return -EINVAL;
	return 0;
}

/* "Key:   N kB" in meminfo text. */
static int meminfo_kb(const char *text, const char *key, uint64_t *bytes)
{
	size_t n = strlen(key);
	const char *p = text;
	char *end;
	uint64_t kb;

	while (p && *p) {
		if (!strncmp(p, key, n) && p[n] == ':') {
			errno = 0;
			kb = strtoull(p + n + 1, &end, 10);
			if (errno || end == p + n + 1 || strncmp(end, " kB", 3) ||
			    kb > (UINT64_MAX >> 10))
				return -EINVAL;
			*bytes = kb << 10;
			return 0;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -EINVAL;
}

int psi_parse_meminfo(const char *text, uint64_t *avail, uint64_t *total)
{
	if (meminfo_kb(text, "MemAvailable", avail) || meminfo_kb(text, "MemTotal", total))
		return -EINVAL;
	return 0;
}

int psi_parse_cgroup(const char *text, const char *prefix, char *out, size_t len)
{
	size_t n = strlen(prefix);
	const char *p = text, *e;

	/* "0::PATH" (cgroup v2), "N:memory:PATH" (v1): prefix is "0::" or ":memory:" */
	while (p && *p) {
		const char *at = prefix[0] == ':' ? strchr(p, ':') : p;

		if (at && (!strchr(p, '\n') || at < strchr(p, '\n')) && !strncmp(at, prefix, n) &&
		    at[n] == '/') {
			p = at + n;
			e = strchr(p, '\n');
			if (!e)
				e = p + strlen(p);
			if ((size_t)(e - p) >= len)
				return -EINVAL;
			memcpy(out, p, (size_t)(e - p));
			out[e - p] = 0;
			if (strstr(out, "/.."))
				return -EINVAL; /* never above /sys/fs/cgroup */
			return 0;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -EINVAL;
}

/* A small file into buf (NUL-terminated). @return 0 or -errno. */
static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

void psi_source_init(struct psi_source *src)
{
	char text[1024], path[400];

	src->cg[0] = 0;
	/* the unified hierarchy (cgroup v2), else v1's memory controller */
	src->v1 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) != 0;
	if (read_small("/proc/self/cgroup", text, sizeof(text)) ||
	    psi_parse_cgroup(text, src->v1 ? ":memory:" : "0::", path, sizeof(path)) ||
	    !strcmp(path, "/"))
		return;
	snprintf(src->cg, sizeof(src->cg), "/sys/fs/cgroup%s%s", src->v1 ? "/memory" : "", path);
	if (access(src->cg, R_OK))
		src->cg[0] = 0;
}

/* A cgroup's number file ("max": UINT64_MAX). @return 0 or -errno. */
static int read_cg_num(const struct psi_source *src, const char *name, uint64_t *v)
{
	char path[600], text[64];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", src->cg, name);
	rc = read_small(path, text, sizeof(text));
	if (rc)
		return rc;
	if (!strncmp(text, "max", 3)) {
		*v = UINT64_MAX;
		return 0;
	}
	*v = strtoull(text, NULL, 10);
	if (*v >= (1ull << 62))
		*v = UINT64_MAX; /* v1's "no limit" (PAGE_COUNTER_MAX pages) */
	return 0;
}

int psi_read(const struct psi_source *src, struct psi_reading *rd)
{
	char text[4096], path[600];
	uint64_t max, cur;
	int rc;

	rd->cg_stall_us = 0;
	rd->cg_room = UINT64_MAX;
	rc = read_small("/proc/pressure/memory", text, sizeof(text));
	if (!rc)
		rc = psi_parse_some(text, &rd->stall_us);
	if (rc)
		return rc;
	rc = read_small("/proc/meminfo", text, sizeof(text));
	if (!rc)
		rc = psi_parse_meminfo(text, &rd->avail, &rd->total);
	if (rc)
		return rc;
	if (!src->cg[0])
		return 0;
	/* v1 has no pressure file of its own: the host's stall is what there is */
	snprintf(path, sizeof(path), "%s/memory.pressure", src->cg);
	if (src->v1 || read_small(path, text, sizeof(text)) ||
	    psi_parse_some(text, &rd->cg_stall_us))
		rd->cg_stall_us = 0;
	if (!read_cg_num(src, src->v1 ? "memory.limit_in_bytes" : "memory.max", &max) &&
	    max != UINT64_MAX &&
	    !read_cg_num(src, src->v1 ? "memory.usage_in_bytes" : "memory.current", &cur))
		rd->cg_room = max > cur ? max - cur : 0;
	return 0;
}

double psi_stall_step(struct psi_stall *st, const struct psi_reading *rd, uint64_t now_ns,
		      uint64_t *us, double *dt_s)
{
	uint64_t dh, dc, d = 0;
	double dt = 0;

	dh = rd->stall_us >= st->host_last ? rd->stall_us - st->host_last : 0;
	dc = rd->cg_stall_us >= st->cg_last ? rd->cg_stall_us - st->cg_last : 0;
	if (st->last_ns) {
		d = dh > dc ? dh : dc;
		dt = (double)(now_ns - st->last_ns) / 1e9;
	}
	st->host_last = rd->stall_us;
	st->cg_last = rd->cg_stall_us;
	st->last_ns = now_ns;
	if (us)
		*us = d;
	if (dt_s)
		*dt_s = dt;
	return dt > 0 ? (double)d / dt : 0;
}
