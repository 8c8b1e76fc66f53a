/*
 * nbd_handshake.c - the fixed newstyle handshake (the NBD project's
 * doc/proto.md): the greeting, options (EXPORT_NAME, LIST, INFO, GO, ABORT,
 * STRUCTURED_REPLY, LIST/SET_META_CONTEXT with base:allocation, STARTTLS;
 * others refused), and the choice of an export. Under nbd_tls = require a
 * TCP client gets NBD_REP_ERR_TLS_REQD for every option but STARTTLS and
 * ABORT until TLS is up (EXPORT_NAME, which has no error reply: closed).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "node/log.h"
#include "node/nbd/nbd_int.h"

/* ---- handshake ----------------------------------------------------------------- */

static struct nbd_export *nbd_find(struct nbd *n, const uint8_t *name, size_t len)
{
	size_t i;

	if (!len) /* the default export: the first */
		return n->n_exports ? &n->exports[0] : NULL;
	for (i = 0; i < n->n_exports; i++)
		if (strlen(n->exports[i].name) == len && !memcmp(n->exports[i].name, name, len))
			return &n->exports[i];
	return NULL;
}

/* Queue an option reply. @return 0, or CONN_CLOSED. */
static int nbd_opt_reply(struct nbd_conn *c, uint32_t opt, uint32_t type, const void *data,
			 size_t len)
{
	uint8_t *p = nbd_out(c, 20 + len);

	if (!p)
		return CONN_CLOSED;
	nbd_be64(p, NBD_REP_MAGIC);
	nbd_be32(p + 8, opt);
	nbd_be32(p + 12, type);
	nbd_be32(p + 16, (uint32_t)len);
	if (len)
		memcpy(p + 20, data, len);
	return 0;
}

static int nbd_opt_error(struct nbd_conn *c, uint32_t opt, uint32_t type, const char *msg)
{
	return nbd_opt_reply(c, opt, type, msg, strlen(msg));
}

static void nbd_attach(struct nbd_conn *c, struct nbd_export *e)
{
	c->exp = e;
	c->transmit = true;
	c->meta_alloc = c->structured && c->meta == e;
	e->clients++;
	log_debug("nbd connection %llu: export %s", (unsigned long long)c->id, e->name);
}

/* NBD_OPT_INFO and NBD_OPT_GO. @return 0, or CONN_CLOSED. */
static int nbd_opt_info(struct nbd_conn *c, uint32_t opt, const uint8_t *d, uint32_t len)
{
	struct nbd_export *e;
	uint8_t info[14];
	uint32_t nlen;
	uint16_t nreq, i;
	bool want_name = false;

	if (len < 6)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "option data too short");
	nlen = nbd_get32(d);
	if (nlen > len - 6)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "name length past the option");
	nreq = nbd_get16(d + 4 + nlen);
	if ((uint64_t)len != 6 + (uint64_t)nlen + 2u * nreq)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "option length mismatch");
	for (i = 0; i < nreq; i++)
		if (nbd_get16(d + 6 + nlen + 2u * i) == NBD_INFO_NAME)
			want_name = true;
	e = nbd_find(c->srv, d + 4, nlen);
	if (!e)
		return nbd_opt_error(c, opt, NBD_REP_ERR_UNKNOWN, "no such export");
	nbd_be16(info, NBD_INFO_EXPORT);
	nbd_be64(info + 2, e->size);
	nbd_be16(info + 10, NBD_TRANSMIT_FLAGS);
	if (nbd_opt_reply(c, opt, NBD_REP_INFO, info, 12))
		return CONN_CLOSED;
	nbd_be16(info, NBD_INFO_BLOCK_SIZE);
	nbd_be32(info + 2, NBD_BLOCK_MIN);
	nbd_be32(info + 6, NBD_PAGE);
	nbd_be32(info + 10, NBD_PAYLOAD_MAX);
	if (nbd_opt_reply(c, opt, NBD_REP_INFO, info, 14))
		return CONN_CLOSED;
	if (want_name) {
		uint8_t nm[2 + CONFIG_NAME_MAX];
		size_t l = strlen(e->name);

		nbd_be16(nm, NBD_INFO_NAME);
		memcpy(nm + 2, e->name, l);
		if (nbd_opt_reply(c, opt, NBD_REP_INFO, nm, 2 + l))
			return CONN_CLOSED;
	}
	if (nbd_opt_reply(c, opt, NBD_REP_ACK, NULL, 0))
		return CONN_CLOSED;
	if (opt == NBD_OPT_GO)
		nbd_attach(c, e);
	return 0;
}

