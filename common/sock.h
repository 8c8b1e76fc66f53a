/*
 * sock.h - socket helpers shared by the node's listeners and the transports:
 * make a socket's directory, listen on a unix socket (a stale socket file of
 * a dead server removed, a live one refused), parse "HOST:PORT", resolve an
 * IPv4 host. Blocking calls, meant for start-up and connection set-up, not
 * for a hot path. Errors are -errno; where err is given it gets a sentence.
 */
#ifndef RAMSTER_COMMON_SOCK_H
#define RAMSTER_COMMON_SOCK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SOCK_UNIX_PATH_MAX 108 /* sizeof(sockaddr_un.sun_path), NUL included */
#define SOCK_IPV4_TEXT_MAX sizeof("255.255.255.255:65535")

/*
 * mkdir -p the directory part of path (nothing when it exists or path has no
 * directory part); each new directory gets mode whatever the umask.
 * @return 0, or -errno with err set ("cannot create directory D: why").
 */
int sock_mkdir_parent(const char *path, mode_t mode, char *err, size_t errlen);

/*
 * Is a server answering on the unix socket path? @return 1 yes (it accepts,
 * or its backlog is full), 0 no (connection refused, or no such file), or
 * -errno with err set when the probe itself failed (then nothing is known).
 */
int sock_unix_probe(const char *path, char *err, size_t errlen);

/* A listening unix socket and the file it made (unlinked only if still ours). */
struct sock_unix {
	int fd;	   /* non-blocking, close-on-exec; -1 when closed */
	dev_t dev; /* the socket file bound, to unlink only ours */
	ino_t ino;
	bool removed_stale; /* a dead server's socket file was removed first: log it */
	char path[SOCK_UNIX_PATH_MAX];
};

/*
 * Listen on the unix socket path: its directory made (sock_mkdir_parent,
 * 0755); a socket file already there probed (sock_unix_probe) and removed
 * when nobody answers, -EADDRINUSE ("another WHO is listening on PATH") when
 * somebody does, -EEXIST when it is not a socket; the socket born with mode
 * (the umask is narrowed around bind: no window with a wider mode); listen
 * with SOMAXCONN. who names the server in that message ("ramsterd").
 * @return 0 with *s filled, or -errno with err set and s->fd == -1.
 */
int sock_unix_listen(struct sock_unix *s, const char *path, mode_t mode, const char *who, char *err,
		     size_t errlen);

/* Close the socket and unlink its file if it is still the one we bound. Idempotent. */
void sock_unix_close(struct sock_unix *s);

/*
 * Parse "HOST:PORT": HOST a host name or IPv4 literal of 1..hostcap-1
 * characters of [A-Za-z0-9.-_], PORT decimal 1..65535, nothing else. host
 * (hostcap bytes) and port may be NULL. @return 0, or -EINVAL with *why set to
 * a static phrase to follow the value ("is not HOST:PORT", "has no valid
 * port (1..65535)", ...).
 */
int sock_hostport_parse(const char *s, char *host, size_t hostcap, uint16_t *port,
			const char **why);

/*
 * host:port as an IPv4 address. host: an IPv4 literal or a name (a blocking
 * lookup: meant for literals and hosts-file names); NULL, "" or "*" mean any
 * address, accepted where any_ok. @return 0, or -errno (-EINVAL: "any" where
 * not accepted; -ENXIO: no such host; -EAGAIN, -ENOMEM, ...).
 */
int sock_resolve_ipv4(const char *host, uint16_t port, bool any_ok, struct sockaddr_in *sa);

/* "192.0.2.1:7470" into out (SOCK_IPV4_TEXT_MAX bytes); "?" for NULL or a non-IPv4 address. */
void sock_format_ipv4(char *out, const struct sockaddr *sa);

#endif /* RAMSTER_COMMON_SOCK_H */
