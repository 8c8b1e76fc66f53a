/*
 * ramster-netbench - the collective's figures against a running collective:
 * repatriate latency (a get of a page held by a peer) against a baseline
 * measured in the same run (one 4 KiB round trip over a Unix socket plus one
 * over TCP between the nodes' loopback addresses), remotify throughput while
 * a client keeps putting, and the same 4 KiB get against memcached.
 *
 * Latencies come from interleaved rounds of K timed calls each; the report
 * gives the median over rounds of each round's p50 and p99. Every page read
 * back is compared with what was put; a wrong page is an error (exit 1).
 * A report, not a test: no figure is judged here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/figures.h"
#include "tools/jout.h"
#include "ramster.h"
#include "tools/pagegen.h"

#define PAGE 4096
#define DISTINCT 2048        /* distinct page contents; page i is content i % DISTINCT, stamped */
#define ROUNDS_MAX 101
#define REPS_MAX 21
#define PEERS_MAX 8
#define ECHO_HDR 16          /* the baseline's request header: seq and length */
#define SAMPLE_MS 20         /* the remotify sampler's period */
#define SAMPLES_MAX 50000
#define SETTLE_TIMEOUT_S 30.0
#define OBJ_PAGES 1024

/* ---- options ----------------------------------------------------------------------- */

struct opts {
	const char *socket;
	const char *peer_socket[PEERS_MAX];
	unsigned npeers;
	const char *tcp_client, *tcp_server; /* the baseline's TCP ends */
	const char *memcached;               /* the binary; NULL: skip */
	uint64_t pages;                      /* put phase; 0: 4x the tier */
	unsigned put_batch, put_reps, rounds, iters, mc_values;
	unsigned high_pct, fill_pct; /* the collective's high watermark; fill before gets */
	uint64_t seed;
	bool classify_each; /* read the counters after every get (else once a round) */
	bool echo_proc;     /* also the baseline with server processes */
	unsigned ping_node; /* the peer the ping baseline goes through */
	bool json;
};

static struct opts o = {
	.tcp_client = "127.0.0.1",
	.tcp_server = "127.0.0.2",
	.memcached = "memcached",
	.put_batch = 64,
	.put_reps = 5,
	.rounds = 15,
	.iters = 1000,
	.mc_values = 10000,
	.high_pct = 90,
	.fill_pct = 85,
	.seed = 1,
	.classify_each = true,
	.echo_proc = true,
	.ping_node = 2,
};

static uint64_t errors; /* wrong or missing pages, failed calls */
#define ERRORS_SHOWN 10 /* failures described one by one; the rest only counted */

#define note(...) fprintf(stderr, "netbench: " __VA_ARGS__)

/* ---- the clock (figures: tools/figures.c) ------------------------------------------ */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One measured path: each round's p50 and p99, in µs. */
struct series {
	double p50[ROUNDS_MAX], p99[ROUNDS_MAX];
	unsigned n;
	uint64_t calls; /* timed calls counted in the figures, all rounds */
};

static void series_add(struct series *s, double *lat, size_t n)
{
	if (!n || s->n >= ROUNDS_MAX)
		return;
	s->p50[s->n] = figures_quantile(lat, n, 0.5);
	s->p99[s->n] = figures_quantile(lat, n, 0.99);
	s->n++;
	s->calls += n;
}

static double series_p50(const struct series *s)
{
	double v[ROUNDS_MAX];

	memcpy(v, s->p50, sizeof(v));
	return figures_median(v, s->n);
}

static double series_p99(const struct series *s)
{
	double v[ROUNDS_MAX];

	memcpy(v, s->p99, sizeof(v));
	return figures_median(v, s->n);
}

/* ---- pages ------------------------------------------------------------------------- */

_Static_assert(PAGE == PAGEGEN_PAGE_SIZE, "pagegen makes the pages");

static unsigned char *contents; /* DISTINCT pages */

static int pages_init(void)
{
	unsigned i;

	contents = malloc((size_t)DISTINCT * PAGE);
	if (!contents)
		return -ENOMEM;
	for (i = 0; i < DISTINCT; i++)
		pagegen_text_plain(contents + (size_t)i * PAGE, o.seed * 0x100000000ull + i);
	return 0;
}

/* Page i: content i % DISTINCT with i stamped in its first bytes. */
static void page_make(uint64_t i, unsigned char *page)
{
	uint64_t stamp = i ^ (o.seed << 48);

	memcpy(page, contents + (size_t)(i % DISTINCT) * PAGE, PAGE);
	memcpy(page, &stamp, sizeof(stamp));
}

static bool page_check(uint64_t i, const unsigned char *page)
{
	unsigned char want[PAGE];

	page_make(i, want);
	return !memcmp(want, page, PAGE);
}

static struct ramster_oid oid_of(uint64_t i, unsigned rep)
{
	struct ramster_oid oid = { { i / OBJ_PAGES, 0x6e657462656e6368ull, rep } };

	return oid;
}

/* ---- the node's counters ----------------------------------------------------------- */

enum stat_id {
	ST_FRAMES, ST_BUDGET, ST_ZOMBIES, ST_STORED, ST_CBYTES, ST_REMOTE_PAGES, ST_REMOTIFIED,
	ST_REPATRIATED, ST_BROUGHT_HOME, ST_REMOTE_GETS, ST_PLACED, ST_FAILED, ST_NO_TARGET,
	ST_ROOM_WAITS, ST_ROOM_REFUSED, ST_GET_LOST, ST_REMOTE_LOST, ST_FOREIGN, ST_FLUSH_DROPPED,
	ST_FOREIGN_BYTES, ST_FOREIGN_RAM,
	ST_N
};

