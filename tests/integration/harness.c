/*
 * harness.c - start and stop a real ramsterd for the integration tests, read
 * its counters, and make test pages.
 *
 * Each daemon gets its own mkdtemp dir under /tmp (socket and log), dies with
 * the test process (PR_SET_PDEATHSIG), and must exit 0 on SIGTERM within
 * 5 s. Page generators are pure functions of their seed.
 */
#include "tests/integration/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- clocks --------------------------------------------------------------- */

uint64_t harness_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

double harness_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- the daemon ----------------------------------------------------------- */

static void dump_log(const struct harness *h, const char *why)
{
	char buf[4096];
	size_t n;
	FILE *f;

	fprintf(stderr, "harness: %s; daemon log %s:\n", why, h->log);
	f = fopen(h->log, "r");
	if (!f)
		return;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, stderr);
	fclose(f);
	fprintf(stderr, "harness: end of daemon log\n");
}

static void remove_dir(const char *dir)
{
	char path[512];
	struct dirent *e;
	DIR *d;

	d = opendir(dir);
	if (d) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

/* @return true if a connection to path is accepted now. */
static bool socket_accepts(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	bool ok;
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static bool args_have(const char *const *args, const char *flag)
{
	for (; args && *args; args++)
		if (!strcmp(*args, flag))
			return true;
	return false;
}

static void exec_daemon(const struct harness *h, const char *const *args)
{
	const char *argv[HARNESS_ARGS_MAX + 8];
	const char *bin_dir = getenv("RAMSTER_BIN");
	char bin[512];
	size_t n = 0;
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	fd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
	}
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		dup2(fd, STDIN_FILENO);
	signal(SIGPIPE, SIG_DFL);

	snprintf(bin, sizeof(bin), "%s/ramsterd", bin_dir && *bin_dir ? bin_dir : "build/bin");
	argv[n++] = bin;
	argv[n++] = "--socket";
	argv[n++] = h->sock;
	if (!args_have(args, "--log-level")) {
		argv[n++] = "--log-level";
		argv[n++] = "warn";
	}
	for (; args && *args && n < HARNESS_ARGS_MAX + 6; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	execv(bin, (char *const *)argv);
	fprintf(stderr, "harness: exec %s: %s\n", bin, strerror(errno));
	_exit(127);
}

int harness_start(struct harness *h, const char *const *args)
{
	uint64_t deadline;
	int status;
	pid_t pid;

	memset(h, 0, sizeof(*h));
	/* a write to a socket the daemon closed must fail, not kill the test */
	signal(SIGPIPE, SIG_IGN);
	snprintf(h->dir, sizeof(h->dir), "/tmp/ramster-test.XXXXXX");
	if (!mkdtemp(h->dir))
		return -errno;
	snprintf(h->sock, sizeof(h->sock), "%s/sock", h->dir);
	snprintf(h->log, sizeof(h->log), "%s/log", h->dir);

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		remove_dir(h->dir);
		return err;
	}
	if (pid == 0)
		exec_daemon(h, args);
	h->pid = pid;

	deadline = harness_now_ms() + HARNESS_START_TIMEOUT_MS;
	for (;;) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			h->pid = 0;
			h->exit_status = status;
			dump_log(h, "daemon exited during start-up");
			remove_dir(h->dir);
			return -ECHILD;
		}
		if (socket_accepts(h->sock))
			return 0;
		if (harness_now_ms() > deadline)
			break;
		sleep_ms(10);
	}
	dump_log(h, "daemon socket did not accept within 10 s");
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	h->pid = 0;
	remove_dir(h->dir);
	return -ETIMEDOUT;
}

int harness_stop(struct harness *h)
{
	uint64_t deadline;
	int status = 0, rc = 0;
	pid_t got;

	if (!h->pid) {
		if (h->dir[0])
			remove_dir(h->dir);
		h->dir[0] = 0;
		return 0;
	}
	if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
		dump_log(h, "daemon had died before stop");
		rc = -ECHILD;
		goto out;
	}
	kill(h->pid, SIGTERM);
	deadline = harness_now_ms() + HARNESS_STOP_TIMEOUT_MS;
	for (;;) {
		got = waitpid(h->pid, &status, WNOHANG);
		if (got == h->pid)
			break;
		if (harness_now_ms() > deadline) {
			kill(h->pid, SIGKILL);
			waitpid(h->pid, &status, 0);
			dump_log(h, "daemon did not exit within 5 s of SIGTERM");
			rc = -ETIMEDOUT;
			goto out;
		}
		sleep_ms(5);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			fprintf(stderr, "harness: daemon killed by signal %d\n", WTERMSIG(status));
		else
			fprintf(stderr, "harness: daemon exited with %d\n", WEXITSTATUS(status));
		dump_log(h, "daemon did not exit 0");
		rc = -EIO;
	}
