/*
 * main.c - ramsterd, the node daemon: flags, configuration, start-up and a
 * clean stop.
 *
 * Everything that can be wrong with the command line or the file is found
 * before anything starts (exit 2). Then the local tier, the pool directory
 * and the client socket come up on libev's default loop, which runs in the
 * foreground until SIGTERM or SIGINT; the stop undoes the start in reverse.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/un.h>
#include <unistd.h>

#include <ev.h>

#include "node/client/client.h"
#include "node/config.h"
#include "node/config_keys.h"
#include "node/clock.h"
#include "node/elastic/elastic.h"
#include "node/log.h"
#include "node/stats/metrics.h"
#include "node/nbd/nbd.h"
#include "node/notify.h"
#include "node/client/pools.h"
#include "node/client/users.h"
#include "node/reload.h"
#include "node/restart/crash.h"
#include "node/restart/restart.h"
#include "node/spin.h"
#include "node/stats/stats.h"
#include "node/store.h"
#include "tmem/zcache.h"

#ifndef RAMSTER_VERSION
#define RAMSTER_VERSION "0.1.0"
#endif

#define MAIN_DEFAULT_SOCKET   "/run/ramster/ramsterd.sock"
#define MAIN_LOCAL_MB_MAX     (1024u * 1024)
#define EXIT_USAGE	      2
#define MAIN_OPT_HELP_CONFIG  256 /* --help-config: a long option only */
#define MAIN_OPT_CRASH_DIR    257 /* --crash-dir: a long option only */

/* What the command line asked for; NULL / 0: not given. */
struct main_opts {
	const char *socket;
	uint64_t local_mb;
	const char *config;
	const char *node;
	const char *crash_dir;
	int log_level;
};

static void main_usage(FILE *f)
{
	fprintf(f,
		"Usage: ramsterd [OPTION]...\n"
		"Run a ramster node in the foreground: a compressed local memory tier\n"
		"served to clients (libramster, ramsterctl) over a Unix socket.\n"
		"\n"
		"  -s, --socket PATH      client socket (default: the node's `socket` in the\n"
		"                         config, else $RAMSTER_SOCKET, else %s)\n"
		"  -m, --local-mb N       local tier budget in MiB (default: the node's\n"
		"                         `local_mb`, else %d)\n"
		"  -c, --config FILE      the cluster file (INI)\n"
		"  -n, --node NAME        this node's [node NAME] section (default: the\n"
		"                         file's only node, else the short host name)\n"
		"  -l, --log-level LEVEL  debug, info, notice, warn or error (default info)\n"
		"      --crash-dir DIR    keep the tier in files there, so a crash loses no\n"
		"                         persistent page (default: the node's `crash_dir`)\n"
		"  -h, --help             show this help and exit\n"
		"      --help-config      every key of the cluster file: its value, default,\n"
		"                         reload rule and help (=scd: ramster.conf(5)'s lists)\n"
		"  -V, --version          show the version and exit\n"
		"\n"
		"SIGTERM or SIGINT stops the node cleanly. See docs/operations.md.\n",
		MAIN_DEFAULT_SOCKET, CONFIG_DEFAULT_LOCAL_MB);
}

static void __attribute__((noreturn, format(printf, 1, 2))) main_die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("ramsterd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'ramsterd --help'.\n", stderr);
	exit(EXIT_USAGE);
}

