/*
 * harness.c - start and stop a real ramsterd for the integration tests, read
 * its counters, and make test pages.
 *
 * Each daemon gets its own mkdtemp dir under /tmp (socket and log), dies with
 * the test process (PR_SET_PDEATHSIG), and must exit 0 on SIGTERM within
 * 5 s. The pages come from tools/pagegen.c (pure functions of their seed),
 * shared with ramster-bench and ramster-netbench.
 */
#include "tests/integration/harness.h"
#include "tools/pagegen.h"

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

	if (getenv("RAMSTER_TEST_KEEP") && *getenv("RAMSTER_TEST_KEEP"))
		return; /* debugging: keep the daemons' logs */
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

	if (getenv("RAMSTER_DAEMON") && *getenv("RAMSTER_DAEMON")) /* another build of it */
		snprintf(bin, sizeof(bin), "%s", getenv("RAMSTER_DAEMON"));
	else
		snprintf(bin, sizeof(bin), "%s/ramsterd",
			 bin_dir && *bin_dir ? bin_dir : "build/bin");
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

int harness_crash_restart(struct harness *h, const char *const *args)
{
	uint64_t deadline;
	int status;
	pid_t pid;

	if (!h->pid)
		return -ECHILD;
	kill(h->pid, SIGKILL);
	while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR)
		;
	h->pid = 0;
	unlink(h->sock); /* a crash leaves its socket file */
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		exec_daemon(h, args);
	h->pid = pid;
	deadline = harness_now_ms() + HARNESS_START_TIMEOUT_MS;
	while (!socket_accepts(h->sock)) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			h->pid = 0;
			h->exit_status = status;
			dump_log(h, "daemon exited during its start after the crash");
			return -ECHILD;
		}
		if (harness_now_ms() > deadline) {
			dump_log(h, "daemon socket did not accept within 10 s after the crash");
			return -ETIMEDOUT;
		}
		sleep_ms(10);
	}
	return 0;
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
	int rc = -ENOENT;

	for (; *names; names++) {
		rc = ramster_stat(r, *names, value);
		if (rc != -ENOENT)
			break;
	}
	if (rc == 0 && found)
		*found = *names;
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

/* ---- pages (tools/pagegen.c) ---------------------------------------------- */

_Static_assert(RAMSTER_PAGE_SIZE == PAGEGEN_PAGE_SIZE, "pagegen makes ramster pages");

uint64_t harness_mix(uint64_t x)
{
	return pagegen_mix(x);
}

struct ramster_oid harness_oid(uint64_t a, uint64_t b)
{
	struct ramster_oid oid = { { a, b, harness_mix(a) ^ b } };

	return oid;
}

void harness_page_zero(void *page)
{
	pagegen_zero(page);
}

void harness_page_random(void *page, uint64_t seed)
{
	pagegen_random(page, seed);
}

void harness_page_text(void *page, uint64_t seed)
{
	pagegen_text(page, seed);
}