out:
	h->exit_status = status;
	h->pid = 0;
	remove_dir(h->dir);
	h->dir[0] = 0;
	return rc;
}

int harness_kill(struct harness *h, int sig)
{
	int status = 0;

	if (!h->pid)
		return -ECHILD;
	kill(h->pid, sig);
	while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR)
		;
	h->exit_status = status;
	h->pid = 0;
	remove_dir(h->dir);
	h->dir[0] = 0;
	return status;
}

bool harness_alive(struct harness *h)
{
	int status;

	if (!h->pid)
		return false;
	if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
		h->exit_status = status;
		h->pid = 0;
		dump_log(h, "daemon died");
		return false;
	}
	return kill(h->pid, 0) == 0;
}

ramster *harness_connect(const struct harness *h)
{
	return ramster_open(h->sock);
}

/* ---- counters ------------------------------------------------------------- */

int harness_stat_any(ramster *r, const char *const *names, uint64_t *value, const char **found)
{
	struct ramster_stat *s;
	size_t n, i;
	int rc;

	rc = ramster_stats(r, &s, &n);
	if (rc < 0)
		return rc;
	rc = -ENOENT;
	for (; *names && rc; names++) {
		for (i = 0; i < n; i++) {
			if (s[i].name && !strcmp(s[i].name, *names)) {
				*value = s[i].value;
				if (found)
					*found = *names;
				rc = 0;
				break;
			}
		}
	}
	ramster_stats_free(s, n);
	return rc;
}

int harness_stat(ramster *r, const char *name, uint64_t *value)
{
	const char *names[] = { name, NULL };

	return harness_stat_any(r, names, value, NULL);
}

void harness_stats_dump(ramster *r)
{
	struct ramster_stat *s;
	size_t n, i;
	int rc;

	rc = ramster_stats(r, &s, &n);
	if (rc < 0) {
		fprintf(stderr, "harness: ramster_stats: %s\n", strerror(-rc));
		return;
	}
	for (i = 0; i < n; i++)
		fprintf(stderr, "  %-32s %llu\n", s[i].name ? s[i].name : "(null)",
			(unsigned long long)s[i].value);
	ramster_stats_free(s, n);
}

/* ---- pages ---------------------------------------------------------------- */

uint64_t harness_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct ramster_oid harness_oid(uint64_t a, uint64_t b)
{
	struct ramster_oid oid = { { a, b, harness_mix(a) ^ b } };

	return oid;
}

void harness_page_zero(void *page)
{
	memset(page, 0, RAMSTER_PAGE_SIZE);
}

/* xorshift64*: the generators' stream; never seeded with 0. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

void harness_page_random(void *page, uint64_t seed)
{
	uint64_t s = harness_mix(seed) | 1, *p = page;
	size_t i;

	for (i = 0; i < RAMSTER_PAGE_SIZE / 8; i++)
		p[i] = rng_next(&s);
}

static const char *const text_words[] = {
	"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be",
	"by", "on", "not", "this", "are", "or", "from", "at", "which", "but", "have", "an", "had",
	"they", "were", "their", "one", "all", "we", "can", "has", "there", "been", "if", "more",
	"when", "will", "would", "who", "so", "no", "memory", "page", "pool", "node", "client",
	"server", "request", "error", "value", "object", "index", "frame", "cache", "kernel",
	"swap", "data", "time", "system", "process", "thread", "buffer", "queue", "network",
	"remote", "local", "handle", "compressed", "transcendent", "ephemeral", "persistent",
	"cluster", "heartbeat", "replica", "peer", "socket", "reply", "timeout", "budget",
	"evicted", "stored", "refused", "flushed", "version", "header", "payload", "message",
	"number", "between", "through", "because", "another", "without", "machine", "working",
	"while", "under", "about", "should", "could", "after", "before", "first", "other",
	"where", "every", "might",
};

static const char *const text_levels[] = { "INFO", "DEBUG", "WARN", "NOTICE", "ERROR" };

/* Log messages; '#' is replaced by a number. */
static const char *const text_logs[] = {
	"stored # pages in pool # of client #",
	"flushed object # (# pages) in # us",
	"evicted # ephemeral frames, budget # frames",
	"peer node-# heartbeat ok, rtt # us",
	"request # from client # took # us",
	"remotify moved # frames to node-#",
	"repatriated page # of object # from node-#",
	"refused put: page # compressed to # bytes",
	"connection # closed by peer after # requests",
	"new pool # for client # (persistent)",
	"timeout waiting for node-# after # ms, retrying",
	"checkpoint: # objects, # pages, # bytes of metadata",
};