static void main_parse_args(int argc, char **argv, struct main_opts *o)
{
	/* clang-format off */
	static const struct option longopts[] = {
		{ "socket",    required_argument, NULL, 's' },
		{ "local-mb",  required_argument, NULL, 'm' },
		{ "config",    required_argument, NULL, 'c' },
		{ "node",      required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help",      no_argument,       NULL, 'h' },
		{ "help-config", optional_argument, NULL, MAIN_OPT_HELP_CONFIG },
		{ "crash-dir", required_argument, NULL, MAIN_OPT_CRASH_DIR },
		{ "version",   no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	/* clang-format on */
	char *end;
	int ch;

	o->log_level = -1;
	while ((ch = getopt_long(argc, argv, "s:m:c:n:l:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (!*optarg)
				main_die_usage("--socket: empty path");
			o->socket = optarg;
			break;
		case 'm':
			errno = 0;
			o->local_mb = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || o->local_mb < 1 ||
			    o->local_mb > MAIN_LOCAL_MB_MAX)
				main_die_usage("--local-mb: '%s' is not a number of MiB (1..%u)",
					       optarg, MAIN_LOCAL_MB_MAX);
			break;
		case 'c':
			o->config = optarg;
			break;
		case MAIN_OPT_CRASH_DIR:
			if (optarg[0] != '/' || strlen(optarg) >= CONFIG_PATH_MAX)
				main_die_usage("--crash-dir: '%s' is not an absolute path (< %d bytes)",
					       optarg, CONFIG_PATH_MAX);
			o->crash_dir = optarg;
			break;
		case 'n':
			if (!*optarg)
				main_die_usage("--node: empty name");
			o->node = optarg;
			break;
		case 'l':
			o->log_level = log_level_parse(optarg);
			if (o->log_level < 0)
				main_die_usage(
				    "--log-level: '%s' is not debug, info, notice, warn or error",
				    optarg);
			break;
		case 'h':
			main_usage(stdout);
			exit(0);
		case MAIN_OPT_HELP_CONFIG:
			if (config_help_print(stdout, optarg))
				main_die_usage("--help-config: '%s' is not text or scd", optarg);
			exit(fflush(stdout) ? 1 : 0);
		case 'V':
			printf("ramsterd %s\n", RAMSTER_VERSION);
			exit(0);
		default:
			fputs("Try 'ramsterd --help'.\n", stderr); /* getopt said what */
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc)
		main_die_usage("unexpected argument '%s'", argv[optind]);
}

/* The short host name (up to the first dot). */
static void main_hostname(char *buf, size_t len)
{
	if (gethostname(buf, len) || !buf[0])
		snprintf(buf, len, "localhost");
	buf[len - 1] = '\0';
	buf[strcspn(buf, ".")] = '\0';
}

/* ---- the running node ------------------------------------------------------------ */

struct main_node {
	struct ev_loop *loop;
	ev_signal sigterm, sigint, sighup;
	struct node_stats stats;
	struct zcache *zcache;
	struct pools *pools;
	struct users *users;   /* per-uid records and limits (outlive the pools) */
	struct remote *remote; /* the collective, or NULL */
	struct elastic *elastic; /* donate_mb or local_mb = auto, or NULL */
	struct home *home;       /* bring_home, or NULL */
	struct store *store;   /* the frontends' storage API over both */
	struct client_listener *listener;
	struct nbd *nbd; /* the NBD frontend, or NULL without exports */
	struct spin *spin; /* the loop's busy polling */
	struct metrics *metrics; /* the Prometheus endpoint, or NULL */
	struct reload *reload;   /* SIGHUP and OP_RELOAD, or NULL without a file */
	struct client_env env;
	ev_signal sigusr2;       /* a warm restart: re-execute with the image */
	ev_timer restart_soon;   /* OP_RESTART: after its reply has gone out */
	/* what comes next: MAIN_RUN, nothing asked; MAIN_STOP, a cold stop (a
	 * restart asked after it is refused); a restart, asked (in a collective
	 * waiting for quiet: only main_break ends the loop) or under way */
	enum { MAIN_RUN, MAIN_STOP, MAIN_RESTART_EXEC, MAIN_RESTART_FDSTORE } how;
	struct restart_stats restart;
	struct crash_keep *crash; /* crash_dir's files, or NULL */
	/* a warm restart waits for what is in flight: first the NBD requests
	 * (nbd_quiet), then, in a collective, the requests to peers (remote_quiet) */
	ev_timer quiet;
	uint64_t quiet_until_ns;
	unsigned quiet_ms;   /* each wait's bound: request_timeout_ms and a second */
	bool remote_waited;  /* the NBD wait is over: the collective's runs */
};

/* Whether the node may restart warm now; logs (and with why, says) why not. */
static bool main_warm_ok(struct main_node *n, char *why, size_t len)
{
	char buf[256];

	if (!why) {
		why = buf;
		len = sizeof(buf);
	}
	if (n->remote && remote_warm_check(n->remote, why, len)) {
		log_error("restart: not warm: %s", why);
		return false;
	}
	return true;
}

static void main_break(struct main_node *n, int how)
{
	n->how = how;
	notify_stopping(); /* STOPPING=1 to systemd */
	spin_break(ev_userdata(n->loop)); /* the loop's driver (spin_create) */
}

/*
 * The NBD requests are answered (or the wait is over: a connection whose
 * request still runs closes at the restart, as every one did before they
 * were handed over, and its client sends it again): now the collective.
 * The NBD wait comes first because a write may wait for remotify to make
 * room in the tier, and remote_quiesce stops remotify.
 */
static void main_quiet_remote(struct main_node *n)
{
	if (!nbd_quiet(n->nbd))
		log_error("restart: NBD requests still running after %u ms: their connections "
			  "close",
			  n->quiet_ms);
	n->remote_waited = true;
	if (n->remote)
		remote_quiesce(n->remote);
	n->quiet_until_ns = clock_now_ns() + (uint64_t)n->quiet_ms * 1000000u;
}

/* Every 5 ms while a restart waits: are the NBD connections, then the collective, quiet? */
static void main_quiet_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct main_node *n = w->data;

	if (!n->remote_waited) {
		if (!nbd_quiet(n->nbd) && clock_now_ns() < n->quiet_until_ns)
			return;
		main_quiet_remote(n);
	}
	if (!n->remote || remote_quiet(n->remote)) {
		ev_timer_stop(loop, w);
		main_break(n, n->how);
		return;
	}
	if (clock_now_ns() < n->quiet_until_ns)
		return;
	ev_timer_stop(loop, w);
	if (n->how == MAIN_RESTART_FDSTORE) {
		log_error("restart: requests to peers still unanswered after %u ms: stopping cold",
			  n->quiet_ms);
		main_break(n, MAIN_STOP);
		return;
	}
	log_error("restart: requests to peers still unanswered after %u ms: not restarting; "
		  "the node runs on",
		  n->quiet_ms);
	n->how = MAIN_RUN;
	remote_resume(n->remote);
	nbd_resume(n->nbd);
}

/*
 * Restart warm (how) once the NBD requests running are answered (no new one
 * is started: nbd_quiesce) and then, in a collective, once nothing is in
 * flight but flushes owed (the remotify thread and re-replication stopped
 * meanwhile: main_quiet_remote), so that the image holds every page where
 * it is.
 */
static void main_restart_begin(struct main_node *n, int how)
{
	if (n->how != MAIN_RUN)
		return; /* one is waiting already, or the node stops */
	/* no new NBD request: those running finish, so their connections can be handed over */
	nbd_quiesce(n->nbd);
	if (!n->remote && nbd_quiet(n->nbd)) {
		main_break(n, how);
		return;
	}
	n->how = how;
	n->remote_waited = false;
	n->quiet_until_ns = clock_now_ns() + (uint64_t)n->quiet_ms * 1000000u;
	ev_timer_again(n->loop, &n->quiet);
}

static void main_stop_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct main_node *n = w->data;
	const char *fds = getenv("RAMSTER_FDSTORE");

	log_notice("%s received, stopping", w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
	/* under systemd with a fd store (the shipped unit): the image waits there
	 * for the next start (systemctl restart); a stop drops it */
	if (w->signum == SIGTERM && fds && !strcmp(fds, "1") && getenv("NOTIFY_SOCKET") &&
	    main_warm_ok(n, NULL, 0)) {
		main_restart_begin(n, MAIN_RESTART_FDSTORE);
		return;
	}
	main_break(n, MAIN_STOP);
}

/* SIGUSR2 (ramsterctl restart): re-execute, keeping every page. */
static void main_usr2_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct main_node *n = w->data;

	log_notice("SIGUSR2 received: restarting warm");
	if (!main_warm_ok(n, NULL, 0))
		return; /* logged: the node runs on */
	main_restart_begin(n, MAIN_RESTART_EXEC);
}

static void main_restart_soon_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct main_node *n = w->data;

	main_restart_begin(n, MAIN_RESTART_EXEC);
}

/* OP_RESTART (ramsterctl restart): 0 and the restart in 20 ms, once the reply is out. */
static int main_restart_now(void *arg, char *why, size_t len)
{
	struct main_node *n = arg;

	log_notice("restart requested (ramsterctl restart): restarting warm");
	if (!main_warm_ok(n, why, len))
		return -EBUSY;
	ev_timer_start(n->loop, &n->restart_soon);
	return 0;
}

/* The tier and directory again, empty, after a refused image: @return 0, or -1 (logged). */
static int main_tier_again(struct main_node *n, struct zcache_config *zc, const struct config *cfg)
{
	pools_destroy(n->pools);
	n->pools = NULL;
	zcache_destroy(n->zcache);
	n->zcache = NULL;
	if (n->crash) {
		zc->crash = crash_keep_fresh(n->crash);
		if (!zc->crash) {
			log_error("cannot make the tier's files again: %s", strerror(errno));
			return -1;
		}
	}
	n->zcache = zcache_create(zc);
	n->pools = n->zcache ? pools_create(zcache_tmem(n->zcache)) : NULL;
	if (!n->pools) {
		log_error("cannot create the local tier again: %s", strerror(errno));
		return -1;
	}
	pools_set_grace(n->pools, cfg->limits.reattach_grace_ms);
	return 0;
}

/*
 * After the loop: write the image and re-execute, or hand it to systemd.
 * Returns only when the restart could not be made (then the node stops as usual).
 */
static void main_restart(struct main_node *n, char **argv)
{
	struct restart_conns conns = { .n = 0 };
	uint64_t pages;
	int fd, rc;

	fd = restart_save(n->zcache, n->pools, n->nbd, n->remote, &pages, &conns);
	if (fd < 0) {
		log_error("restart: cannot write the image (%s): stopping cold", strerror(-fd));
		return;
	}
	crash_keep_mark_clean(n->crash); /* the image has the pages now */
	if (n->how == MAIN_RESTART_FDSTORE) {
		rc = restart_fdstore(fd, &conns);
		if (rc)
			log_error("restart: the service manager took no image (%s): this stop "
				  "loses the node's pages",
				  strerror(-rc));
		close(fd);
		return;
	}
	/* every other descriptor closes on the exec: sockets, the loop's, the clients';
	 * the image and the NBD connections handed over stay (restart_exec) */
	(void)close_range(3, ~0u, CLOSE_RANGE_CLOEXEC);
	rc = restart_exec(fd, argv, &conns);
	log_error("restart: cannot re-execute (%s): stopping cold", strerror(-rc));
	close(fd);
}

static void main_hup_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct reload *rl = w->data;
	struct reload_result res;

	if (!rl) {
		log_notice("SIGHUP ignored: the node runs without a cluster file (--config)");
		return;
	}
	log_notice("SIGHUP received: reloading the cluster file");
	reload_run(rl, &res); /* logs what it did */
}

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif

