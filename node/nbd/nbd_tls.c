/*
 * nbd_tls.c - TLS for the NBD frontend (nbd_tls.h), written as nbdkit's
 * server/crypto.c: PSK (psktool's username:hexkey file) or X.509 (a
 * directory of ca-cert.pem, server-cert.pem, server-key.pem), one
 * non-blocking GnuTLS session a connection after NBD_OPT_STARTTLS.
 *
 * Invariants: a session exists only from the end of the STARTTLS ACK to the
 * close; nothing is read from the socket in plaintext once STARTTLS was
 * answered; decrypted bytes GnuTLS holds (gnutls_record_check_pending) are
 * taken without waiting for the socket, by feeding the watcher a read event.
 * A handshake's time is bounded by nbd_handshake_timeout_ms (nbd_limits.c:
 * the connection is still before transmission).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/log.h"
#include "node/nbd/nbd_int.h"

/* nbdkit's and libnbd's priorities: PSK needs its key exchanges named */
#define NBD_TLS_PRIO_PSK  "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK"
#define NBD_TLS_PRIO_X509 "NORMAL"
#define NBD_TLS_READ_TURN (1u << 20) /* bytes a connection decrypts in one turn of the loop */
#define NBD_TLS_PSK_MAX	  (1u << 20) /* a PSK file larger than this is not one */

/* ---- credentials ---------------------------------------------------------------- */

/*
 * A key file must be a regular file readable by its owner only (the rule
 * of the cluster's secret_file, cluster_load_key). fd: open on path.
 */
static int nbd_tls_key_mode(int fd, const char *key, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot stat %s %s: %s", key, path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s is not a regular file", key, path);
		return -EINVAL;
	}
	if (st.st_mode & (S_IRGRP | S_IROTH)) {
		snprintf(err, errlen, "%s %s is readable by group or others (chmod 600)", key,
			 path);
		return -EACCES;
	}
	return 0;
}

/* Open path and check its mode. @return the fd, or -errno with err set. */
static int nbd_tls_key_open(const char *key, const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), rc;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s %s: %s", key, path, strerror(errno));
		return rc;
	}
	rc = nbd_tls_key_mode(fd, key, path, err, errlen);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

/*
 * psktool's format: "username:hexkey" a line. GnuTLS reads the file at each
 * handshake and says nothing of a bad one at load: check it whole here.
 */