/*
 * NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT: the one context
 * is base:allocation (holes and data, from the export's bitmaps). A LIST
 * with no queries, or the query "base:", names it; SET picks it for the
 * export named (valid only if that export is the one then chosen).
 * @return 0, or CONN_CLOSED.
 */
static int nbd_opt_meta(struct nbd_conn *c, uint32_t opt, const uint8_t *d, uint32_t len)
{
	static const char ctx[] = NBD_META_ALLOCATION;
	uint8_t rep[4 + sizeof(ctx)];
	struct nbd_export *e;
	uint32_t nlen, nq, i, off, qlen;
	bool found = false;

	if (!c->structured)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "structured replies first");
	if (len < 8)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "option data too short");
	nlen = nbd_get32(d);
	if (nlen > len - 8)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "name length past the option");
	nq = nbd_get32(d + 4 + nlen);
	off = 8 + nlen;
	for (i = 0; i < nq; i++) { /* check the whole list before answering */
		if (len - off < 4 || nbd_get32(d + off) > len - off - 4)
			return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "query past the option");
		off += 4 + nbd_get32(d + off);
	}
	if (off != len)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "option length mismatch");
	e = nbd_find(c->srv, d + 4, nlen);
	if (!e)
		return nbd_opt_error(c, opt, NBD_REP_ERR_UNKNOWN, "no such export");
	off = 8 + nlen;
	for (i = 0; i < nq; i++) {
		const char *q = (const char *)d + off + 4;

		qlen = nbd_get32(d + off);
		off += 4 + qlen;
		if ((qlen == sizeof(ctx) - 1 && !memcmp(q, ctx, qlen)) ||
		    (opt == NBD_OPT_LIST_META_CONTEXT && qlen == 5 && !memcmp(q, "base:", 5)))
			found = true;
	}
	if (opt == NBD_OPT_LIST_META_CONTEXT && nq == 0)
		found = true;
	if (opt == NBD_OPT_SET_META_CONTEXT) {
		c->meta = found ? e : NULL;
		c->meta_alloc = false;
	}
	if (found) {
		nbd_be32(rep, NBD_META_ALLOCATION_ID);
		memcpy(rep + 4, ctx, sizeof(ctx) - 1);
		if (nbd_opt_reply(c, opt, NBD_REP_META_CONTEXT, rep, 4 + sizeof(ctx) - 1))
			return CONN_CLOSED;
	}
	return nbd_opt_reply(c, opt, NBD_REP_ACK, NULL, 0);
}

static int nbd_opt_list(struct nbd_conn *c, uint32_t len)
{
	uint8_t d[4 + CONFIG_NAME_MAX];
	size_t i, l;

	if (len)
		return nbd_opt_error(c, NBD_OPT_LIST, NBD_REP_ERR_INVALID, "LIST takes no data");
	for (i = 0; i < c->srv->n_exports; i++) {
		l = strlen(c->srv->exports[i].name);
		nbd_be32(d, (uint32_t)l);
		memcpy(d + 4, c->srv->exports[i].name, l);
		if (nbd_opt_reply(c, NBD_OPT_LIST, NBD_REP_SERVER, d, 4 + l))
			return CONN_CLOSED;
	}
	return nbd_opt_reply(c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

/*
 * NBD_OPT_STARTTLS: ACK, then the session (nbd_tls.c) once the ACK is out.
 * @return 2 (stop reading plaintext), 1 (answered with an error), CONN_CLOSED.
 */
static int nbd_opt_starttls(struct nbd_conn *c, uint32_t len)
{
	uint32_t opt = NBD_OPT_STARTTLS;

	if (len)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "STARTTLS takes no data") ? -1 : 1;
	if (c->tls.phase == NBD_TLS_UP)
		return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "TLS is already on") ? -1 : 1;
	if (!nbd_tls_offered(&c->srv->tls))
		return nbd_opt_error(c, opt, NBD_REP_ERR_UNSUP, "TLS not configured (nbd_tls)") ? -1
													: 1;
	if (nbd_opt_reply(c, opt, NBD_REP_ACK, NULL, 0))
		return CONN_CLOSED;
	nbd_tls_starting(c);
	return 2;
}

