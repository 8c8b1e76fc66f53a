/*
 * nbd_handover.c - the connections across a re-execution (nbd.h).
 *
 * A warm restart (SIGUSR2 and `ramsterctl restart` re-execute the daemon;
 * `systemctl restart` passes through systemd's fd store) used to close every
 * NBD socket. A kernel client then lost the
 * requests it had sent and not had answered: it waited its request timeout
 * (docs/warm-restart.md) before it sent them again on a new socket. Now the
 * socket itself goes across: the old process stops taking requests, answers
 * the ones it runs, and leaves the socket open over the exec (or hands it to
 * the fd store: node/restart/restart.c); the new one serves it from where
 * the old one stopped. What the client sent meanwhile
 * waits in the socket; what the old process had read and not taken goes in
 * the record. The client sees a pause of the restart's length, no error and
 * no reconnection.
 *
 * Not handed over: TLS connections (a session's keys and sequence numbers
 * would have to go too: they close, as before, and the client reconnects),
 * connections still negotiating, and any whose export's pages the new
 * process does not take back (serving them would answer zeros for blocks
 * the client wrote).
 *
 * NBDC record: u32 fd, u32 export number, u32 flags, u32 unread length;
 * then the unread bytes (a request header and at most its payload).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "node/log.h"
#include "node/nbd/nbd_int.h"

#define NBDC_HEAD	      16
#define NBDC_STRUCTURED	      (1u << 0)
#define NBDC_META_ALLOC	      (1u << 1)
#define NBDC_TCP	      (1u << 2)
#define NBDC_FLAGS	      (NBDC_STRUCTURED | NBDC_META_ALLOC | NBDC_TCP)
#define NBDC_UNREAD_MAX	      (NBD_REQ_HDR + NBD_PAYLOAD_MAX)

void nbd_quiesce(struct nbd *n)
{
	struct nbd_conn *c;

	if (!n)
		return;
	n->quiescing = true;
	for (c = n->conns; c; c = c->next)
		nbd_watch(c); /* no more reading */
}

void nbd_resume(struct nbd *n)
{
	struct nbd_conn *c, *next;

	if (!n || !n->quiescing)
		return;
	n->quiescing = false;
	for (c = n->conns; c; c = next) {
		next = c->next; /* nbd_process may close c */
		if (!c->busy && !c->tls.phase)
			nbd_process(c); /* what it had read meanwhile */
		else
			nbd_watch(c);
	}
}

/* A connection the next process can serve: plain, transmitting, on a kept export. */
static bool conn_handable(const struct nbd_conn *c)
{
	return c->transmit && !c->tls.phase && !c->tls.s && c->exp && c->exp->has_pool &&
	       !c->closing && !c->closed;
}

/* Nothing of it runs: no request, no page out, no reply unsent. */
static bool conn_idle(const struct nbd_conn *c)
{
	return !c->busy && !c->pending && !c->fj && !c->flush_queued &&
	       c->out_off == c->out_len && !ev_is_active(&c->yield);
}

bool nbd_quiet(const struct nbd *n)
{
	const struct nbd_conn *c;

	for (c = n ? n->conns : NULL; c; c = c->next)
		if (conn_handable(c) && !conn_idle(c))
			return false;
	return true;
}

int nbd_save_conns(const struct nbd *n,
		   int (*emit)(void *arg, uint16_t tag, const void *head, size_t head_len,
			       const void *body, size_t body_len),
		   void *arg, int *fds, size_t max)
{
	const struct nbd_conn *c;
	uint8_t head[NBDC_HEAD];
	size_t count = 0;
	int rc;

	for (c = n ? n->conns : NULL; c && count < max; c = c->next) {
		size_t unread = c->in_len - c->in_off;
		uint32_t flags = (c->structured ? NBDC_STRUCTURED : 0) |
				 (c->meta_alloc && c->meta == c->exp ? NBDC_META_ALLOC : 0) |
				 (c->tcp ? NBDC_TCP : 0);

		if (!conn_handable(c) || !conn_idle(c) || unread > NBDC_UNREAD_MAX)
			continue; /* it closes at the exec */
		put_le32(head, (uint32_t)c->fd);
		put_le32(head + 4, c->exp->number);
		put_le32(head + 8, flags);
		put_le32(head + 12, (uint32_t)unread);
		rc = emit(arg, NBD_TAG_CONN, head, sizeof(head), c->in + c->in_off, unread);
		if (rc)
			return rc;
		fds[count++] = c->fd; /* left open over the exec by restart_exec */
	}
	if (count)
		log_notice("restart: %zu NBD connection%s handed over", count, count == 1 ? "" : "s");
	return (int)count;
}

int nbd_conn_record_parse(const uint8_t *rec, size_t len, struct nbd_conn_saved *out)
{
	uint32_t fd, flags;

	if (len < NBDC_HEAD)
		return -EBADMSG;
	fd = get_le32(rec);
	out->number = get_le32(rec + 4);
	flags = get_le32(rec + 8);
	out->unread_len = get_le32(rec + 12);
	if (fd < 3 || fd > 65535 || (flags & ~NBDC_FLAGS) || out->unread_len > NBDC_UNREAD_MAX ||
	    len - NBDC_HEAD != out->unread_len)
		return -EBADMSG;
	out->fd = (int)fd;
	out->structured = flags & NBDC_STRUCTURED;
	out->meta_alloc = flags & NBDC_META_ALLOC;
	out->tcp = flags & NBDC_TCP;
	out->unread = rec + NBDC_HEAD;
	return 0;
}

int nbd_conn_record_fd(const uint8_t *rec, size_t len)
{
	struct nbd_conn_saved s;

	return nbd_conn_record_parse(rec, len, &s) ? -1 : s.fd;
}

int nbd_adopt_conn(struct nbd *n, const uint8_t *rec, size_t len, int fd)
{
	struct nbd_export *e = NULL;
	struct nbd_conn_saved s;
	struct nbd_conn *c;
	struct stat st;
	size_t i;
	int rc = -EBADMSG;

	if (nbd_conn_record_parse(rec, len, &s))
		goto refuse;
	rc = -ENOTSOCK;
	if (fstat(fd, &st) || !S_ISSOCK(st.st_mode))
		goto refuse;
	rc = -ENOENT;
	for (i = 0; n && i < n->n_exports; i++)
		if (n->exports[i].number == s.number && n->exports[i].has_pool)
			e = &n->exports[i];
	if (!e)
		goto refuse;
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	c = nbd_conn_make(n, fd, s.tcp, s.unread_len + NBD_IN_MIN / 4);
	if (!c)
		return -ENOMEM; /* closed and counted */
	c->got_flags = true;
	c->transmit = true;
	c->exp = e;
	e->clients++;
	c->structured = s.structured;
	if (s.meta_alloc) {
		c->meta = e;
		c->meta_alloc = true;
	}
	memcpy(c->in, s.unread, s.unread_len);
	c->in_len = s.unread_len;
	n->st.adopted++;
	log_notice("nbd connection %llu on export %s taken over from before the restart",
		   (unsigned long long)c->id, e->name);
	nbd_process(c); /* what the old process had read, then the socket */
	return 0;

refuse:
	if (n)
		n->st.adopt_refused++;
	close(fd);
	return rc;
}