static int nbd_tls_psk_check(const char *path, char *err, size_t errlen)
{
	char *buf, *line, *next, *colon;
	size_t n = 0, lineno = 0, keys = 0, hlen;
	ssize_t r;
	int fd, rc = 0;

	fd = nbd_tls_key_open("nbd_tls_psk", path, err, errlen);
	if (fd < 0)
		return fd;
	buf = malloc(NBD_TLS_PSK_MAX + 1);
	if (!buf) {
		snprintf(err, errlen, "nbd_tls_psk: out of memory");
		rc = -ENOMEM;
		goto close_fd;
	}
	while (n <= NBD_TLS_PSK_MAX) {
		r = read(fd, buf + n, NBD_TLS_PSK_MAX + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			snprintf(err, errlen, "cannot read nbd_tls_psk %s: %s", path,
				 strerror(errno));
			goto wipe;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > NBD_TLS_PSK_MAX) {
		rc = -EFBIG;
		snprintf(err, errlen, "nbd_tls_psk %s: larger than %u bytes", path,
			 NBD_TLS_PSK_MAX);
		goto wipe;
	}
	buf[n] = '\0';
	for (line = buf; line < buf + n; line = next) {
		next = line + strcspn(line, "\n");
		if (*next)
			*next++ = '\0';
		lineno++;
		if (!*line || *line == '#')
			continue;
		colon = strchr(line, ':');
		hlen = colon ? strspn(colon + 1, "0123456789abcdefABCDEF") : 0;
		if (!colon || colon == line || !hlen || hlen % 2 || colon[1 + hlen]) {
			rc = -EINVAL;
			snprintf(err, errlen,
				 "nbd_tls_psk %s:%zu: not 'username:hexkey' (make the file with "
				 "psktool -u NAME -p FILE)",
				 path, lineno);
			goto wipe;
		}
		keys++;
	}
	if (!keys) {
		rc = -EINVAL;
		snprintf(err, errlen, "nbd_tls_psk %s: no key in it (psktool -u NAME -p FILE)",
			 path);
	}
wipe:
	explicit_bzero(buf, n);
	free(buf);
close_fd:
	close(fd);
	return rc;
}

static int nbd_tls_init_psk(struct nbd_tls_creds *t, const char *path, char *err, size_t errlen)
{
	int rc = nbd_tls_psk_check(path, err, errlen);

	if (rc)
		return rc;
	rc = gnutls_psk_allocate_server_credentials(&t->psk);
	if (rc < 0) {
		snprintf(err, errlen, "nbd_tls_psk: %s", gnutls_strerror(rc));
		return -ENOMEM;
	}
	rc = gnutls_psk_set_server_credentials_file(t->psk, path);
	if (rc < 0) {
		snprintf(err, errlen, "nbd_tls_psk %s: %s", path, gnutls_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

/*
 * A client certificate is not required (nbdkit without --tls-verify-peer),
 * but one that is sent must chain to ca-cert.pem: GnuTLS's own check
 * (gnutls_session_set_verify_cert) would also refuse a client that sends
 * none. @return 0 (go on) or -1 (the handshake fails).
 */
static int nbd_tls_verify_client(gnutls_session_t s)
{
	unsigned n = 0, status = 0;

	if (!gnutls_certificate_get_peers(s, &n) || n == 0)
		return 0;
	if (gnutls_certificate_verify_peers2(s, &status) < 0 || status)
		return -1;
	return 0;
}

static int nbd_tls_init_x509(struct nbd_tls_creds *t, const char *dir, char *err, size_t errlen)
{
	char ca[CONFIG_PATH_MAX + 16], cert[CONFIG_PATH_MAX + 16], key[CONFIG_PATH_MAX + 16];
	int rc, fd;

	snprintf(ca, sizeof(ca), "%s/ca-cert.pem", dir);
	snprintf(cert, sizeof(cert), "%s/server-cert.pem", dir);
	snprintf(key, sizeof(key), "%s/server-key.pem", dir);
	fd = nbd_tls_key_open("nbd_tls_certificates' key", key, err, errlen);
	if (fd < 0)
		return fd;
	close(fd);
	rc = gnutls_certificate_allocate_credentials(&t->x509);
	if (rc < 0) {
		snprintf(err, errlen, "nbd_tls_certificates: %s", gnutls_strerror(rc));
		return -ENOMEM;
	}
	if (access(ca, F_OK) == 0) {
		rc = gnutls_certificate_set_x509_trust_file(t->x509, ca, GNUTLS_X509_FMT_PEM);
		if (rc <= 0) {
			snprintf(err, errlen, "nbd_tls_certificates: %s: %s", ca,
				 rc < 0 ? gnutls_strerror(rc) : "no certificate in it");
			return -EINVAL;
		}
		t->verify_clients = true;
		gnutls_certificate_set_verify_function(t->x509, nbd_tls_verify_client);
	}
	rc = gnutls_certificate_set_x509_key_file(t->x509, cert, key, GNUTLS_X509_FMT_PEM);
	if (rc < 0) {
		snprintf(err, errlen, "nbd_tls_certificates: %s with %s: %s", cert, key,
			 gnutls_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

static void nbd_tls_creds_put(struct nbd_tls_creds *k)
{
	if (!k || --k->refs)
		return;
	if (k->prio)
		gnutls_priority_deinit(k->prio);
	if (k->psk)
		gnutls_psk_free_server_credentials(k->psk);
	if (k->x509)
		gnutls_certificate_free_credentials(k->x509);
	free(k);
}

/* Load self's key files into a new set (one reference). @return it, or NULL with err set. */
static struct nbd_tls_creds *nbd_tls_creds_load(const struct config_node *self, char *err,
						size_t errlen)
{
	struct nbd_tls_creds *k = calloc(1, sizeof(*k));
	const char *prio;
	int rc;

	if (!k) {
		snprintf(err, errlen, "nbd_tls: out of memory");
		return NULL;
	}
	k->refs = 1;
	if (self->nbd_tls_psk[0]) {
		rc = nbd_tls_init_psk(k, self->nbd_tls_psk, err, errlen);
		prio = NBD_TLS_PRIO_PSK;
	} else {
		rc = nbd_tls_init_x509(k, self->nbd_tls_certificates, err, errlen);
		prio = NBD_TLS_PRIO_X509;
	}
	if (!rc) {
		rc = gnutls_priority_init(&k->prio, prio, NULL);
		if (rc < 0) {
			snprintf(err, errlen, "nbd_tls: priority %s: %s", prio, gnutls_strerror(rc));
			k->prio = NULL;
		}
	}
	if (rc) {
		nbd_tls_creds_put(k);
		return NULL;
	}
	return k;
}

int nbd_tls_init(struct nbd_tls *t, const struct config_node *self, char *err, size_t errlen)
{
	t->mode = self ? self->nbd_tls : NBD_TLS_UNSET;
	if (t->mode != NBD_TLS_ON && t->mode != NBD_TLS_REQUIRE)
		return 0;
	t->creds = nbd_tls_creds_load(self, err, errlen);
	return t->creds ? 0 : -EINVAL;
}

int nbd_tls_reload(struct nbd_tls *t, const struct config_node *self, char *err, size_t errlen)
{
	struct nbd_tls_creds *k;

	if (!t->creds)
		return 0; /* TLS off: turning it on needs a restart (the listener's rule) */
	k = nbd_tls_creds_load(self, err, errlen);
	if (!k)
		return -EINVAL;
	nbd_tls_creds_put(t->creds);
	t->creds = k;
	t->reloads++;
	return 0;
}

void nbd_tls_fini(struct nbd_tls *t)
{
	nbd_tls_creds_put(t->creds);
	t->creds = NULL;
}

/* ---- a connection's session ------------------------------------------------------- */

/* A failed or abandoned handshake, or a broken record stream: count, log once, close. */
static void nbd_tls_fail(struct nbd_conn *c, const char *what, int gerr)
{
	bool shaking = c->tls.phase == NBD_TLS_SHAKING || c->tls.phase == NBD_TLS_STARTING;
	char why[192];

	if (shaking)
		c->srv->tls.failures++;
	else
		c->srv->st.io_errors++;
	snprintf(why, sizeof(why), "%s%s%s%s%s", shaking ? "TLS handshake failed" : "TLS",
		 *what ? ": " : "", what, gerr ? ": " : "", gerr ? gnutls_strerror(gerr) : "");
	c->tls.phase = NBD_TLS_DOWN;
	log_notice("nbd connection %llu: %s: closing", (unsigned long long)c->id, why);
	nbd_close(c, why);
}

void nbd_tls_starting(struct nbd_conn *c)
{
	c->tls.phase = NBD_TLS_STARTING;
}

void nbd_tls_refused(struct nbd_conn *c, uint32_t opt)
{
	static const char *const names[] = {[NBD_OPT_EXPORT_NAME] = "EXPORT_NAME",
					    [NBD_OPT_LIST] = "LIST",
					    [NBD_OPT_INFO] = "INFO",
					    [NBD_OPT_GO] = "GO",
					    [NBD_OPT_STRUCTURED_REPLY] = "STRUCTURED_REPLY",
					    [NBD_OPT_LIST_META_CONTEXT] = "LIST_META_CONTEXT",
					    [NBD_OPT_SET_META_CONTEXT] = "SET_META_CONTEXT"};
	const char *name = opt < sizeof(names) / sizeof(names[0]) && names[opt] ? names[opt] : "?";

	if (c->tls.refused)
		return;
	c->tls.refused = true;
	c->srv->tls.required_refused++;
	log_notice("nbd connection %llu: plaintext client refused: option %u (%s) before "
		   "STARTTLS (nbd_tls = require)",
		   (unsigned long long)c->id, opt, name);
}

/* Make the session once the ACK is out. @return 0, or CONN_CLOSED. */
static int nbd_tls_begin(struct nbd_conn *c)
{
	struct nbd_tls_creds *t = c->srv->tls.creds;
	gnutls_session_t s;
	int rc;

	if (c->in_len > c->in_off) {
		/* the client must wait for the ACK before its ClientHello */
		nbd_tls_fail(c, "bytes after STARTTLS before its reply", 0);
		return CONN_CLOSED;
	}
	c->in_off = c->in_len = 0;
	rc = gnutls_init(&s, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
	if (rc < 0) {
		nbd_tls_fail(c, "gnutls_init", rc);
		return CONN_CLOSED;
	}
	c->tls.s = s;
	c->tls.creds = t; /* this session's set, even after a reload */
	t->refs++;
	rc = gnutls_priority_set(s, t->prio);
	if (rc >= 0 && t->psk)
		rc = gnutls_credentials_set(s, GNUTLS_CRD_PSK, t->psk);
	if (rc >= 0 && t->x509) {
		rc = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, t->x509);
		if (t->verify_clients) {
			/* asked for, not required; one sent is checked. No list of our
			 * CAs goes out, so a client offers what it has, not only what
			 * we would trust (which would hide a wrong one) */
			gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
			gnutls_certificate_send_x509_rdn_sequence(s, 1);
		}
	}
	if (rc < 0) {
		nbd_tls_fail(c, "session setup", rc);
		return CONN_CLOSED;
	}
	/* our sweep bounds the handshake (nbd_handshake_timeout_ms), not GnuTLS's clock */
	gnutls_handshake_set_timeout(s, GNUTLS_INDEFINITE_TIMEOUT);
	gnutls_transport_set_int(s, c->fd);
	c->tls.phase = NBD_TLS_SHAKING;
	return 0;
}

/* Run the handshake as far as the socket lets it. */
static void nbd_tls_shake(struct nbd_conn *c)
{
	int rc;

	for (;;) {
		rc = gnutls_handshake(c->tls.s);
		if (rc == GNUTLS_E_SUCCESS)
			break;
		if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
			nbd_watch(c);
			return;
		}
		if (gnutls_error_is_fatal(rc)) {
			nbd_tls_fail(c, "", rc);
			return;
		}
		/* a warning alert: go on */
	}
	c->tls.phase = NBD_TLS_UP;
	c->srv->tls.handshakes++;
	log_debug("nbd connection %llu: TLS up (%s)", (unsigned long long)c->id,
		  gnutls_cipher_get_name(gnutls_cipher_get(c->tls.s)));
	nbd_process(c); /* the options go on inside TLS; watches (and feeds buffered input) */
}

/*
 * Decrypt what there is, as much as the input buffer takes (grown as the
 * plaintext path grows it: one request's payload at most) and a turn
 * allows, then run it.
 */
static void nbd_tls_read(struct nbd_conn *c)
{
	size_t want = c->in_len + NBD_IN_MIN / 4, got = 0;
	unsigned warnings = 0;
	ssize_t k;

	c->tls.read_wants_write = false;
	if (want < c->in_off + c->in_need)
		want = c->in_off + c->in_need;
	if (nbd_reserve(&c->in, &c->in_cap, want)) {
		c->srv->st.oom_closes++;
		nbd_close(c, "out of memory for a request");
		return;
	}
	while (c->in_len < c->in_cap && got < NBD_TLS_READ_TURN) {
		k = gnutls_record_recv(c->tls.s, c->in + c->in_len, c->in_cap - c->in_len);
		if (k > 0) {
			c->in_len += (size_t)k;
			got += (size_t)k;
			continue;
		}
		if (k == 0 || k == GNUTLS_E_PREMATURE_TERMINATION) {
			/* a close without close_notify is how most clients leave: as EOF */
			nbd_close(c, c->in_len > c->in_off ? "end of stream inside a message"
							   : "end of stream");
			return;
		}
		if (k == GNUTLS_E_INTERRUPTED)
			continue;
		if (k == GNUTLS_E_AGAIN) {
			c->tls.read_wants_write = gnutls_record_get_direction(c->tls.s) == 1;
			break;
		}
		if (!gnutls_error_is_fatal((int)k) && ++warnings < 16)
			continue; /* a warning alert, a refused renegotiation */
		nbd_tls_fail(c, "receive", (int)k);
		return;
	}
	if (!got) {
		nbd_watch(c);
		return;
	}
	nbd_process(c); /* watches: buffered records are fed back as a read event */
}

int nbd_tls_push(struct nbd_conn *c)
{
	ssize_t k;

	while (c->out_off < c->out_len) {
		if (c->tls.send_again)
			k = gnutls_record_send(c->tls.s, NULL, 0); /* the same record as before */
		else
			k = gnutls_record_send(c->tls.s, c->out + c->out_off,
					       c->out_len - c->out_off);
		if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) {
			c->tls.send_again = true;
			if (k == GNUTLS_E_AGAIN)
				return 1;
			continue;
		}
		c->tls.send_again = false;
		if (k < 0) {
			nbd_tls_fail(c, "send", (int)k);
			return CONN_CLOSED;
		}
		c->out_off += (size_t)k;
	}
	return 0;
}

void nbd_tls_io(struct nbd_conn *c, int revents)
{
	switch (c->tls.phase) {
	case NBD_TLS_STARTING: /* the ACK goes out in plaintext; then the handshake */
		if (nbd_send(c))
			return;
		if (c->out_off < c->out_len) {
			nbd_watch(c);
			return;
		}
		if (nbd_tls_begin(c))
			return;
		nbd_tls_shake(c);
		return;
	case NBD_TLS_SHAKING:
		nbd_tls_shake(c);
		return;
	case NBD_TLS_UP:
		if ((revents & EV_WRITE) && c->tls.read_wants_write) {
			nbd_tls_read(c);
			return;
		}
		if (revents & EV_WRITE) {
			nbd_writable(c);
			return;
		}
		if (revents & EV_READ)
			nbd_tls_read(c);
		return;
	default:
		return;
	}
}

void nbd_tls_watch(struct nbd_conn *c, int ev)
{
	struct ev_loop *loop = c->srv->loop;
	bool feed = false;

	switch (c->tls.phase) {
	case NBD_TLS_STARTING:
		ev = EV_WRITE; /* nothing is read until the session exists */
		break;
	case NBD_TLS_SHAKING:
		ev = gnutls_record_get_direction(c->tls.s) ? EV_WRITE : EV_READ;
		break;
	case NBD_TLS_UP:
		if ((ev & EV_READ) && c->tls.read_wants_write)
			ev |= EV_WRITE;
		feed = (ev & EV_READ) && gnutls_record_check_pending(c->tls.s) > 0;
		break;
	default:
		ev = 0;
	}
	if (!ev_is_active(&c->io) || (c->io.events & (EV_READ | EV_WRITE)) != ev) {
		ev_io_stop(loop, &c->io);
		if (!ev)
			return;
		ev_io_set(&c->io, c->fd, ev);
		ev_io_start(loop, &c->io);
	}
	if (feed) /* after the start: a stop clears what was fed */
		ev_feed_event(loop, &c->io, EV_READ);
}

void nbd_tls_close(struct nbd_conn *c)
{
	if (c->tls.phase == NBD_TLS_SHAKING || c->tls.phase == NBD_TLS_STARTING) {
		c->srv->tls.failures++; /* abandoned: the client went, or the time ran out */
		log_notice("nbd connection %llu: TLS handshake not finished: closing",
			   (unsigned long long)c->id);
	}
	if (c->tls.s) {
		if (c->tls.phase == NBD_TLS_UP)
			(void)gnutls_bye(c->tls.s, GNUTLS_SHUT_WR); /* once, not waited for */
		gnutls_deinit(c->tls.s);
		c->tls.s = NULL;
	}
	nbd_tls_creds_put(c->tls.creds);
	c->tls.creds = NULL;
	c->tls.phase = NBD_TLS_PLAIN;
}

void nbd_tls_foreach_stat(const struct nbd_tls *t,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg)
{
	fn(arg, "nbd_tls_handshakes", t->handshakes, "NBD TLS handshakes completed");
	fn(arg, "nbd_tls_failures", t->failures,
	   "NBD TLS handshakes failed (bad key or certificate, garbage) or abandoned");
	fn(arg, "nbd_tls_required_refused", t->required_refused,
	   "plaintext NBD connections refused (nbd_tls = require)");
	fn(arg, "nbd_tls_reloads", t->reloads,
	   "NBD TLS keys read again by a reload (new sessions use them)");
}
