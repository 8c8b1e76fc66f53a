/*
 * nbd_io.c - backing-file I/O off the event loop. One worker thread takes
 * jobs from a queue and runs them (an fdatasync of an export's backing
 * file, which may take seconds on a busy disk), then hands them back to the
 * loop through a handoff (node/handoff.h), as the remotify thread does; the
 * job's done callback runs on the loop.
 *
 * The worker starts with the first export that has a backing file and is
 * stopped (joined) before any backing file is closed. Its queue lock is a
 * leaf. A job touches only its own fields off the loop (fd, result).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/log.h"
#include "node/nbd_int.h"

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
		j->result = fdatasync(j->fd) ? -errno : 0;
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
