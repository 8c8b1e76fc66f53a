/*
 * sock.c - socket helpers (sock.h).
 *
 * One unix listener for every server in the node (clients, NBD): the
 * stricter of the two it replaces - a probe that tells "refused" (stale) from
 * a failed probe, an unlink only of a stale socket, the socket never wider
 * than its mode, and a close that unlinks only the file it bound.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/sock.h"

_Static_assert(SOCK_UNIX_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path),
	       "SOCK_UNIX_PATH_MAX is sun_path");

#define SOCK_HOST_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"

/* ---- directories ------------------------------------------------------------ */

int sock_mkdir_parent(const char *path, mode_t mode, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	char *slash, *p, save;
	struct stat st;
	int e;

	if (strlen(path) >= sizeof(dir)) {
		snprintf(err, errlen, "path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (!stat(dir, &st))
		return 0;
	for (p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		save = *p;
		*p = '\0';
		if (mkdir(dir, mode) == 0) {
			(void)chmod(dir, mode); /* whatever the umask */
		} else if (errno != EEXIST) {
			e = errno;
			snprintf(err, errlen, "cannot create directory %s: %s", dir, strerror(e));
			return -e;
		}
		*p = save;
		if (!save)
			break;
	}
	return 0;
}

/* ---- unix sockets ---------------------------------------------------------------- */

static int sock_unix_addr(const char *path, struct sockaddr_un *sa, char *err, size_t errlen)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		snprintf(err, errlen, "socket path too long (at most %zu bytes): %s",
			 sizeof(sa->sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa->sun_path, path);
	return 0;
}

int sock_unix_probe(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	int fd, e, rc;

	rc = sock_unix_addr(path, &sa, err, errlen);
	if (rc)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		return -e;
	}
	if (!connect(fd, (const struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return 1;
	}
	e = errno;
	close(fd);
	if (e == EAGAIN || e == EINPROGRESS) /* listening, backlog full */
		return 1;
	if (e == ECONNREFUSED || e == ENOENT)
		return 0;
	snprintf(err, errlen, "cannot probe %s: %s", path, strerror(e));
	return -e;
}

int sock_unix_listen(struct sock_unix *s, const char *path, mode_t mode, const char *who, char *err,
		     size_t errlen)
{
	struct sockaddr_un sa;
	struct stat st;
	mode_t mask;
	int rc, e;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	rc = sock_unix_addr(path, &sa, err, errlen);
	if (rc)
		return rc;
	rc = sock_mkdir_parent(path, 0755, err, errlen);
	if (rc)
		return rc;
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			return -EEXIST;
		}
		rc = sock_unix_probe(path, err, errlen);
		if (rc < 0)
			return rc;
		if (rc) {
			snprintf(err, errlen, "another %s is listening on %s", who, path);
			return -EADDRINUSE;
		}
		if (unlink(path) && errno != ENOENT) {
			e = errno;
			snprintf(err, errlen, "cannot remove stale socket %s: %s", path,
				 strerror(e));
			return -e;
		}
		s->removed_stale = true;
	}

	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		return -e;
	}
	mask = umask(~mode & 0777); /* the socket is born with mode: no window with a wider one */
	rc = bind(s->fd, (struct sockaddr *)&sa, sizeof(sa));
	e = errno;
	umask(mask);
	if (rc) {
		snprintf(err, errlen, "cannot bind %s: %s", path, strerror(e));
		goto close_fd;
	}
	if (chmod(path, mode) || lstat(path, &st)) {
		e = errno;
		snprintf(err, errlen, "cannot set the mode of %s: %s", path, strerror(e));
		goto unlink_path;
	}
	if (listen(s->fd, SOMAXCONN)) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		goto unlink_path;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	memcpy(s->path, sa.sun_path, sizeof(s->path));
	return 0;

unlink_path:
	unlink(path);
close_fd:
	close(s->fd);
	s->fd = -1;
	return -e;
}

void sock_unix_close(struct sock_unix *s)
{
	struct stat st;

	if (s->fd < 0)
		return;
	close(s->fd);
	s->fd = -1;
	if (!lstat(s->path, &st) && st.st_dev == s->dev && st.st_ino == s->ino)
		unlink(s->path);
}

/* ---- addresses ------------------------------------------------------------------ */

int sock_hostport_parse(const char *s, char *host, size_t hostcap, uint16_t *port, const char **why)
{
	const char *colon = strrchr(s, ':');
	const char *d;
	size_t hlen;
	uint32_t v = 0;

	if (!colon) {
		*why = "is not HOST:PORT";
		return -EINVAL;
	}
	hlen = (size_t)(colon - s);
	if (hlen == 0 || hlen >= hostcap || strspn(s, SOCK_HOST_CHARS) != hlen) {
		*why = "is not HOST:PORT (a host name or IPv4 address)";
		return -EINVAL;
	}
	for (d = colon + 1; *d; d++) {
		if (*d < '0' || *d > '9' || v > 65535)
			break;
		v = v * 10 + (uint32_t)(*d - '0');
	}
	if (d == colon + 1 || *d || v < 1 || v > 65535) {
		*why = "has no valid port (1..65535)";
		return -EINVAL;
	}
	if (host) {
		memcpy(host, s, hlen);
		host[hlen] = '\0';
	}
	if (port)
		*port = (uint16_t)v;
	return 0;
}

static int sock_gai_errno(int rc)
{
	switch (rc) {
	case EAI_SYSTEM:
		return errno ? -errno : -EIO;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_AGAIN:
		return -EAGAIN;
	default:
		return -ENXIO; /* no such host */
	}
}

int sock_resolve_ipv4(const char *host, uint16_t port, bool any_ok, struct sockaddr_in *sa)
{
	struct addrinfo hints, *res;
	int rc;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (!host || !*host || !strcmp(host, "*")) {
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
		return any_ok ? 0 : -EINVAL;
	}
	if (inet_pton(AF_INET, host, &sa->sin_addr) == 1)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	errno = 0;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc)
		return sock_gai_errno(rc);
	memcpy(&sa->sin_addr, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr,
	       sizeof(sa->sin_addr));
	freeaddrinfo(res);
	return 0;
}

void sock_format_ipv4(char *out, const struct sockaddr *sa)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
	char ip[INET_ADDRSTRLEN];

	if (!sa || in->sin_family != AF_INET ||
	    !inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip))) {
		snprintf(out, SOCK_IPV4_TEXT_MAX, "?");
		return;
	}
	snprintf(out, SOCK_IPV4_TEXT_MAX, "%s:%u", ip, (unsigned)ntohs(in->sin_port));
}
