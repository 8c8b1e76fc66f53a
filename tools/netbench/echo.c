/*
 * echo.c - ramster-netbench's baseline: one 4 KiB round trip over a Unix
 * socket and one over TCP between the nodes' loopback addresses, against a
 * server that does nothing but echo the page (struct echo, netbench.h). A
 * repatriate is held against their sum.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/netbench/netbench.h"
#include "tools/pagegen.h"

static void *echo_main(void *arg)
{
	struct echo *e = arg;
	unsigned char *buf = malloc(ECHO_HDR + PAGE);
	int fd = accept(e->lfd, NULL, NULL);

	if (fd >= 0 && buf) {
		if (e->tcp)
			tcp_nodelay(fd);
		while (read_full(fd, buf, ECHO_HDR + PAGE) == 0)
			if (write_full(fd, buf + ECHO_HDR, PAGE))
				break;
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

void echo_close(struct echo *e)
{
	if (e->cfd >= 0) {
		shutdown(e->cfd, SHUT_RDWR); /* the server sees EOF and ends */
		close(e->cfd);
	}
	if (e->lfd >= 0)
		shutdown(e->lfd, SHUT_RDWR); /* or leaves accept() if never connected */
	if (e->started)
		pthread_join(e->thread, NULL);
	if (e->pid > 0) {
		kill(e->pid, SIGTERM);
		waitpid(e->pid, NULL, 0);
	}
	if (e->lfd >= 0)
		close(e->lfd);
	if (e->path[0])
		unlink(e->path);
	e->cfd = e->lfd = -1;
	e->started = false;
	e->pid = 0;
}

/* Start the server on the listening e->lfd. @return 0 or -errno. */
static int echo_serve(struct echo *e, bool process)
{
	if (!process) {
		if (pthread_create(&e->thread, NULL, echo_main, e))
			return -EAGAIN;
		e->started = true;
		return 0;
	}
	e->pid = fork();
	if (e->pid < 0)
		return -errno;
	if (e->pid == 0) {
		/* hold no copy of another connection, or its peer would never see EOF */
		close_range(3, (unsigned)e->lfd - 1, 0);
		close_range((unsigned)e->lfd + 1, ~0u, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		echo_main(e);
		_exit(0);
	}
	return 0;
}

/* Listen, start the server and connect. @return 0 or -errno. */
int echo_open(struct echo *e, bool tcp, bool process, const char *dir)
{
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_un un;
	} srv, cli;
	socklen_t sl = sizeof(srv);
	int rc;

	memset(e, 0, sizeof(*e));
	e->lfd = e->cfd = -1;
	e->tcp = tcp;
	e->name = tcp ? (process ? "tcp, process" : "tcp") : (process ? "unix, process" : "unix");
	memset(&srv, 0, sizeof(srv));
	if (tcp) {
		if (inet_addr_of(o.tcp_server, 0, &srv.in) ||
		    inet_addr_of(o.tcp_client, 0, &cli.in))
			return -EINVAL;
	} else {
		snprintf(e->path, sizeof(e->path), "%s/echo%s.sock", dir, process ? "-p" : "");
		srv.un.sun_family = AF_UNIX;
		snprintf(srv.un.sun_path, sizeof(srv.un.sun_path), "%s", e->path);
		unlink(e->path);
		sl = sizeof(srv.un);
	}
	e->lfd = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
	if (e->lfd < 0 || bind(e->lfd, &srv.sa, sl) || listen(e->lfd, 4) ||
	    getsockname(e->lfd, &srv.sa, &sl))
		goto fail;
	rc = echo_serve(e, process);
	if (rc) {
		errno = -rc;
		goto fail;
	}
	e->cfd = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
	if (e->cfd < 0 || (tcp && bind(e->cfd, &cli.sa, sizeof(cli.in))) ||
	    connect(e->cfd, &srv.sa, sl))
		goto fail;
	if (tcp)
		tcp_nodelay(e->cfd);
	if (process) {
		close(e->lfd); /* the child has it */
		e->lfd = -1;
	}
	return 0;
fail:
	rc = errno ? -errno : -EIO;
	note("%s echo: %s\n", e->name, strerror(-rc));
	echo_close(e);
	return rc;
}

/* One round of n timed round trips into lat. @return 0 or -errno. */
int echo_round(struct echo *e, double *lat, unsigned n, uint64_t *rng)
{
	unsigned i;
	uint64_t seq;

	for (i = 0; i < n; i++) {
		uint64_t pg = pagegen_rng_next(rng) % (DISTINCT * 4ull);
		uint32_t len = PAGE;
		double t0;
		int rc;

		seq = i;
		memcpy(e->out, &seq, 8);
		memcpy(e->out + 8, &len, 4);
		page_make(pg, e->out + ECHO_HDR);
		t0 = now();
		rc = write_full(e->cfd, e->out, ECHO_HDR + PAGE);
		if (!rc)
			rc = read_full(e->cfd, e->in, PAGE);
		lat[i] = (now() - t0) * 1e6;
		if (rc) {
			note("%s echo: %s\n", e->name, strerror(-rc));
			return rc;
		}
		if (memcmp(e->in, e->out + ECHO_HDR, PAGE))
			errors++;
	}
	return 0;
}
