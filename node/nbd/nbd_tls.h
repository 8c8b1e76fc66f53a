/*
 * nbd_tls.h - TLS for the NBD frontend (NBD_OPT_STARTTLS, as nbdkit and
 * qemu-nbd do it), private to the files of nbd_int.h: the server's GnuTLS
 * credentials and a connection's session, whose records carry the rest of
 * the option haggling and the whole transmission phase.
 *
 * A connection is plaintext (phase NBD_TLS_PLAIN, no session) until the
 * client's STARTTLS has been answered; then nbd_tls_io() is its watcher's
 * callback and nbd_send()/the input go through gnutls_record_send/recv on
 * the same non-blocking socket. The plaintext path pays one test of
 * c->tls.phase (or c->tls.s) where it sends, watches and is woken.
 * Loop thread only.
 */
#ifndef RAMSTER_NODE_NBD_TLS_H
#define RAMSTER_NODE_NBD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gnutls/gnutls.h>

#include "node/config.h"

struct nbd;
struct nbd_conn;

/*
 * What a session is made from: loaded at start and again by each reload
 * (nbd_tls_reload). Reference counted: the server holds the current set,
 * each session the set it was made with, so a reload never frees
 * credentials a live session uses.
 */
struct nbd_tls_creds {
	unsigned refs;
	gnutls_psk_server_credentials_t psk;   /* nbd_tls_psk (or NULL) */
	gnutls_certificate_credentials_t x509; /* nbd_tls_certificates (or NULL) */
	gnutls_priority_t prio;
	bool verify_clients; /* ca-cert.pem: a client certificate sent must chain to it */
};

/* The server's side: the current credentials, and the counters. */
struct nbd_tls {
	unsigned mode;		    /* enum config_nbd_tls of this node */
	struct nbd_tls_creds *creds; /* NULL: TLS not offered */
	uint64_t reloads;	    /* credentials loaded again by a reload */
	uint64_t handshakes;	   /* TLS handshakes completed */
	uint64_t failures;	   /* TLS handshakes failed or abandoned */
	uint64_t required_refused; /* plaintext connections refused (require) */
};

enum nbd_tls_phase {
	NBD_TLS_PLAIN = 0, /* no TLS (yet) */
	NBD_TLS_STARTING,  /* STARTTLS answered: the ACK goes out in plaintext, nothing is read */
	NBD_TLS_SHAKING,   /* the TLS handshake runs */
	NBD_TLS_UP,	   /* records carry everything */
	NBD_TLS_DOWN,	   /* failed (counted and logged): being closed */
};

/* A connection's side, in struct nbd_conn. */
struct nbd_conn_tls {
	gnutls_session_t s;    /* NULL: plaintext */
	struct nbd_tls_creds *creds; /* the set s was made with (a reference) */
	unsigned char phase;   /* enum nbd_tls_phase */
	bool send_again;       /* a record send returned E_AGAIN: retry it with (NULL, 0) */
	bool read_wants_write; /* a record receive waits for the socket to be writable */
	bool refused;	       /* counted once in required_refused */
};

/*
 * Load self's credentials (nbd_tls = on|require): the PSK file or the
 * certificate directory's ca-cert.pem (optional), server-cert.pem and
 * server-key.pem. A key file readable by group or others is refused, as the
 * cluster's secret_file. @return 0 (nothing to load is 0 too), or -errno
 * with err set to a one-line reason.
 */
int nbd_tls_init(struct nbd_tls *t, const struct config_node *self, char *err, size_t errlen);

/*
 * A reload: read self's key files again (their paths may have changed too;
 * nbd_tls itself may not: that needs a restart) and make new sessions with
 * them; sessions already made keep theirs. On failure the running
 * credentials stay. @return 0, or -errno with err set.
 */
int nbd_tls_reload(struct nbd_tls *t, const struct config_node *self, char *err, size_t errlen);

/* Drop the server's credentials. Safe on a zeroed or half-made t. */
void nbd_tls_fini(struct nbd_tls *t);

/* @return true when this server answers STARTTLS (credentials loaded). */
static inline bool nbd_tls_offered(const struct nbd_tls *t)
{
	return t->creds != NULL;
}

/*
 * The client's NBD_OPT_STARTTLS was answered with an ACK (queued): stop
 * reading plaintext; once the ACK is sent, the handshake starts.
 */
void nbd_tls_starting(struct nbd_conn *c);

/*
 * A plaintext client asked for more than STARTTLS or ABORT under
 * nbd_tls = require: count the connection once and log it once.
 */
void nbd_tls_refused(struct nbd_conn *c, uint32_t opt);

/* The watcher's callback while c->tls.phase != NBD_TLS_PLAIN. */
void nbd_tls_io(struct nbd_conn *c, int revents);

/*
 * Send c->out[out_off..out_len) as records. @return 0 all sent, 1 the
 * socket is full (some left), or CONN_CLOSED.
 */
int nbd_tls_push(struct nbd_conn *c);

/*
 * nbd_watch() for a TLS connection, with the events it chose (ev): the
 * handshake's direction, or ev; a read event is fed when decrypted input is
 * buffered in the session (the socket will not say so).
 */
void nbd_tls_watch(struct nbd_conn *c, int ev);

/* Closing: count a handshake left unfinished, say goodbye, free the session. */
void nbd_tls_close(struct nbd_conn *c);

void nbd_tls_foreach_stat(const struct nbd_tls *t,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg);

#endif /* RAMSTER_NODE_NBD_TLS_H */