static const char *const stat_names[ST_N] = {
	[ST_FRAMES] = "tier_frames",
	[ST_BUDGET] = "tier_budget_frames",
	[ST_ZOMBIES] = "tier_zombies",
	[ST_STORED] = "tier_stored_pages",
	[ST_CBYTES] = "tier_compressed_bytes",
	[ST_REMOTE_PAGES] = "tier_remote_pages",
	[ST_REMOTIFIED] = "tier_remotified",
	[ST_REPATRIATED] = "tier_repatriated",
	[ST_BROUGHT_HOME] = "tier_brought_home",
	[ST_REMOTE_GETS] = "tmem_remote_gets",
	[ST_PLACED] = "remote_pages_placed",
	[ST_FAILED] = "remote_pages_failed",
	[ST_NO_TARGET] = "remote_no_target",
	[ST_ROOM_WAITS] = "node_put_room_waits",
	[ST_ROOM_REFUSED] = "node_put_room_refused",
	[ST_GET_LOST] = "remote_get_lost",
	[ST_REMOTE_LOST] = "tier_remote_lost",
	[ST_FOREIGN] = "foreign_pages",
	[ST_FOREIGN_BYTES] = "foreign_bytes",
	[ST_FOREIGN_RAM] = "foreign_ram",
	[ST_FLUSH_DROPPED] = "remote_flushes_dropped",
};

struct snap {
	uint64_t v[ST_N];
};

/* Read the counters named in stat_names (absent ones read 0). @return 0 or -errno. */
static int snap_read(ramster *r, struct snap *sn)
{
	struct ramster_stat *s;
	size_t n, i;
	unsigned k;
	int rc = ramster_stats(r, &s, &n);

	if (rc < 0)
		return rc;
	memset(sn, 0, sizeof(*sn));
	for (i = 0; i < n; i++) {
		if (!s[i].name)
			continue;
		for (k = 0; k < ST_N; k++) {
			if (!strcmp(s[i].name, stat_names[k])) {
				sn->v[k] = s[i].value;
				break;
			}
		}
	}
	ramster_stats_free(s, n);
	return 0;
}

static unsigned usage_pct(const struct snap *s)
{
	return s->v[ST_BUDGET] ? (unsigned)(s->v[ST_FRAMES] * 100 / s->v[ST_BUDGET]) : 0;
}

