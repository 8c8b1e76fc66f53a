/*
 * nbd_io.c - backing-file I/O off the event loop. One worker thread takes
 * jobs from a queue, in order, and runs them (an fdatasync of an export's
 * backing file, which may take seconds on a busy disk, or a batch of
 * preads, pwrites and hole punches: every operation on a backing file goes
 * this way, so the file sees them in the order the loop submitted them),
 * then hands them back to the loop through a handoff (node/handoff.h), as
 * the remotify thread does; the job's done callback runs on the loop.
 *
 * The worker starts with the first export that has a backing file and is
 * stopped (joined) before any backing file is closed. Its queue lock is a
 * leaf. A job touches only its own fields off the loop (fd, result).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "node/log.h"
#include "node/nbd/nbd_int.h"

/* One operation on fd. @return 0 or -errno. */
static int nbd_op_run(int fd, struct nbd_op *op)
{
	off_t off = (off_t)(op->block * NBD_PAGE);
	ssize_t k;

	switch (op->kind) {
	case NBD_OP_READ:
		do
			k = pread(fd, op->page, NBD_PAGE, off);
		while (k < 0 && errno == EINTR);
		if (k < 0)
			return -EIO;
		if (k < (ssize_t)NBD_PAGE) /* past the end of a file cut short: zeros */
			memset(op->page + k, 0, NBD_PAGE - (size_t)k);
		return 0;
	case NBD_OP_STORE:
	case NBD_OP_BEHIND:
		do
			k = pwrite(fd, op->page, NBD_PAGE, off);
		while (k < 0 && errno == EINTR);
		if (k == (ssize_t)NBD_PAGE)
			return 0;
		return k < 0 ? -errno : -EIO;
	case NBD_OP_PUNCH:
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
			      (off_t)(op->count * NBD_PAGE)))
			return -errno;
		return 0;
	}
	return -EINVAL;
}

static void *nbd_io_main(void *arg)
{
	struct nbd_io *io = arg;
	struct nbd_job *j;

	pthread_mutex_lock(&io->lock);
	for (;;) {
		while (!io->head && !io->stop)
			pthread_cond_wait(&io->cond, &io->lock);
		if (!io->head)
			break; /* stopping, nothing left */
		j = io->head;
		io->head = j->next;
		if (!io->head)
			io->tail = &io->head;
		pthread_mutex_unlock(&io->lock);
		if (j->n_ops) {
			size_t i;

			j->result = 0;
			for (i = 0; i < j->n_ops; i++) {
				j->ops[i].result = nbd_op_run(j->fd, &j->ops[i]);
				if (j->ops[i].result && !j->result)
					j->result = j->ops[i].result;
			}
		} else {
			j->result = fdatasync(j->fd) ? -errno : 0;
		}
		handoff_push(&io->done, &j->it);
		pthread_mutex_lock(&io->lock);
	}
	pthread_mutex_unlock(&io->lock);
	return NULL;
}

static void nbd_io_done(void *arg, struct handoff_item *list)
{
	while (list) {
		struct nbd_job *j = (struct nbd_job *)list;

		list = list->next;
		j->done(j);
	}
}

int nbd_io_start(struct nbd *n)
{
	struct nbd_io *io = &n->io;
	sigset_t all, old;
	int rc;

	if (io->started)
		return 0;
	io->head = NULL;
	io->tail = &io->head;
	io->stop = false;
	pthread_mutex_init(&io->lock, NULL);
	pthread_cond_init(&io->cond, NULL);
	handoff_init(&io->done, n->loop, nbd_io_done, n);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* signals stay the loop's */
	rc = pthread_create(&io->thread, NULL, nbd_io_main, io);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		(void)handoff_fini(&io->done);
		pthread_cond_destroy(&io->cond);
		pthread_mutex_destroy(&io->lock);
		return -rc;
	}
	io->started = true;
	return 0;
}

void nbd_io_submit(struct nbd *n, struct nbd_job *j)
{
	struct nbd_io *io = &n->io;

	j->next = NULL;
	pthread_mutex_lock(&io->lock);
	*io->tail = j;
	io->tail = &j->next;
	pthread_cond_signal(&io->cond);
	pthread_mutex_unlock(&io->lock);
}

/* ---- a connection's file jobs ---------------------------------------------------- */

int nbd_file_op(struct nbd_conn *c, enum nbd_op_kind kind, uint64_t block, uint64_t count,
		uint8_t *page, struct nbd_slot *slot)
{
	struct nbd_file_job *fj = c->fj;
	struct nbd_op *op;

	if (!fj || fj->j.n_ops == fj->cap) {
		size_t cap = fj ? fj->cap * 2 : 64;

		fj = realloc(fj, sizeof(*fj) + cap * sizeof(fj->op[0]));
		if (!fj)
			return -ENOMEM;
		if (!c->fj)
			fj->j.n_ops = 0;
		fj->cap = cap;
		c->fj = fj;
	}
	op = &fj->op[fj->j.n_ops++];
	op->kind = (uint8_t)kind;
	op->result = 0;
	op->block = block;
	op->count = count;
	op->page = page;
	op->slot = slot;
	return 0;
}

/* On the loop: the job is back. */
static void nbd_file_done(struct nbd_job *j)
{
	struct nbd_file_job *fj = container_of(j, struct nbd_file_job, j);
	struct nbd_conn *c = fj->c;
	size_t i;

	for (i = 0; i < j->n_ops; i++)
		if (fj->op[i].slot)
			fj->op[i].slot->result = fj->op[i].result;
	if (!c->closed)
		nbd_file_settle(c, fj->op, j->n_ops);
	free(fj);
	nbd_pending_drop(c);
}

int nbd_file_submit(struct nbd_conn *c)
{
	struct nbd_file_job *fj = c->fj;

	if (!fj)
		return 0;
	c->fj = NULL;
	fj->c = c;
	fj->j.fd = c->exp->fd;
	fj->j.result = 0;
	fj->j.done = nbd_file_done;
	fj->j.e = c->exp;
	fj->j.ops = fj->op;
	c->pending++;
	nbd_io_submit(c->srv, &fj->j);
	return 1;
}

void nbd_io_stop(struct nbd *n)
{
	struct nbd_io *io = &n->io;
	struct handoff_item *left;

	if (!io->started)
		return;
	pthread_mutex_lock(&io->lock);
	io->stop = true;
	pthread_cond_signal(&io->cond);
	pthread_mutex_unlock(&io->lock);
	pthread_join(io->thread, NULL); /* runs what was queued: every fd is still open */
	io->started = false;
	left = handoff_fini(&io->done);
	nbd_io_done(n, left); /* their connections are closed: this frees them */
	pthread_cond_destroy(&io->cond);
	pthread_mutex_destroy(&io->lock);
}
