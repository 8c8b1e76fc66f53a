/*
 * ramster-run - run an unmodified program with its large anonymous memory in
 * far memory: ramster-run [--socket PATH] --resident SIZE [--min-map SIZE]
 * [--stats FILE] -- COMMAND [ARGS...]
 *
 * It checks its arguments and the node, then execs COMMAND with
 * libramster-preload.so in LD_PRELOAD (tools/ramster-preload.c does the work;
 * docs/far-memory.md). Static and setuid programs ignore LD_PRELOAD: they are
 * run with a warning saying so.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ramster.h"

#define RUN_MIN_RESIDENT (1ull << 20) /* the regions' smallest budget (lib/region_int.h) */

static void run_usage(FILE *f)
{
	fprintf(f, "usage: ramster-run [--socket PATH] --resident SIZE [--min-map SIZE] [--stats FILE]\n"
		   "                   -- COMMAND [ARGS...]\n"
		   "Run COMMAND with its anonymous mappings and malloc blocks of at least --min-map\n"
		   "(default 1M) in far memory: at most --resident SIZE of them in RAM (at least 1M),\n"
		   "the rest in the node's pool. SIZE: bytes, or with K, M, G.\n"
		   "  -s, --socket PATH   the node's socket (default $RAMSTER_SOCKET, then\n"
		   "                      /run/ramster/ramsterd.sock)\n"
		   "  -r, --resident SIZE resident budget for the whole process\n"
		   "  -m, --min-map SIZE  smallest mapping or allocation served (default 1M)\n"
		   "  -S, --stats FILE    append each process's far-memory counters to FILE at exit\n");
}

__attribute__((format(printf, 1, 2))) static int run_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ramster-run: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

/* "32M" -> bytes. @return 0 or -1. */
static int run_size(const char *v, unsigned long long *out)
{
	char *end;
	unsigned long long n;
	unsigned shift = 0;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v || *v == '-')
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || n > (UINT64_MAX >> 1 >> shift))
		return -1;
	*out = n << shift;
	return 0;
}

/* libramster-preload.so beside us: BINDIR/../lib/ (the build tree and an install alike). */
static int run_preload_path(char *out, size_t cap)
{
	const char *env = getenv("RAMSTER_PRELOAD");
	char exe[PATH_MAX];
	ssize_t n;
	char *slash;

	if (env && *env) {
		snprintf(out, cap, "%s", env);
		return access(out, R_OK) ? -1 : 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = 0;
	if ((size_t)snprintf(out, cap, "%s/../lib/libramster-preload.so", exe) >= cap)
		return -1;
	return access(out, R_OK) ? -1 : 0;
}

/* COMMAND as execvp would find it. @return 0 with path set, or -1. */
static int run_which(const char *cmd, char *path, size_t cap)
{
	const char *p = getenv("PATH"), *colon;

	if (strchr(cmd, '/')) {
		snprintf(path, cap, "%s", cmd);
		return access(path, X_OK);
	}
	for (p = p ? p : "/usr/bin:/bin"; *p; p = *colon ? colon + 1 : colon) {
		colon = strchrnul(p, ':');
		if ((size_t)snprintf(path, cap, "%.*s/%s", (int)(colon - p), p, cmd) < cap &&
		    access(path, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* Say so when the loader will not load the shim into COMMAND. */
static void run_check_target(const char *cmd)
{
	char path[PATH_MAX];
	struct stat sb;
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd, i, interp = 0;

	if (run_which(cmd, path, sizeof(path)) || stat(path, &sb))
		return; /* execvp will say */
	if (sb.st_mode & (S_ISUID | S_ISGID))
		fprintf(stderr, "ramster-run: warning: %s is setuid/setgid: the loader ignores "
				"LD_PRELOAD, it runs without far memory\n", path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(ph)) {
		for (i = 0; i < eh.e_phnum; i++)
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) ==
				    sizeof(ph) &&
			    ph.p_type == PT_INTERP)
				interp = 1;
		if (!interp)
			fprintf(stderr, "ramster-run: warning: %s is statically linked: LD_PRELOAD "
					"cannot reach it, it runs without far memory\n", path);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 's'},   {"resident", required_argument, NULL, 'r'},
		{"min-map", required_argument, NULL, 'm'},  {"stats", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},	    {NULL, 0, NULL, 0},
	};
	const char *sock = NULL, *resident = NULL, *min_map = "1M", *stats = NULL, *old;
	unsigned long long res_b, min_b;
	char preload[PATH_MAX], *ld;
	ramster *r;
	int c;

	while ((c = getopt_long(argc, argv, "+s:r:m:S:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'r': resident = optarg; break;
		case 'm': min_map = optarg; break;
		case 'S': stats = optarg; break;
		case 'h': run_usage(stdout); return 0;
		default: run_usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		run_usage(stderr);
		return 2;
	}
	if (!resident)
		return run_die("--resident SIZE is required");
	if (run_size(resident, &res_b) || res_b < RUN_MIN_RESIDENT)
		return run_die("--resident: '%s' is not a size of at least 1M", resident);
	if (run_size(min_map, &min_b) || min_b < 4096)
		return run_die("--min-map: '%s' is not a size of at least 4K", min_map);
	if (run_preload_path(preload, sizeof(preload)))
		return run_die("libramster-preload.so not found beside the program (%s); set "
			       "RAMSTER_PRELOAD", preload);
	r = ramster_open(sock);
	if (!r) {
		fprintf(stderr, "ramster-run: cannot reach the node at %s: %s\n",
			sock ? sock : getenv("RAMSTER_SOCKET") ? getenv("RAMSTER_SOCKET")
							       : "/run/ramster/ramsterd.sock",
			strerror(errno));
		return 2;
	}
	ramster_close(r);
	run_check_target(argv[optind]);

	old = getenv("LD_PRELOAD");
	if (old && *old) {
		ld = malloc(strlen(preload) + strlen(old) + 2);
		if (!ld)
			return run_die("out of memory");
		sprintf(ld, "%s:%s", preload, old);
	} else {
		ld = preload;
	}
	if (setenv("LD_PRELOAD", ld, 1) || setenv("RAMSTER_RUN_RESIDENT", resident, 1) ||
	    setenv("RAMSTER_RUN_MIN_MAP", min_map, 1) || setenv("RAMSTER_RUN_STRICT", "1", 1) ||
	    (sock && setenv("RAMSTER_SOCKET", sock, 1)) ||
	    (stats && setenv("RAMSTER_RUN_STATS", stats, 1)))
		return run_die("setenv: %s", strerror(errno));
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "ramster-run: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