/*
 * ramsterd is where pages go when memory is short (a kernel swapping into an
 * NBD export, peers remotifying into us): it must not need reclaim itself.
 * Lock its memory as it is touched (never swapped), and mark it an I/O
 * flusher so its own allocations do not recurse into I/O that waits on it
 * (the userspace block-server deadlock). Both need privileges; without them
 * the node runs, with a notice.
 */
static void main_memory_guard(const struct config_env *env)
{
	if (env->no_memlock)
		return;
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT))
		log_notice("memory not locked (mlockall: %s): this node may be swapped out",
			   strerror(errno));
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0))
		log_notice("not an I/O flusher (%s): swapping into this node's exports from this "
			   "machine may deadlock under memory pressure",
			   strerror(errno));
}

/*
 * local_mb = auto: the most the tier may grow to, MiB (local_max_mb, else a
 * quarter of MemTotal; the tier's address space is reserved, not its memory).
 */
static uint64_t main_local_max_mb(const struct config_node *self)
{
	unsigned long long kb = 0;
	char line[128];
	FILE *f;

	if (self && self->local_max_mb)
		return self->local_max_mb;
	f = fopen("/proc/meminfo", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb >= 4 * 1024 * 64 ? kb / 1024 / 4 : 64; /* at least 64 MiB */
}

int main(int argc, char **argv)
{
	struct main_opts o = {0};
	static struct config cfg; /* large: not on the stack */
	const struct config_node *self = NULL;
	struct zcache_config zc = {0};
	bool local_auto;
	struct main_node n = {0};
	char err[CONFIG_ERR_MAX], name[CONFIG_NAME_MAX], config_abs[PATH_MAX];
	const char *socket_path, *config_shown = "", *crash_dir;
	unsigned long busy_us;
	int status = 1, restart_fd;

	main_parse_args(argc, argv, &o);
	if (o.log_level >= 0)
		log_set_level((enum log_level)o.log_level);

	if (o.config) {
		if (config_load(&cfg, o.config, err, sizeof(err))) {
			fprintf(stderr, "ramsterd: %s\n", err);
			return EXIT_USAGE;
		}
	} else {
		config_defaults(&cfg);
	}
	if (config_env_read(&cfg.env, err, sizeof(err))) {
		fprintf(stderr, "ramsterd: %s\n", err);
		return EXIT_USAGE;
	}
	if (o.node)
		snprintf(name, sizeof(name), "%s", o.node);
	else if (o.config && cfg.n_nodes == 1)
		snprintf(name, sizeof(name), "%s", cfg.nodes[0].name);
	else
		main_hostname(name, sizeof(name));
	if (o.config) {
		self = config_find_node(&cfg, name);
		if (!self) {
			if (o.node || cfg.n_nodes == 0)
				fprintf(stderr, "ramsterd: %s: no [node %s] section\n", o.config,
					name);
			else
				fprintf(stderr,
					"ramsterd: %s: no [node %s] section for this host (use "
					"--node NAME)\n",
					o.config, name);
			return EXIT_USAGE;
		}
	}

	if (o.log_level < 0 && self && self->log_level >= 0)
		log_set_level((enum log_level)self->log_level); /* the file's log_level */

	if (o.socket)
		socket_path = o.socket;
	else if (self && self->socket[0])
		socket_path = self->socket;
	else if (cfg.env.socket[0])
		socket_path = cfg.env.socket;
	else
		socket_path = MAIN_DEFAULT_SOCKET;
	if (strlen(socket_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr, "ramsterd: socket path too long (at most %zu bytes): %s\n",
			sizeof(((struct sockaddr_un *)0)->sun_path) - 1, socket_path);
		return EXIT_USAGE;
	}
	zc.local_mb = o.local_mb ? o.local_mb : self ? self->local_mb : CONFIG_DEFAULT_LOCAL_MB;
	local_auto = zc.local_mb == CONFIG_AUTO;
	if (local_auto) /* the tier is made as large as it may grow; the controller sets its budget */
		zc.local_mb = main_local_max_mb(self);
	zc.pers_max_frac = cfg.pers_max_frac;
	zc.pers_mean_max_frac = cfg.pers_mean_max_frac;
	zc.pers_mean_limit_frac = cfg.pers_mean_limit_frac;
	if (self) {
		zc.allocator = (enum zalloc_kind)self->allocator;
		zc.compressor = (enum compress_algo)self->compressor;
	}

	log_set_node(name);
	notify_status("starting node %s", name);
	if (o.config)
		config_shown = realpath(o.config, config_abs) ? config_abs : cfg.path;

	/* ---- start ---- */
	signal(SIGPIPE, SIG_IGN);
	main_memory_guard(&cfg.env);
	stats_init(&n.stats);
	n.loop = ev_default_loop(0);
	if (!n.loop) {
		log_error("cannot initialise the event loop (bad LIBEV_FLAGS?)");
		return 1;
	}
	crash_dir = o.crash_dir ? o.crash_dir : self ? self->crash_dir : "";
	if (crash_dir[0]) {
		if (zc.allocator != ZALLOC_DENSE) {
			log_error("crash_dir needs allocator = dense");
			status = EXIT_USAGE;
			goto out;
		}
		n.crash = crash_keep_open(crash_dir, zc.local_mb, zc.compressor, &n.restart,
					  err, sizeof(err));
		if (!n.crash) {
			log_error("%s", err);
			status = EXIT_USAGE;
			goto out;
		}
		zc.crash = crash_keep_fresh(n.crash);
		if (!zc.crash) {
			log_error("crash_dir %s: cannot make the tier's files: %s", crash_dir,
				  strerror(errno));
			goto out;
		}
	}
	n.zcache = zcache_create(&zc);
	if (!n.zcache) {
		log_error("cannot create the local tier (local_mb %llu): %s",
			  (unsigned long long)zc.local_mb, strerror(errno));
		goto out;
	}
	n.users = users_create(&cfg, geteuid());
	if (!n.users) {
		log_error("cannot create the user table: out of memory");
		goto destroy_zcache;
	}
	n.pools = pools_create(zcache_tmem(n.zcache));
	if (!n.pools) {
		log_error("cannot create the pool directory: %s", strerror(errno));
		goto destroy_zcache;
	}
	pools_set_grace(n.pools, cfg.limits.reattach_grace_ms);
	restart_fd = restart_find_image(&n.restart);
	if (restart_fd >= 0 &&
	    restart_load(restart_fd, n.zcache, n.pools, n.users,
			 self && cfg.n_nodes > 1 ? self->id : 0, &n.restart) != 0) {
		/* refused (logged, counted): what it built goes, and the node starts cold */
		if (main_tier_again(&n, &zc, &cfg))
			goto destroy_zcache;
	} else if (restart_fd < 0 &&
		   crash_keep_load(n.crash, n.zcache, n.pools, n.users, &n.restart) != 0) {
		/* refused (logged, counted): cold, as above */
		if (main_tier_again(&n, &zc, &cfg))
			goto destroy_zcache;
	}
	if (n.crash) {
		/* from here on each pool made or gone is written down (and now what loaded) */
		pools_set_on_change(n.pools, crash_keep_pools_changed, n.crash);
		crash_keep_pools_changed(n.crash, n.pools);
	}
	if (self && cfg.n_nodes > 1) {
		n.remote = remote_create(n.loop, n.zcache, &cfg, self, err, sizeof(err));
		if (!n.remote) {
			log_error("cannot join the collective: %s", err);
			status = EXIT_USAGE;
			goto destroy_pools;
		}
		char donate[24] = "auto";

		if (self->donate_mb != CONFIG_AUTO)
			snprintf(donate, sizeof(donate), "%llu",
				 (unsigned long long)self->donate_mb);
		log_notice("node %s (id %u) joins cluster '%s' of %zu nodes at %s:%u (donate_mb %s)",
			   self->name, self->id, cfg.cluster_name, cfg.n_nodes, self->host,
			   self->port, donate);
	}
	/* a warm restart's collective: before any hello, and before remotify seals a page */
	(void)restart_load_remote(&n.restart, n.remote); /* logged */
	if (n.remote && remote_start(n.remote)) {
		log_error("cannot start the remotify thread");
		goto destroy_remote;
	}
	if (n.remote && self->bring_home) {
		n.home = home_create(n.loop, n.remote, n.zcache, cfg.low_watermark_pct, self);
		if (!n.home) {
			log_error("cannot start bring_home: out of memory");
			status = EXIT_USAGE;
			goto destroy_remote;
		}
	}
	if ((n.remote && self->donate_mb == CONFIG_AUTO) || local_auto) {
		n.elastic = elastic_create(n.loop,
					   n.remote && self->donate_mb == CONFIG_AUTO ? n.remote : NULL,
					   local_auto ? n.zcache : NULL, self, err, sizeof(err));
		if (!n.elastic) {
			log_error("%s", err);
			status = EXIT_USAGE;
			goto destroy_remote;
		}
	}
	n.store = store_create(n.loop, n.zcache, n.remote, cfg.room_wait_ms);
	if (!n.store) {
		log_error("cannot create the store: out of memory");
		goto destroy_remote;
	}
	n.env = (struct client_env){
	    .loop = n.loop,
	    .zcache = n.zcache,
	    .store = n.store,
	    .pools = n.pools,
	    .stats = &n.stats,
	    .version = RAMSTER_VERSION,
	    .node_name = name,
	    .socket_path = socket_path,
	    .config_path = config_shown,
	    .local_mb = zc.local_mb,
	    .local_auto = local_auto,
	    .remote = n.remote,
	    .frame_timeout_ms = cfg.env.frame_timeout_ms,
	    .users = n.users,
	    .restart = &n.restart,
	    .elastic = n.elastic,
	    .home = n.home,
	    .restart_now = main_restart_now,
	    .restart_arg = &n,
	};
	ev_timer_init(&n.restart_soon, main_restart_soon_cb, 0.02, 0.);
	n.restart_soon.data = &n;
	ev_init(&n.quiet, main_quiet_cb);
	n.quiet.repeat = 0.005;
	n.quiet.data = &n;
	n.quiet_ms = cfg.request_timeout_ms + 1000;
	if (client_listen(&n.env, &n.listener, err, sizeof(err))) {
		log_error("%s", err);
		goto destroy_store;
	}
	if (cfg.n_exports) {
		n.nbd = nbd_create(n.loop, n.store, &cfg, self, err, sizeof(err));
		if (!n.nbd) {
			log_error("cannot start the NBD frontend: %s", err);
			goto close_listener;
		}
		n.env.nbd = n.nbd;
		log_notice("NBD: %zu export%s on %s", cfg.n_exports, cfg.n_exports == 1 ? "" : "s",
			   nbd_describe(n.nbd));
	}
	restart_adopt_exports(&n.restart, n.nbd, n.store); /* a warm restart's */
	if (self && self->metrics_listen[0]) {
		n.metrics = metrics_create(&n.env, self->metrics_listen, err, sizeof(err));
		if (!n.metrics) {
			log_error("%s", err);
			goto stop_nbd;
		}
		n.env.metrics = n.metrics;
		log_notice("metrics: http://%s/metrics", self->metrics_listen);
	}
	if (o.config) {
		n.reload = reload_create(config_shown, name, &cfg, o.log_level >= 0, n.remote);
		if (!n.reload) {
			log_error("cannot set up reloading: %s", strerror(ENOMEM));
			goto stop_metrics;
		}
		reload_set_users(n.reload, n.users, zcache_tmem(n.zcache));
		reload_set_nbd(n.reload, n.nbd);
		n.env.reload = n.reload;
	}
	ev_signal_init(&n.sigterm, main_stop_cb, SIGTERM);
	ev_signal_init(&n.sigint, main_stop_cb, SIGINT);
	ev_signal_init(&n.sighup, main_hup_cb, SIGHUP);
	ev_signal_init(&n.sigusr2, main_usr2_cb, SIGUSR2);
	n.sighup.data = n.reload;
	n.sigterm.data = n.sigint.data = n.sigusr2.data = &n;
	ev_signal_start(n.loop, &n.sigusr2);
	ev_signal_start(n.loop, &n.sigterm);
	ev_signal_start(n.loop, &n.sigint);
	ev_signal_start(n.loop, &n.sighup);

	busy_us = self ? self->busy_poll_us : CONFIG_DEFAULT_BUSY_POLL_US;
	if (cfg.env.has_busy_poll)
		busy_us = cfg.env.busy_poll_us;
	n.spin = spin_create(n.loop, (unsigned)busy_us);
	if (!n.spin) {
		log_error("cannot start the loop's busy polling: %s", strerror(ENOMEM));
		goto stop_signals;
	}
	n.env.spin = n.spin;

	log_notice("ramsterd %s node %s listening on %s (local_mb %llu)", RAMSTER_VERSION, name,
		   socket_path, (unsigned long long)zc.local_mb);

	notify_ready(&n.env, cfg.cluster_name); /* READY=1, the watchdog's timer */
	spin_run(n.spin);
	if (n.how == MAIN_RESTART_EXEC || n.how == MAIN_RESTART_FDSTORE)
		main_restart(&n, argv); /* an exec does not return */

	/* ---- stop, in reverse ---- */
	status = 0;
	notify_stop();
	n.env.spin = NULL;
	spin_destroy(n.spin);
stop_signals:
	ev_signal_stop(n.loop, &n.sigusr2);
	ev_timer_stop(n.loop, &n.restart_soon);
	ev_signal_stop(n.loop, &n.sighup);
	ev_signal_stop(n.loop, &n.sigint);
	ev_signal_stop(n.loop, &n.sigterm);
	n.env.reload = NULL;
	reload_destroy(n.reload);
stop_metrics:
	n.env.metrics = NULL;
	metrics_destroy(n.metrics);
stop_nbd:
	n.env.nbd = NULL;
	nbd_destroy(n.nbd);
close_listener:
	client_listener_close(n.listener);
destroy_store:
	store_destroy(n.store);
destroy_remote:
	elastic_destroy(n.elastic);
	remote_destroy(n.remote); /* ends bring_home's gets in flight */
	home_destroy(n.home);
destroy_pools:
	pools_destroy(n.pools);
destroy_zcache:
	users_destroy(n.users);
	zcache_destroy(n.zcache);
out:
	crash_keep_close(n.crash, status == 0); /* a stop: nothing for the next start to load */
	ev_loop_destroy(n.loop);
	if (!status)
		log_notice("ramsterd node %s stopped", name);
	return status;
}