/* A TCP connection under nbd_tls = require that has not done STARTTLS yet. */
static inline bool nbd_tls_needed(const struct nbd_conn *c)
{
	return c->srv->tls.mode == NBD_TLS_REQUIRE && c->tcp && c->tls.phase != NBD_TLS_UP;
}

/*
 * One handshake step. @return 1 progress, 0 more bytes needed, 2 stop
 * (STARTTLS: no more plaintext), CONN_CLOSED.
 */
int nbd_negotiate(struct nbd_conn *c)
{
	const uint8_t *p = c->in + c->in_off;
	size_t avail = c->in_len - c->in_off;
	uint32_t flags, opt, len;
	struct nbd_export *e;

	if (!c->got_flags) {
		if (avail < 4) {
			c->in_need = 4;
			return 0;
		}
		flags = nbd_get32(p);
		if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
			return nbd_violation(c, &c->srv->st.bad_handshakes, "unknown client flags");
		c->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
		c->got_flags = true;
		c->in_off += 4;
		return 1;
	}
	if (avail < NBD_OPT_HDR) {
		c->in_need = NBD_OPT_HDR;
		return 0;
	}
	if (nbd_get64(p) != NBD_IHAVEOPT)
		return nbd_violation(c, &c->srv->st.bad_handshakes, "bad option magic");
	opt = nbd_get32(p + 8);
	len = nbd_get32(p + 12);
	if (len > NBD_OPT_MAX)
		return nbd_violation(c, &c->srv->st.bad_handshakes, "option data too long");
	if (avail < NBD_OPT_HDR + len) {
		c->in_need = NBD_OPT_HDR + len;
		return 0;
	}
	c->in_off += NBD_OPT_HDR + len; /* p stays valid: nothing compacts meanwhile */
	p += NBD_OPT_HDR;
	if (opt == NBD_OPT_STARTTLS)
		return nbd_opt_starttls(c, len);
	if (nbd_tls_needed(c) && opt != NBD_OPT_ABORT) {
		nbd_tls_refused(c, opt);
		if (opt == NBD_OPT_EXPORT_NAME) { /* no error reply exists: the spec has us close */
			nbd_close(c, "NBD_OPT_EXPORT_NAME without TLS (nbd_tls = require)");
			return CONN_CLOSED;
		}
		return nbd_opt_error(c, opt, NBD_REP_ERR_TLS_REQD,
				     "TLS required: send NBD_OPT_STARTTLS first")
			   ? -1
			   : 1;
	}
	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		e = nbd_find(c->srv, p, len);
		if (!e) /* no way to say so: the spec has the server close */
			return nbd_violation(c, &c->srv->st.bad_handshakes, "unknown export name");
		{
			uint8_t *r = nbd_out(c, c->no_zeroes ? 10 : 134);

			if (!r)
				return CONN_CLOSED;
			nbd_be64(r, e->size);
			nbd_be16(r + 8, NBD_TRANSMIT_FLAGS);
			if (!c->no_zeroes)
				memset(r + 10, 0, 124);
		}
		nbd_attach(c, e);
		return 1;
	case NBD_OPT_ABORT:
		c->closing = true;
		return nbd_opt_reply(c, opt, NBD_REP_ACK, NULL, 0) ? -1 : 1;
	case NBD_OPT_LIST:
		return nbd_opt_list(c, len) ? -1 : 1;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return nbd_opt_info(c, opt, p, len) ? -1 : 1;
	case NBD_OPT_STRUCTURED_REPLY:
		if (len)
			return nbd_opt_error(c, opt, NBD_REP_ERR_INVALID, "takes no data") ? -1 : 1;
		c->structured = true;
		return nbd_opt_reply(c, opt, NBD_REP_ACK, NULL, 0) ? -1 : 1;
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		return nbd_opt_meta(c, opt, p, len) ? -1 : 1;
	default:
		return nbd_opt_error(c, opt, NBD_REP_ERR_UNSUP, "option not supported") ? -1 : 1;
	}
}