/* ---- sockets ----------------------------------------------------------------------- */

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = recv(fd, (char *)buf + got, len - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		got += (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = send(fd, (const char *)buf + done, len - done, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

static void tcp_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int inet_addr_of(const char *host, unsigned port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

/* ---- the baseline: 4 KiB echo over a Unix socket and over TCP ---------------------- */

/*
 * A server answers each request (ECHO_HDR bytes + one page) with the page,
 * like a node answering a get; the client times each round trip. The server
 * is a thread of this process, or (--echo process) a child process, as the
 * nodes are.
 */
struct echo {
	const char *name;
	int lfd, cfd;
	bool tcp;
	pthread_t thread;
	bool started;
	pid_t pid;
	char path[108];
	unsigned char out[ECHO_HDR + PAGE], in[PAGE];
};

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

static void echo_close(struct echo *e)
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
static int echo_open(struct echo *e, bool tcp, bool process, const char *dir)
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
static int echo_round(struct echo *e, double *lat, unsigned n, uint64_t *rng)
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

/* ---- memcached: a child on a free loopback port, a minimal text-protocol client ---- */

struct mc {
	pid_t pid;
	int fd;
	unsigned port;
};

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

static void mc_stop(struct mc *m)
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
static int mc_start(struct mc *m)
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
static int mc_set(struct mc *m, unsigned key, const unsigned char *page)
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
static int mc_get(struct mc *m, unsigned key, unsigned char *page, double *us)
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

/* ---- the put phase: remotify while the client keeps putting ------------------------ */

struct sample {
	double t;
	uint64_t remotified, frames;
};

/* A thread on its own connection reading the node's counters every SAMPLE_MS. */
struct sampler {
	ramster *r;
	pthread_t thread;
	atomic_bool stop;
	struct sample *s;
	size_t n;
};

static void *sampler_main(void *arg)
{
	struct sampler *sp = arg;
	struct snap sn;

	while (!atomic_load(&sp->stop)) {
		double t = now();

		if (snap_read(sp->r, &sn) == 0 && sp->n < SAMPLES_MAX) {
			sp->s[sp->n++] =
			    (struct sample){ t, sn.v[ST_REMOTIFIED], sn.v[ST_FRAMES] };
		}
		sleep_ms(SAMPLE_MS);
	}
	return NULL;
}

/* What one put phase measured. */
struct put_fig {
	double put_s, put_pps, full_pps, remotify_pps, remotify_phase_pps, settle_s;
	uint64_t accepted, refused, put_errors, remotified_puts, remotified_total;
	uint64_t room_waits, room_refused, no_target, failed;
	unsigned usage_end, usage_settled;
};

struct progress {
	double t;
	uint64_t accepted;
};

/*
 * Wait until remotify is idle: usage below the high watermark, no zombies,
 * tier_remotified unchanged for 10 samples. (Remotify runs from high down to
 * low, so the tier may rest anywhere below high: puts that stop between the
 * two do not restart it.) @return seconds waited (SETTLE_TIMEOUT_S: gave up).
 */
static double settle(ramster *r, struct snap *sn)
{
	double t0 = now();
	uint64_t last = UINT64_MAX;
	unsigned still = 0;

	while (now() - t0 < SETTLE_TIMEOUT_S) {
		if (snap_read(r, sn))
			break;
		if (sn->v[ST_REMOTIFIED] == last && usage_pct(sn) < o.high_pct &&
		    !sn->v[ST_ZOMBIES]) {
			if (++still >= 10)
				return now() - t0;
		} else {
			still = 0;
		}
		last = sn->v[ST_REMOTIFIED];
		sleep_ms(SAMPLE_MS);
	}
	note("remotify did not go idle below %u%% within %.0f s (usage %u%%, %llu remotified)\n",
	     o.high_pct, SETTLE_TIMEOUT_S, usage_pct(sn), (unsigned long long)sn->v[ST_REMOTIFIED]);
	return SETTLE_TIMEOUT_S;
}

/*
 * Put pages [first, first + n) in batches of o.put_batch, marking accepted
 * ones; fill prog (one entry a batch) if given. @return 0 or -errno.
 */
static int put_range(ramster *r, int pool, unsigned rep, uint64_t first, uint64_t n,
		     unsigned char *accepted, struct put_fig *f, struct progress *prog)
{
	struct ramster_iov *v = calloc(o.put_batch, sizeof(*v));
	unsigned char *buf = malloc((size_t)o.put_batch * PAGE);
	uint64_t i, done = 0;
	size_t b = 0, k;
	int rc = 0;

	if (!v || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = first; i < first + n; i += k) {
		size_t cnt = first + n - i < o.put_batch ? (size_t)(first + n - i) : o.put_batch;

		for (k = 0; k < cnt; k++) {
			v[k].oid = oid_of(i + k, rep);
			v[k].index = (uint32_t)((i + k) % OBJ_PAGES);
			v[k].page = buf + k * PAGE;
			page_make(i + k, buf + k * PAGE);
		}
		rc = ramster_putv(r, pool, v, cnt);
		if (rc < 0) {
			note("putv: %s\n", strerror(-rc));
			goto out;
		}
		rc = 0;
		for (k = 0; k < cnt; k++) {
			accepted[i + k] = v[k].result == 0;
			if (v[k].result == 0)
				done++;
			else if (v[k].result == -ENOSPC || v[k].result == -E2BIG)
				f->refused++;
			else
				f->put_errors++;
		}
		if (prog)
			prog[b++] = (struct progress){ now(), done };
	}
	f->accepted += done;
out:
	free(v);
	free(buf);
	return rc;
}

/* One put phase on a fresh pool: n pages, sampled; then settle. */
static int put_phase(ramster *r, ramster *rs, int pool, unsigned rep, uint64_t n,
		     unsigned char *accepted, struct put_fig *f)
{
	struct sampler sp = { .r = rs };
	struct progress *prog = calloc(n / o.put_batch + 2, sizeof(*prog));
	struct snap s0, s1, s2;
	double t0, t1, t_rem = 0, t_full = 0;
	size_t i;
	int rc;

	memset(f, 0, sizeof(*f));
	sp.s = calloc(SAMPLES_MAX, sizeof(*sp.s));
	if (!prog || !sp.s) {
		free(prog);
		free(sp.s);
		return -ENOMEM;
	}
	rc = snap_read(r, &s0);
	if (!rc && pthread_create(&sp.thread, NULL, sampler_main, &sp))
		rc = -EAGAIN;
	if (rc) {
		free(prog);
		free(sp.s);
		return rc;
	}
	t0 = now();
	rc = put_range(r, pool, rep, 0, n, accepted, f, prog);
	t1 = now();
	atomic_store(&sp.stop, true);
	pthread_join(sp.thread, NULL);
	if (!rc)
		rc = snap_read(r, &s1);
	if (rc)
		goto out;
	f->settle_s = settle(r, &s2);
	f->put_s = t1 - t0;
	f->put_pps = (double)f->accepted / f->put_s;
	f->remotified_puts = s1.v[ST_REMOTIFIED] - s0.v[ST_REMOTIFIED];
	f->remotified_total = s2.v[ST_REMOTIFIED] - s0.v[ST_REMOTIFIED];
	f->remotify_phase_pps = (double)f->remotified_puts / f->put_s;
	f->room_waits = s1.v[ST_ROOM_WAITS] - s0.v[ST_ROOM_WAITS];
	f->room_refused = s1.v[ST_ROOM_REFUSED] - s0.v[ST_ROOM_REFUSED];
	f->no_target = s2.v[ST_NO_TARGET] - s0.v[ST_NO_TARGET];
	f->failed = s2.v[ST_FAILED] - s0.v[ST_FAILED];
	f->usage_end = usage_pct(&s1);
	f->usage_settled = usage_pct(&s2);
	/* remotify's active window: from the last sample before it moved a page */
	for (i = 0; i < sp.n && sp.s[i].t <= t1; i++) {
		if (sp.s[i].remotified == s0.v[ST_REMOTIFIED])
			t_rem = sp.s[i].t;
		if (!t_full && s0.v[ST_BUDGET] &&
		    sp.s[i].frames * 100 / s0.v[ST_BUDGET] >= o.high_pct)
			t_full = sp.s[i].t;
	}
	if (f->remotified_puts && t_rem && t1 > t_rem)
		f->remotify_pps = (double)f->remotified_puts / (t1 - t_rem);
	/* the client's put rate once the tier had reached the high watermark */
	if (t_full) {
		size_t nb = (size_t)((n + o.put_batch - 1) / o.put_batch);

		for (i = 0; i < nb && prog[i].t < t_full; i++)
			;
		if (i < nb && t1 > prog[i].t)
			f->full_pps = (double)(f->accepted - prog[i].accepted) / (t1 - prog[i].t);
	}
out:
	free(prog);
	free(sp.s);
	return rc;
}

/* ---- gets against the node --------------------------------------------------------- */

/* What the timed gets of one kind saw, all rounds. */
struct get_fig {
	uint64_t gets, remote, local, brought_home, failed;
};

/*
 * One round of n timed single gets of pages drawn from cand[]. With
 * o.classify_each each get is classed remote or local by the node's
 * tier_repatriated delta (the counters read after every get, outside the
 * clock) and the latencies of the class `want_remote` go to lat; else every
 * latency goes to lat and the round's delta gives only the counts.
 */
static int get_round(ramster *r, int pool, unsigned rep, const uint64_t *cand, size_t ncand,
		     unsigned n, bool want_remote, double *lat, size_t *nlat, struct get_fig *g,
		     uint64_t *rng)
{
	unsigned char page[PAGE];
	struct snap before, after;
	unsigned i;
	int rc = snap_read(r, &before);

	*nlat = 0;
	for (i = 0; i < n && !rc; i++) {
		uint64_t idx = cand[pagegen_rng_next(rng) % ncand];
		struct ramster_oid oid = oid_of(idx, rep);
		double t0, us;
		bool remote;

		t0 = now();
		rc = ramster_get(r, pool, &oid, (uint32_t)(idx % OBJ_PAGES), page);
		us = (now() - t0) * 1e6;
		g->gets++;
		if (rc) {
			if (errors < ERRORS_SHOWN)
				note("get of page %llu: %s\n", (unsigned long long)idx,
				     strerror(-rc));
			g->failed++;
			errors++;
			if (rc == -ENOENT || rc == -EIO)
				rc = 0; /* counted; carry on */
		} else if (!page_check(idx, page)) {
			if (errors < ERRORS_SHOWN)
				note("page %llu read back wrong\n", (unsigned long long)idx);
			errors++;
		}
		if (!o.classify_each) {
			lat[(*nlat)++] = us;
			continue;
		}
		if (snap_read(r, &after))
			return -EIO;
		remote = after.v[ST_REPATRIATED] > before.v[ST_REPATRIATED];
		g->brought_home += after.v[ST_BROUGHT_HOME] - before.v[ST_BROUGHT_HOME];
		if (remote)
			g->remote++;
		else
			g->local++;
		if (remote == want_remote)
			lat[(*nlat)++] = us;
		before = after;
	}
	if (!rc && !o.classify_each) {
		uint64_t rem;

		if (snap_read(r, &after))
			return -EIO;
		rem = after.v[ST_REPATRIATED] - before.v[ST_REPATRIATED];
		rem = rem < i ? rem : i;
		g->remote += rem;
		g->local += i - rem;
		g->brought_home += after.v[ST_BROUGHT_HOME] - before.v[ST_BROUGHT_HOME];
	}
	return rc;
}

/* ---- report ------------------------------------------------------------------------ */

/* The measured paths, in the order of a round. */
enum path { P_UNIX, P_TCP, P_UNIX_PROC, P_TCP_PROC, P_REPAT, P_LOCAL, P_MC, P_PING, P_PINGP, P_N };

static const char *const path_key[P_N] = { "unix", "tcp", "unixp", "tcpp", "repat", "local", "mc",
					    "ping", "pingp" };

static const char *const path_name[P_N] = {
	"unix 4 KiB round trip",
	"tcp 4 KiB round trip",
	"unix, server process",
	"tcp, server process",
	"ramster get, remote",
	"ramster get, local hit",
	"memcached get",
	"ping the node (4 KiB)",
	"ping via the node to a peer",
};

/*
 * K ramster_ping calls (node 0: the node itself; else through it to that
 * peer), each page checked. @return 0 or -errno.
 */
static int ping_round(ramster *r, uint32_t node, double *lat, unsigned k, uint64_t *nlat)
{
	static unsigned char out[PAGE], back[PAGE];
	unsigned i;
	double t0;
	int rc;

	*nlat = 0;
	for (i = 0; i < k; i++) {
		memset(out, (int)(i & 0xff), 64);
		t0 = now();
		rc = ramster_ping(r, node, out, back);
		if (rc)
			return rc;
		lat[(*nlat)++] = (now() - t0) * 1e6;
		if (memcmp(out, back, PAGE))
			errors++;
	}
	return 0;
}

struct report {
	struct series s[P_N];
	struct get_fig rg, lg;
	struct put_fig put[REPS_MAX];
	unsigned nput;
	uint64_t pages, fill, remote_cands, local_cands;
	unsigned usage_measured;
	struct snap measured, final; /* before and after the rounds */
	uint64_t peer_foreign[PEERS_MAX];
	uint64_t peer_bytes[PEERS_MAX], peer_ram[PEERS_MAX]; /* the holders' side, at the end */
	uint64_t leaked[REPS_MAX][PEERS_MAX]; /* foreign pages left after a pool destroy */
	bool mc_ran;
	uint64_t mc_misses;
};

static double put_median(const struct report *rp, size_t off)
{
	double v[REPS_MAX];
	unsigned i;

	for (i = 0; i < rp->nput; i++)
		v[i] = *(const double *)((const char *)&rp->put[i] + off);
	return figures_median(v, rp->nput);
}

#define PUT_MED(rp, field) put_median(rp, offsetof(struct put_fig, field))

static double ratio_of(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static double frac(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* The baseline: p50 (or p99) of the unix plus the tcp round trip, threads or processes. */
static double baseline(const struct report *rp, bool proc, bool p99)
{
	const struct series *u = &rp->s[proc ? P_UNIX_PROC : P_UNIX];
	const struct series *t = &rp->s[proc ? P_TCP_PROC : P_TCP];

	if (!u->n || !t->n)
		return 0;
	return p99 ? series_p99(u) + series_p99(t) : series_p50(u) + series_p50(t);
}

static double p50_of(const struct report *rp, enum path p)
{
	return series_p50(&rp->s[p]);
}

static void print_text(const struct report *rp)
{
	double base50 = baseline(rp, false, false);
	double comp = rp->final.v[ST_CBYTES]
			  ? (double)rp->final.v[ST_STORED] * PAGE / (double)rp->final.v[ST_CBYTES]
			  : 0;
	unsigned i;

	printf("ramster-netbench: %llu pages put (4 KiB, text ~%.2fx), batches of %u, %u put "
	       "phases; latency: %u rounds of %u calls, medians of the rounds' p50/p99\n",
	       (unsigned long long)rp->pages, comp, o.put_batch, rp->nput, o.rounds, o.iters);
	printf("%-28s %10s %10s %8s\n", "path", "p50 us", "p99 us", "calls");
	for (i = 0; i < P_N; i++)
		if (rp->s[i].n)
			printf("%-28s %10.1f %10.1f %8llu\n", path_name[i], series_p50(&rp->s[i]),
			       series_p99(&rp->s[i]), (unsigned long long)rp->s[i].calls);
	printf("%-28s %10.1f %10.1f\n", "baseline (unix + tcp)", base50,
	       baseline(rp, false, true));
	if (baseline(rp, true, false) > 0)
		printf("%-28s %10.1f %10.1f\n", "baseline, server processes",
		       baseline(rp, true, false), baseline(rp, true, true));
	printf("repatriate / baseline p50   %.2f  (floor <= 1.5)\n",
	       ratio_of(p50_of(rp, P_REPAT), base50));
	if (rp->s[P_PINGP].n)
		printf("repatriate / ping via the node to a peer p50   %.2f\n",
		       ratio_of(p50_of(rp, P_REPAT), p50_of(rp, P_PINGP)));
	if (baseline(rp, true, false) > 0)
		printf("repatriate / baseline p50, server processes   %.2f\n",
		       ratio_of(p50_of(rp, P_REPAT), baseline(rp, true, false)));
	printf("remote gets: %llu of %llu timed gets were remote (%.1f%%), brought home %llu, "
	       "failed %llu; tier at %u%% while measured\n",
	       (unsigned long long)rp->rg.remote, (unsigned long long)rp->rg.gets,
	       100 * frac(rp->rg.remote, rp->rg.gets), (unsigned long long)rp->rg.brought_home,
	       (unsigned long long)rp->rg.failed, rp->usage_measured);
	printf("remotified while the gets ran: %llu; tier at %u%% after them\n",
	       (unsigned long long)(rp->final.v[ST_REMOTIFIED] - rp->measured.v[ST_REMOTIFIED]),
	       usage_pct(&rp->final));
	printf("local gets: %llu of %llu local (%.1f%%), brought home %llu\n",
	       (unsigned long long)rp->lg.local, (unsigned long long)rp->lg.gets,
	       100 * frac(rp->lg.local, rp->lg.gets), (unsigned long long)rp->lg.brought_home);
	if (rp->mc_ran)
		printf("repatriate / memcached p50  %.2f;  local get / memcached p50  %.2f\n",
		       ratio_of(p50_of(rp, P_REPAT), p50_of(rp, P_MC)),
		       ratio_of(p50_of(rp, P_LOCAL), p50_of(rp, P_MC)));
	printf("put phases (medians of %u): client %.0f puts/s (%.0f once the tier was full), "
	       "remotify %.0f pages/s while active (%.0f over the whole put phase), "
	       "settle %.2f s\n",
	       rp->nput, PUT_MED(rp, put_pps), PUT_MED(rp, full_pps), PUT_MED(rp, remotify_pps),
	       PUT_MED(rp, remotify_phase_pps), PUT_MED(rp, settle_s));
	for (i = 0; i < rp->nput; i++) {
		const struct put_fig *f = &rp->put[i];

		printf("  phase %u: %llu accepted, %llu refused, %.2f s, %llu remotified during "
		       "puts, %llu in all; room waits %llu (refused %llu), no target %llu, failed "
		       "%llu; usage %u%% at end, %u%% settled\n",
		       i + 1, (unsigned long long)f->accepted, (unsigned long long)f->refused,
		       f->put_s, (unsigned long long)f->remotified_puts,
		       (unsigned long long)f->remotified_total, (unsigned long long)f->room_waits,
		       (unsigned long long)f->room_refused, (unsigned long long)f->no_target,
		       (unsigned long long)f->failed, f->usage_end, f->usage_settled);
	}
	if (errors)
		printf("ERRORS: %llu pages read back wrong or missing, or calls failed\n",
		       (unsigned long long)errors);
}

/* The report as one line of JSON (jansson), for tools/bench-collective.sh. */
static void print_json(const struct report *rp)
{
	double base50 = baseline(rp, false, false);
	struct jout *j = jout_new();
	unsigned i, k;

	jout_uint(j, rp->pages, "pages");
	jout_uint(j, o.put_batch, "put_batch");
	jout_uint(j, o.rounds, "rounds");
	jout_uint(j, o.iters, "iters");
	for (i = 0; i < P_N; i++)
		if (rp->s[i].n) {
			jout_real(j, series_p50(&rp->s[i]), "%s_p50_us", path_key[i]);
			jout_real(j, series_p99(&rp->s[i]), "%s_p99_us", path_key[i]);
			jout_uint(j, rp->s[i].calls, "%s_calls", path_key[i]);
		}
	jout_real(j, base50, "baseline_p50_us");
	jout_real(j, baseline(rp, false, true), "baseline_p99_us");
	jout_real(j, ratio_of(p50_of(rp, P_REPAT), base50), "ratio_repat_baseline");
	if (rp->s[P_PINGP].n)
		jout_real(j, ratio_of(p50_of(rp, P_REPAT), p50_of(rp, P_PINGP)), "ratio_repat_ping");
	if (baseline(rp, true, false) > 0) {
		jout_real(j, baseline(rp, true, false), "baselinep_p50_us");
		jout_real(j, baseline(rp, true, true), "baselinep_p99_us");
		jout_real(j, ratio_of(p50_of(rp, P_REPAT), baseline(rp, true, false)),
			  "ratio_repat_baselinep");
	}
	jout_uint(j, rp->rg.gets, "repat_gets");
	jout_uint(j, rp->rg.remote, "repat_remote");
	jout_real(j, frac(rp->rg.remote, rp->rg.gets), "repat_remote_frac");
	jout_uint(j, rp->rg.brought_home + rp->lg.brought_home, "brought_home");
	jout_uint(j, rp->rg.failed + rp->lg.failed, "get_failed");
	jout_uint(j, rp->usage_measured, "usage_measured_pct");
	jout_uint(j, rp->lg.gets, "local_gets");
	jout_real(j, frac(rp->lg.local, rp->lg.gets), "local_local_frac");
	if (rp->mc_ran) {
		jout_real(j, ratio_of(p50_of(rp, P_REPAT), p50_of(rp, P_MC)), "ratio_repat_mc");
		jout_real(j, ratio_of(p50_of(rp, P_LOCAL), p50_of(rp, P_MC)), "ratio_local_mc");
		jout_uint(j, rp->mc_misses, "mc_misses");
	}
	jout_round(j, PUT_MED(rp, put_pps), "put_pps");
	jout_round(j, PUT_MED(rp, full_pps), "put_full_pps");
	jout_round(j, PUT_MED(rp, remotify_pps), "remotify_pps");
	jout_round(j, PUT_MED(rp, remotify_phase_pps), "remotify_phase_pps");
	jout_real(j, PUT_MED(rp, settle_s), "settle_s");
	jout_uint(j, rp->put[rp->nput - 1].usage_end, "usage_put_end_pct");
	jout_uint(j, rp->put[rp->nput - 1].usage_settled, "usage_settled_pct");
	jout_uint(j, usage_pct(&rp->final), "usage_after_pct");
	jout_uint(j, rp->final.v[ST_REMOTIFIED] - rp->measured.v[ST_REMOTIFIED],
		  "remotified_during_gets");
	jout_uint(j, rp->put[rp->nput - 1].refused, "put_refused");
	jout_uint(j, rp->put[rp->nput - 1].room_refused, "room_refused");
	jout_uint(j, rp->final.v[ST_REMOTE_PAGES], "remote_pages");
	jout_real(j,
		  rp->final.v[ST_CBYTES] ? (double)rp->final.v[ST_STORED] * PAGE /
					       (double)rp->final.v[ST_CBYTES]
					 : 0,
		  "compression");
	for (k = 0; k < o.npeers; k++) {
		jout_uint(j, rp->peer_foreign[k], "peer%u_foreign_pages", k + 1);
		jout_uint(j, rp->peer_bytes[k], "peer%u_foreign_bytes", k + 1);
		jout_uint(j, rp->peer_ram[k], "peer%u_foreign_ram", k + 1);
	}
	for (i = 0; i + 1 < rp->nput; i++)
		for (k = 0; k < o.npeers; k++)
			jout_uint(j, rp->leaked[i][k], "peer%u_left_after_destroy%u", k + 1, i + 1);
	jout_uint(j, errors, "errors");
	jout_print(j);
}

/* ---- the run ----------------------------------------------------------------------- */

/* A round's p50 of path p (0 if the path was not measured that round). */
static double round_p50(const struct report *rp, enum path p, unsigned round)
{
	return rp->s[p].n > round ? rp->s[p].p50[round] : 0;
}

/* foreign_pages of each peer given with --peer-socket (0 if unreachable). */
static void peers_foreign(uint64_t *out)
{
	unsigned k;

	for (k = 0; k < o.npeers; k++) {
		ramster *p = ramster_open(o.peer_socket[k]);
		struct snap sn;

		out[k] = p && !snap_read(p, &sn) ? sn.v[ST_FOREIGN] : 0;
		ramster_close(p);
	}
}

/* foreign_bytes and foreign_ram of each peer (0 if unreachable): RAM a held page costs. */
static void peers_holding(uint64_t *bytes, uint64_t *ram)
{
	unsigned k;

	for (k = 0; k < o.npeers; k++) {
		ramster *p = ramster_open(o.peer_socket[k]);
		struct snap sn;

		bytes[k] = ram[k] = 0;
		if (p && !snap_read(p, &sn)) {
			bytes[k] = sn.v[ST_FOREIGN_BYTES];
			ram[k] = sn.v[ST_FOREIGN_RAM];
		}
		ramster_close(p);
	}
}

/* Wait (up to 10 s) until the peers hold at most `want` pages in all; fill out[]. */
static void peers_drain(uint64_t want, uint64_t *out)
{
	unsigned k, i;
	uint64_t sum = 0;

	for (i = 0; i < 100; i++) {
		peers_foreign(out);
		for (sum = 0, k = 0; k < o.npeers; k++)
			sum += out[k];
		if (sum <= want)
			return;
		sleep_ms(100);
	}
}

/* Fill the tier with fresh pages to o.fill_pct, so repatriated pages are not brought home. */
static int fill_tier(ramster *r, int pool, unsigned rep, uint64_t first, unsigned char *accepted,
		     uint64_t cap, uint64_t *filled)
{
	struct put_fig f = { 0 };
	struct snap sn;
	unsigned batch = o.put_batch;
	uint64_t n = 0;
	int rc = snap_read(r, &sn);

	o.put_batch = 8;
	while (!rc && n + 8 <= cap && sn.v[ST_BUDGET] &&
	       sn.v[ST_FRAMES] * 100 < sn.v[ST_BUDGET] * o.fill_pct) {
		rc = put_range(r, pool, rep, first + n, 8, accepted, &f, NULL);
		n += 8;
		if (!rc)
			rc = snap_read(r, &sn);
	}
	o.put_batch = batch;
	*filled = n;
	return rc;
}

static int run(const char *dir, struct report *rp)
{
	ramster *r = NULL, *rs = NULL;
	static struct echo echo[P_REPAT]; /* P_UNIX .. P_TCP_PROC */
	struct mc m = { .fd = -1 };
	struct snap sn, base;
	unsigned char *accepted = NULL, page[PAGE];
	uint64_t *rcand = NULL, *lcand = NULL, nr = 0, nl = 0, i, cap,
		 rng = pagegen_mix(o.seed) | 1;
	uint64_t before[PEERS_MAX];
	double *lat = malloc(o.iters * sizeof(double));
	size_t nlat;
	unsigned rep, round, e;
	int pool = -1, rc;

	for (e = 0; e < P_REPAT; e++)
		echo[e].lfd = echo[e].cfd = -1;
	r = ramster_open(o.socket);
	rs = r ? ramster_open(o.socket) : NULL;
	if (!r || !rs) {
		rc = -errno;
		note("connect %s: %s\n", o.socket ? o.socket : "(default socket)", strerror(errno));
		goto out;
	}
	rc = snap_read(r, &base);
	if (rc || !lat)
		goto out;
	if (!base.v[ST_BUDGET]) {
		note("the node reports no tier_budget_frames\n");
		rc = -EPROTO;
		goto out;
	}
	/* 4x the tier: text pages go about two to a frame */
	rp->pages = o.pages ? o.pages : base.v[ST_BUDGET] * 2 * 4;
	cap = base.v[ST_BUDGET] * 2;
	accepted = calloc(rp->pages + cap, 1);
	if (!accepted) {
		rc = -ENOMEM;
		goto out;
	}
	peers_foreign(before);

	/* ---- put phases: remotify throughput; the last one's pool stays for the gets */
	for (rep = 0; rep < o.put_reps; rep++) {
		pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
		if (pool < 0) {
			rc = pool;
			note("pool_new: %s\n", strerror(-rc));
			goto out;
		}
		note("put phase %u: %llu pages\n", rep + 1, (unsigned long long)rp->pages);
		rc = put_phase(r, rs, pool, rep, rp->pages, accepted, &rp->put[rep]);
		if (rc)
			goto out;
		note("  %.2f s, %.0f puts/s, remotify %.0f pages/s; tier %u%% at the end, "
		     "%u%% after %.2f s\n",
		     rp->put[rep].put_s, rp->put[rep].put_pps, rp->put[rep].remotify_pps,
		     rp->put[rep].usage_end, rp->put[rep].usage_settled, rp->put[rep].settle_s);
		rp->nput++;
		if (rep + 1 == o.put_reps)
			break;
		rc = ramster_pool_destroy(r, pool);
		pool = -1;
		if (rc) {
			note("pool_destroy: %s\n", strerror(-rc));
			goto out;
		}
		if (o.npeers) {
			uint64_t want = 0;
			unsigned k;

			for (k = 0; k < o.npeers; k++)
				want += before[k];
			peers_drain(want, rp->leaked[rep]);
			for (k = 0; k < o.npeers; k++)
				rp->leaked[rep][k] = rp->leaked[rep][k] > before[k]
							 ? rp->leaked[rep][k] - before[k]
							 : 0;
		}
	}

	/* ---- the pages to get: the earliest are remote, fresh fillers are local */
	rc = fill_tier(r, pool, rep, rp->pages, accepted, cap, &rp->fill);
	if (!rc)
		rc = snap_read(r, &sn);
	if (rc)
		goto out;
	rp->usage_measured = usage_pct(&sn);
	rp->measured = sn;
	note("tier %u%% full after %llu filler pages; %llu pages remote\n", rp->usage_measured,
	     (unsigned long long)rp->fill, (unsigned long long)sn.v[ST_REMOTE_PAGES]);
	rcand = malloc(rp->pages * sizeof(*rcand));
	lcand = malloc((rp->pages + rp->fill) * sizeof(*lcand));
	if (!rcand || !lcand) {
		rc = -ENOMEM;
		goto out;
	}
	/* remote: the first 90% of what went remote, in put order */
	for (i = 0; i < rp->pages && nr < sn.v[ST_REMOTE_PAGES] * 9 / 10; i++)
		if (accepted[i])
			rcand[nr++] = i;
	/* local: the fillers and the last quarter of what the tier holds */
	for (i = rp->pages + rp->fill; i-- > 0 && nl < rp->fill + sn.v[ST_STORED] / 4;)
		if (accepted[i])
			lcand[nl++] = i;
	rp->remote_cands = nr;
	rp->local_cands = nl;
	if (!nr || !nl) {
		note("no remote (%llu) or local (%llu) pages to get\n", (unsigned long long)nr,
		     (unsigned long long)nl);
		rc = -ENOENT;
		goto out;
	}

	/* ---- the baselines and memcached */
	for (e = 0; e < P_REPAT && !rc; e++)
		if (e < P_UNIX_PROC || o.echo_proc)
			rc = echo_open(&echo[e], e == P_TCP || e == P_TCP_PROC, e >= P_UNIX_PROC,
				       dir);
	if (rc)
		goto out;
	if (o.memcached) {
		rc = mc_start(&m);
		if (rc) {
			note("memcached (%s) would not start: %s; skipped\n", o.memcached,
			     strerror(-rc));
			rc = 0;
		} else {
			for (i = 0; i < o.mc_values && !rc; i++) {
				page_make(i, page);
				rc = mc_set(&m, (unsigned)i, page);
			}
			if (rc) {
				note("memcached set: %s\n", strerror(-rc));
				goto out;
			}
			rp->mc_ran = true;
		}
	}

	/* ---- interleaved rounds: each path K calls a round */
	for (round = 0; round < o.rounds; round++) {
		for (e = 0; e < P_REPAT; e++) {
			if (echo[e].cfd < 0)
				continue;
			rc = echo_round(&echo[e], lat, o.iters, &rng);
			if (rc)
				goto out;
			series_add(&rp->s[e], lat, o.iters);
		}
		rc = ping_round(r, 0, lat, o.iters, &nlat);
		if (rc == 0) {
			series_add(&rp->s[P_PING], lat, nlat);
			rc = ping_round(r, o.ping_node, lat, o.iters, &nlat);
			if (rc == 0)
				series_add(&rp->s[P_PINGP], lat, nlat);
		}
		if (rc) {
			note("ramster_ping: %s (an older ramsterd?): no ping baseline\n", strerror(-rc));
			rc = 0;
		}
		rc = get_round(r, pool, rep, rcand, nr, o.iters, true, lat, &nlat, &rp->rg, &rng);
		if (rc)
			goto out;
		series_add(&rp->s[P_REPAT], lat, nlat);
		rc = get_round(r, pool, rep, lcand, nl, o.iters, false, lat, &nlat, &rp->lg, &rng);
		if (rc)
			goto out;
		series_add(&rp->s[P_LOCAL], lat, nlat);
		if (rp->mc_ran) {
			for (i = 0, nlat = 0; i < o.iters; i++) {
				unsigned key = (unsigned)(pagegen_rng_next(&rng) % o.mc_values);

				rc = mc_get(&m, key, page, &lat[nlat]);
				if (rc == -ENOENT) {
					rp->mc_misses++;
					rc = 0;
					continue;
				}
				if (rc) {
					note("memcached get: %s\n", strerror(-rc));
					goto out;
				}
				if (!page_check(key, page))
					errors++;
				nlat++;
			}
			series_add(&rp->s[P_MC], lat, nlat);
		}
		note("round %u, us p50: unix %.1f, tcp %.1f (processes %.1f, %.1f), repatriate "
		     "%.1f, local %.1f, memcached %.1f\n",
		     round + 1, round_p50(rp, P_UNIX, round), round_p50(rp, P_TCP, round),
		     round_p50(rp, P_UNIX_PROC, round), round_p50(rp, P_TCP_PROC, round),
		     round_p50(rp, P_REPAT, round), round_p50(rp, P_LOCAL, round),
		     round_p50(rp, P_MC, round));
	}
	rc = snap_read(r, &rp->final);
	peers_foreign(rp->peer_foreign);
	peers_holding(rp->peer_bytes, rp->peer_ram);
out:
	mc_stop(&m);
	for (e = 0; e < P_REPAT; e++)
		echo_close(&echo[e]);
	if (pool >= 0 && r)
		ramster_pool_destroy(r, pool);
	ramster_close(rs);
	ramster_close(r);
	free(accepted);
	free(rcand);
	free(lcand);
	free(lat);
	return rc;
}

/* ---- main -------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ramster-netbench --socket PATH [--peer-socket PATH]... [--pages N]\n"
		"           [--put-batch B] [--put-reps R] [--rounds R] [--iters K]\n"
		"           [--tcp-client ADDR] [--tcp-server ADDR] [--memcached BIN|none]\n"
		"           [--mc-values N] [--high PCT] [--fill PCT]\n"
		"           [--classify each|round] [--echo thread|both]\n"
		"           [--seed S] [--json]\n"
		"Against a running collective (node behind --socket, with a small tier): puts N\n"
		"pages (default 4x the tier) and measures remotify; then, in interleaved rounds,\n"
		"times 4 KiB round trips over a Unix socket and over TCP (the baseline), gets of\n"
		"remote pages (repatriate) and of local pages, and memcached gets.\n"
		"  --peer-socket  a peer's socket, to read its foreign_pages (repeatable)\n"
		"  --high PCT     the collective's high_watermark (default 90)\n"
		"  --fill PCT     fill the tier to this before the gets (default 85: above the\n"
		"                 80%% a repatriated page is brought home below)\n"
		"  --classify     each: read the node's counters after every get and time only\n"
		"                 the gets that were remote (or local); round: once a round,\n"
		"                 every get timed, the fraction reported (default each)\n"
		"  --echo         the baseline's servers: threads of this process (the\n"
		"                 floor's), or both threads and child processes (default)\n");
}

static bool parse_u64(const char *s, uint64_t *v, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || x < min || x > max)
		return false;
	*v = x;
	return true;
}

static bool parse_uint(const char *s, unsigned *v, unsigned min, unsigned max)
{
	uint64_t x;

	if (!parse_u64(s, &x, min, max))
		return false;
	*v = (unsigned)x;
	return true;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "peer-socket", required_argument, NULL, 'P' },
		{ "pages", required_argument, NULL, 'n' },
		{ "put-batch", required_argument, NULL, 'b' },
		{ "put-reps", required_argument, NULL, 'R' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "iters", required_argument, NULL, 'k' },
		{ "tcp-client", required_argument, NULL, 'c' },
		{ "tcp-server", required_argument, NULL, 'C' },
		{ "memcached", required_argument, NULL, 'm' },
		{ "mc-values", required_argument, NULL, 'v' },
		{ "high", required_argument, NULL, 'H' },
		{ "fill", required_argument, NULL, 'F' },
		{ "seed", required_argument, NULL, 'S' },
		{ "classify", required_argument, NULL, 'x' },
		{ "echo", required_argument, NULL, 'e' },
		{ "ping-node", required_argument, NULL, 'N' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "s:P:n:b:R:r:k:c:C:m:v:H:F:S:x:e:N:jh", opts, NULL)) !=
	       -1) {
		bool ok = true;

		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'P':
			ok = o.npeers < PEERS_MAX;
			if (ok)
				o.peer_socket[o.npeers++] = optarg;
			break;
		case 'n':
			ok = parse_u64(optarg, &o.pages, 1, 1ull << 28);
			break;
		case 'b':
			ok = parse_uint(optarg, &o.put_batch, 1, RAMSTER_BATCH_MAX);
			break;
		case 'R':
			ok = parse_uint(optarg, &o.put_reps, 1, REPS_MAX);
			break;
		case 'r':
			ok = parse_uint(optarg, &o.rounds, 1, ROUNDS_MAX);
			break;
		case 'N':
			ok = parse_uint(optarg, &o.ping_node, 1, 64);
			break;
		case 'k':
			ok = parse_uint(optarg, &o.iters, 10, 10000000);
			break;
		case 'c':
			o.tcp_client = optarg;
			break;
		case 'C':
			o.tcp_server = optarg;
			break;
		case 'm':
			o.memcached = strcmp(optarg, "none") ? optarg : NULL;
			break;
		case 'v':
			ok = parse_uint(optarg, &o.mc_values, 1, 1000000);
			break;
		case 'H':
			ok = parse_uint(optarg, &o.high_pct, 1, 100);
			break;
		case 'F':
			ok = parse_uint(optarg, &o.fill_pct, 0, 100);
			break;
		case 'S':
			ok = parse_u64(optarg, &o.seed, 0, UINT32_MAX);
			break;
		case 'x':
			ok = !strcmp(optarg, "each") || !strcmp(optarg, "round");
			o.classify_each = !strcmp(optarg, "each");
			break;
		case 'e':
			ok = !strcmp(optarg, "thread") || !strcmp(optarg, "both");
			o.echo_proc = !strcmp(optarg, "both");
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
		if (!ok) {
			fprintf(stderr, "ramster-netbench: bad value '%s'\n", optarg);
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ramster-netbench: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct report rp;
	char dir[] = "/tmp/ramster-netbench.XXXXXX";
	int rc;

	if (parse_args(argc, argv) < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		perror("ramster-netbench: mkdtemp");
		return 1;
	}
	rc = pages_init();
	if (!rc)
		rc = run(dir, &rp);
	rmdir(dir);
	free(contents);
	if (rc) {
		note("failed: %s\n", strerror(-rc));
		return 1;
	}
	if (o.json)
		print_json(&rp);
	else
		print_text(&rp);
	return errors ? 1 : 0;
}
