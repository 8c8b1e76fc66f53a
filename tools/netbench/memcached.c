/*
 * memcached.c - the same 4 KiB get against memcached: a child on a free
 * loopback port that dies with the bench, and a minimal text-protocol client
 * (set, get) on one connection.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "tools/netbench/netbench.h"

static unsigned free_port(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	unsigned port = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return 0;
	inet_addr_of("127.0.0.1", 0, &sa);
	if (!bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &sl))
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

void mc_stop(struct mc *m)
{
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	if (m->pid > 0) {
		kill(m->pid, SIGTERM);
		waitpid(m->pid, NULL, 0);
	}
	m->pid = 0;
}

/* Start memcached and connect to it. @return 0 or -errno (m stopped). */
int mc_start(struct mc *m)
{
	unsigned attempt;
	int i;

	m->fd = -1;
	m->pid = 0;
	for (attempt = 0; attempt < 5; attempt++) {
		char port[16];
		struct sockaddr_in sa;
		pid_t parent = getpid();
		int status;

		m->port = free_port();
		if (!m->port)
			return -EADDRNOTAVAIL;
		snprintf(port, sizeof(port), "%u", m->port);
		m->pid = fork();
		if (m->pid < 0)
			return -errno;
		if (m->pid == 0) {
			const char *argv[] = { o.memcached, "-p", port, "-l", "127.0.0.1",
					       "-m", "256", "-U", "0", NULL, NULL, NULL };

			/* dies with the bench, however the bench ends; holds none of its fds */
			close_range(3, ~0u, 0);
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			if (getppid() != parent)
				_exit(1);
			if (geteuid() == 0) {
				argv[9] = "-u";
				argv[10] = "root";
			}
			execvp(o.memcached, (char *const *)argv);
			fprintf(stderr, "netbench: exec %s: %s\n", o.memcached, strerror(errno));
			_exit(127);
		}
		inet_addr_of("127.0.0.1", m->port, &sa);
		for (i = 0; i < 250; i++) {
			if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
				m->pid = 0;
				if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
					return -ENOENT;
				break; /* the port was taken meanwhile: try another */
			}
			m->fd = socket(AF_INET, SOCK_STREAM, 0);
			if (m->fd < 0)
				break;
			if (!connect(m->fd, (struct sockaddr *)&sa, sizeof(sa))) {
				tcp_nodelay(m->fd);
				return 0;
			}
			close(m->fd);
			m->fd = -1;
			sleep_ms(20);
		}
		mc_stop(m);
	}
	return -EIO;
}

/* set key -> STORED. @return 0 or -errno. */
int mc_set(struct mc *m, unsigned key, const unsigned char *page)
{
	char buf[64 + PAGE + 2], ans[8];
	int hl = snprintf(buf, 64, "set rnb:%u 0 0 %d\r\n", key, PAGE);
	int rc;

	memcpy(buf + hl, page, PAGE);
	memcpy(buf + hl + PAGE, "\r\n", 2);
	rc = write_full(m->fd, buf, (size_t)hl + PAGE + 2);
	if (!rc)
		rc = read_full(m->fd, ans, 8);
	if (!rc && memcmp(ans, "STORED\r\n", 8))
		rc = -EPROTO;
	return rc;
}

/* get key -> VALUE line, the page, END. @return 0, -ENOENT (a miss) or -errno. */
int mc_get(struct mc *m, unsigned key, unsigned char *page, double *us)
{
	char req[48], hdr[64], buf[64 + PAGE + 8];
	int rl = snprintf(req, sizeof(req), "get rnb:%u\r\n", key);
	int hl = snprintf(hdr, sizeof(hdr), "VALUE rnb:%u 0 %d\r\n", key, PAGE);
	size_t total = (size_t)hl + PAGE + 7;
	double t0 = now();
	int rc;

	rc = write_full(m->fd, req, (size_t)rl);
	if (!rc)
		rc = read_full(m->fd, buf, 5); /* "END\r\n" alone is a miss */
	if (!rc && memcmp(buf, "END\r\n", 5))
		rc = read_full(m->fd, buf + 5, total - 5);
	else if (!rc)
		rc = -ENOENT;
	*us = (now() - t0) * 1e6;
	if (rc)
		return rc;
	if (memcmp(buf, hdr, (size_t)hl) || memcmp(buf + hl + PAGE, "\r\nEND\r\n", 7))
		return -EPROTO;
	memcpy(page, buf + hl, PAGE);
	return 0;
}