/* A uniform choice below n, without a division. */
static unsigned rng_below(uint64_t r, unsigned n)
{
	return (unsigned)(((r & 0xffffffffull) * n) >> 32);
}

/* Text is built in a scratch buffer with room to overrun, then copied. */
#define TEXT_SLACK 256

struct text_buf {
	char *p;
	char *end;
};

static void text_put(struct text_buf *b, const char *s, size_t len)
{
	memcpy(b->p, s, len);
	b->p += len;
}

static void text_putc(struct text_buf *b, char c)
{
	*b->p++ = c;
}

static void text_num(struct text_buf *b, uint64_t v, int width)
{
	char tmp[24], *p = b->p;
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n < width)
		tmp[n++] = '0';
	while (n)
		*p++ = tmp[--n];
	b->p = p;
}

/* A skewed word choice (small indices more often), as in real text. */
static unsigned text_word(uint64_t r)
{
	const unsigned n = sizeof(text_words) / sizeof(text_words[0]);
	unsigned a = rng_below(r, n), c = rng_below(r >> 32, n);

	return a < c ? a : c;
}

static void text_words_put(struct text_buf *b, uint64_t *s, unsigned n, bool sentence)
{
	static unsigned char lens[sizeof(text_words) / sizeof(text_words[0])];
	unsigned i, w;

	if (!lens[0])
		for (i = 0; i < sizeof(lens); i++)
			lens[i] = (unsigned char)strlen(text_words[i]);
	for (i = 0; i < n; i++) {
		uint64_t r = rng_next(s);

		w = text_word(r);
		text_put(b, text_words[w], lens[w]);
		if (sentence && i == 0)
			b->p[-lens[w]] = (char)(b->p[-lens[w]] - 'a' + 'A');
		if (sentence && (r >> 59) == 0 && i + 1 < n)
			text_putc(b, ',');
		text_putc(b, ' ');
	}
}

static void text_two(struct text_buf *b, unsigned v, char sep)
{
	*b->p++ = (char)('0' + v / 10);
	*b->p++ = (char)('0' + v % 10);
	*b->p++ = sep;
}

static void text_log(struct text_buf *b, const char *msg, uint64_t r)
{
	const char *hash;
	size_t len;

	for (;;) {
		hash = strchr(msg, '#');
		len = hash ? (size_t)(hash - msg) : strlen(msg);
		text_put(b, msg, len);
		if (!hash)
			break;
		text_num(b, (r & 0xff) < 0xc0 ? r & 0x3ff : r & 0xfffff, 1);
		r >>= 20;
		msg = hash + 1;
	}
	*b->p++ = '\n';
}

void harness_page_text(void *page, uint64_t seed)
{
	char buf[RAMSTER_PAGE_SIZE + TEXT_SLACK];
	struct text_buf b = { buf, buf + RAMSTER_PAGE_SIZE };
	uint64_t s = harness_mix(seed) | 1;
	uint64_t r = rng_next(&s);
	unsigned day = 1 + rng_below(r, 28), hh = rng_below(r >> 8, 24), mm = rng_below(r >> 16, 60);
	unsigned ss = rng_below(r >> 24, 60);
	char date[16];
	static const char lvl_len[] = { 4, 5, 4, 6, 5 };
	const unsigned n_logs = sizeof(text_logs) / sizeof(text_logs[0]);

	/* the date stays for the page; the time of day runs on */
	snprintf(date, sizeof(date), "20%02u-%02u-%02u ", 20 + (unsigned)(seed >> 5) % 8,
		 1 + (unsigned)(seed >> 8) % 12, day);
	while (b.p < b.end) {
		unsigned lvl;

		r = rng_next(&s);
		if ((r & 7) == 0) {
			/* a sentence of prose */
			text_words_put(&b, &s, 6 + rng_below(r >> 8, 12), true);
			b.p[-1] = '.';
			text_putc(&b, '\n');
			continue;
		}
		/* a log line */
		ss += rng_below(r >> 2, 4);
		if (ss >= 60) {
			ss -= 60;
			if (++mm == 60) {
				mm = 0;
				hh = (hh + 1) % 24;
			}
		}
		text_put(&b, date, 11);
		text_two(&b, hh, ':');
		text_two(&b, mm, ':');
		text_two(&b, ss, ' ');
		lvl = rng_below(r >> 8, 16);
		lvl = lvl < 10 ? 0 : lvl < 13 ? 1 : lvl - 12;
		text_put(&b, text_levels[lvl], (size_t)lvl_len[lvl]);
		text_put(&b, " worker-", 8);
		text_num(&b, rng_below(r >> 12, 8), 1);
		text_put(&b, ": ", 2);
		text_log(&b, text_logs[rng_below(r >> 20, n_logs)], rng_next(&s));
	}
	memcpy(page, buf, RAMSTER_PAGE_SIZE);
}
