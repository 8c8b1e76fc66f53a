/*
 * config_keys.c - the keys of the cluster file: one row each, and how a
 * value of each type is read (config_keys.h).
 *
 * A row is everything about its key: the field it fills, its bounds, its
 * default, its help, its reload rule. The value readers here are the only
 * ones, so every key of a type refuses the same way; the few rules a row
 * cannot say (a unique id or address) are its check, next to the rows.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/sock.h"
#include "common/util.h"
#include "node/config_int.h"
#include "node/config_keys.h"
#include "node/log.h"
#include "node/store.h"
#include "tmem/compress.h"
#include "tmem/replica.h"
#include "tmem/zalloc.h"

#define CONFIG_MB_MAX	    (1024u * 1024) /* 1 TiB in MiB */
#define CONFIG_SOCKET_MAX   107		   /* sun_path less its NUL */
#define CONFIG_FRAC_ONE	    1024	   /* fractions are kept in 1/1024ths */
#define CONFIG_PAGE	    4096
#define CONFIG_CLIENTS_MAX  65536
#define CONFIG_LIMIT_MS_MAX 86400000 /* a day */

/* ---- the checks a row cannot say ----------------------------------------------- */

/* id: unique among the nodes. */
static int config_check_node_id(struct config_parse *p, const struct config_key *k, const char *v)
{
	const struct config_node *n = p->node;
	size_t i;

	for (i = 0; i < p->c->n_nodes; i++)
		if (&p->c->nodes[i] != n && p->c->nodes[i].id == n->id)
			return config_fail(p, "id %u is already node '%s' (line %d)", n->id,
					   p->c->nodes[i].name, p->c->nodes[i].line);
	return 0;
}

/* address: unique among the nodes (the host in any case). */
static int config_check_node_address(struct config_parse *p, const struct config_key *k,
				     const char *v)
{
	const struct config_node *n = p->node;
	size_t i;

	for (i = 0; i < p->c->n_nodes; i++) {
		const struct config_node *o = &p->c->nodes[i];

		if (o != n && o->port == n->port && !strcasecmp(o->host, n->host))
			return config_fail(p, "address %s is already node '%s' (line %d)", v,
					   o->name, o->line);
	}
	return 0;
}

/* nbd_tls: its line names the TLS problems found once the file is read (config_check.c). */
static int config_check_nbd_tls(struct config_parse *p, const struct config_key *k, const char *v)
{
	p->node->nbd_tls_line = p->lineno;
	return 0;
}

/* ---- the rows --------------------------------------------------------------------- */

/* A row a key, its fields in the same places: clang-format would put one a line. */
/* clang-format off */
#define FIELD(type, f) .off = offsetof(type, f), .size = sizeof(((type *)0)->f)
#define CLUSTER(f)     .sec = CONFIG_SEC_CLUSTER, FIELD(struct config, f)
#define NODE(f)	       .sec = CONFIG_SEC_NODE, FIELD(struct config_node, f)
#define EXPORT(f)      .sec = CONFIG_SEC_EXPORT, FIELD(struct config_export, f)
#define LIMIT(f)       .sec = CONFIG_SEC_LIMITS, FIELD(struct config, limits.f)
#define USER(f)	       .sec = CONFIG_SEC_USER, FIELD(struct config_user, f)
#define STR_(x)	       #x
#define STR(x)	       STR_(x) /* a default named in a header, as the file writes it */

static const struct config_choice transport_choices[] = {
    {.name = "tcp", .value = TRANSPORT_TCP},
    {.name = "rdma", .value = TRANSPORT_RDMA},
    {.name = "auto", .value = TRANSPORT_AUTO},
    {.name = NULL},
};
static const struct config_choice nbd_tls_choices[] = {
    {.name = "off", .value = NBD_TLS_OFF},
    {.name = "on", .value = NBD_TLS_ON},
    {.name = "require", .value = NBD_TLS_REQUIRE},
    {.name = NULL},
};
static const struct config_choice link_security_choices[] = {
    {.name = "secure", .value = false},
    {.name = "integrity", .value = true},
    {.name = NULL},
};
static const struct config_choice ec_layout_choices[] = {
    {.name = "pages", .value = false},
    {.name = "stripes", .value = true},
    {.name = NULL},
};
static const struct config_choice allocator_choices[] = {
    {.name = "dense", .value = ZALLOC_DENSE},
    {.name = "zbud", .value = ZALLOC_ZBUD},
    {.name = NULL},
};
static const struct config_choice compressor_choices[] = {
    {.name = "lzo", .value = COMPRESS_LZO},
    {.name = "lz4", .value = COMPRESS_LZ4},
    {.name = NULL},
};
static const struct config_choice log_level_choices[] = {
    {.name = "debug", .value = LOG_DEBUG},
    {.name = "info", .value = LOG_INFO},
    {.name = "notice", .value = LOG_NOTICE},
    {.name = "warn", .value = LOG_WARN},
    {.name = "warning", .value = LOG_WARN, .alias = true},
    {.name = "error", .value = LOG_ERROR},
    {.name = NULL},
};

/*
 * In the order of the docs. Within a section the order is also the order a
 * reload lists its changes in.
 */
const struct config_key config_keys[] = {
    /* ---- [cluster] ---- */
    {.name = "name", CLUSTER(cluster_name), .type = CONFIG_TEXT, .max = CONFIG_NAME_MAX - 1,
     .def_doc = "empty", .arg = "NAME",
     .help = "The collective's name.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "secret_file", CLUSTER(secret_file), .type = CONFIG_PATH, .max = CONFIG_PATH_MAX - 1,
     .def_doc = "none",
     .help = "The file holding the cluster key; a relative path is relative to the cluster "
	     "file's directory. Required with a `[cluster]` section and two or more nodes, and "
	     "read at load: it must exist, be readable by the daemon, hold at least 16 bytes "
	     "and not be readable by group or others. Make one with `ramsterctl genkey`.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "heartbeat_ms", CLUSTER(heartbeat_ms), .type = CONFIG_U32, .min = 10, .max = 60000,
     .def = "100",
     .help = "Heartbeat period.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "dead_after_ms", CLUSTER(dead_after_ms), .type = CONFIG_U32, .min = 20, .max = 600000,
     .def = "1000",
     .help = "Silence after which a peer is unreachable (nothing new is placed there; nothing "
	     "is forgotten); above `heartbeat_ms`.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "orphan_after_ms", CLUSTER(orphan_after_ms), .type = CONFIG_U32, .min = 100,
     .max = CONFIG_LIMIT_MS_MAX, .def = STR(CONFIG_DEFAULT_ORPHAN_AFTER_MS),
     .def_doc = "600000 (10 min)",
     .help = "An unreachable peer's lease: after this long its copies (and the pages held for "
	     "it) are forgotten; above `dead_after_ms`.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "replicas", CLUSTER(replicas), .type = CONFIG_U32, .min = 1, .max = REPLICA_COPIES_MAX,
     .def = "1",
     .help = "Copies kept on peers of each remote persistent page, at most the number of "
	     "nodes - 1. A change counts for the pages placed from then on.",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "redundancy", CLUSTER(redundancy), .type = CONFIG_TEXT, .max = sizeof(((struct config *)0)->redundancy) - 1,
     .def_doc = "replicas 1", .arg = "replicas N | ec K+M",
     .help = "How a remote persistent page survives its holders: `replicas N` keeps N full "
	     "copies (the same as `replicas = N`); `ec K+M` cuts the sealed page into K data "
	     "and M parity fragments on K+M distinct peers (2 <= K, 1 <= M, K+M <= 8), any K "
	     "of which give it back: M holders may die, at (K+M)/K the memory "
	     "(docs/erasure.md). Needs K+M+1 nodes.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "ec_read_extra", CLUSTER(ec_read_extra), .type = CONFIG_U32, .min = 0, .max = 6,
     .def = "0",
     .help = "With `redundancy = ec K+M`: fragments asked beyond K on a read, the first K to "
	     "answer used (a slow holder does not set the latency; costs the extra requests). "
	     "At most M is useful.",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "ec_layout", CLUSTER(ec_stripes), .type = CONFIG_ENUM, .choices = ec_layout_choices,
     .def = "pages",
     .help = "With `redundancy = ec K+M`: `pages` cuts each page into K fragments (a read asks "
	     "K holders, one-sided over RDMA); `stripes` codes across K whole pages (a healthy "
	     "read asks the page's one holder, by message: the faster layout over TCP; a flushed "
	     "page's bytes stay until its stripe empties or is compacted). docs/erasure.md.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "link_security", CLUSTER(link_integrity_only), .type = CONFIG_ENUM,
     .choices = link_security_choices, .def = "secure",
     .help = "`secure`: peer links and pages encrypted and authenticated; `integrity`: "
	     "MAC'd only, for a fabric trusted for confidentiality (docs/security.md). The "
	     "same on every node.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "rereplicate_rate", CLUSTER(rereplicate_rate), .type = CONFIG_U32, .min = 1,
     .max = 1000000, .def = "2000",
     .help = "Copies re-made a second at most after a holder dies.",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "high_watermark", CLUSTER(high_watermark_pct), .type = CONFIG_PERCENT, .min = 1,
     .max = 100, .def = "90",
     .help = "Remotify above this share of `local_mb` (`90` or `90%`).",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "low_watermark", CLUSTER(low_watermark_pct), .type = CONFIG_PERCENT, .min = 0,
     .max = 99, .def = "80",
     .help = "Remotify until below this share of `local_mb`; below `high_watermark`.",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "remotify_ephemeral", CLUSTER(remotify_ephemeral), .type = CONFIG_BOOL, .def = "true",
     .help = "Push ephemeral pages to peers.",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "remotify_persistent", CLUSTER(remotify_persistent), .type = CONFIG_BOOL,
     .def = "true",
     .help = "Push persistent pages to peers.",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "request_timeout_ms", CLUSTER(request_timeout_ms), .type = CONFIG_U32, .min = 1,
     .max = 600000, .def_doc = "`dead_after_ms`",
     .help = "Limit of one remote request. A persistent get whose request timed out asks "
	     "again while its holder is alive: only a holder gone (restarted, or unreachable "
	     "past `orphan_after_ms`) loses a page.",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "room_wait_ms", CLUSTER(room_wait_ms), .type = CONFIG_U32, .min = 1, .max = 60000,
     .def = STR(STORE_DEFAULT_ROOM_WAIT_MS),
     .help = "How long a persistent put into a full tier waits for remotify to make room "
	     "without a page stored; then the rest of that request is refused at once.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "pers_max", CLUSTER(pers_max_frac), .type = CONFIG_FRACTION, .def_doc = "7/8",
     .help = "Largest compressed persistent page accepted.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "pers_mean_max", CLUSTER(pers_mean_max_frac), .type = CONFIG_FRACTION,
     .def_doc = "5/8",
     .help = "Compressed size above which the mean rule applies.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "pers_mean_limit", CLUSTER(pers_mean_limit_frac), .type = CONFIG_FRACTION,
     .def_doc = "5/8",
     .help = "Mean compressed size the tier keeps under.",
     .reload = CONFIG_RELOAD_RESTART},

    /* ---- [node NAME] ---- */
    {.name = "id", NODE(id), .type = CONFIG_U32, .min = 1, .max = CONFIG_NODES_MAX,
     .def_doc = "none",
     .help = "The node's number, unique in the file.",
     .reload = CONFIG_RELOAD_RESTART, .check = config_check_node_id},
    {.name = "address", NODE(host), .off2 = offsetof(struct config_node, port),
     .type = CONFIG_HOSTPORT, .def_doc = "none",
     .help = "Where peers reach this node: a host name or IPv4 address and a port 1..65535, "
	     "unique in the file.",
     .reload = CONFIG_RELOAD_RESTART, .check = config_check_node_address},
    {.name = "transport", NODE(transport), .type = CONFIG_ENUM, .choices = transport_choices,
     .def = "tcp",
     .help = "`tcp`; `rdma`: the node must have an RDMA device serving its address or it "
	     "refuses to start; `auto`: RDMA when a device serves the address, else TCP.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "socket", NODE(socket), .type = CONFIG_PATH, .max = CONFIG_SOCKET_MAX,
     .def_doc = "`$RAMSTER_SOCKET`, else /run/ramster/ramsterd.sock",
     .help = "The client socket. `--socket` wins over it.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "local_mb", NODE(local_mb), .type = CONFIG_U64, .min = 1, .max = CONFIG_MB_MAX,
     .def = STR(CONFIG_DEFAULT_LOCAL_MB), .auto_ok = true,
     .help = "The local tier's budget in MiB. `--local-mb` wins over it. `auto`: the tier "
	     "keeps what its host can spare, between `local_min_mb` and `local_max_mb`, "
	     "keeping `reserve_mb` free and the memory stall below `pressure_target`; when it "
	     "shrinks it remotifies (or evicts) and gives the frames' memory back to the "
	     "kernel (docs/elastic.md).",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "local_min_mb", NODE(local_min_mb), .type = CONFIG_U64, .min = 1,
     .max = CONFIG_MB_MAX, .def = "16",
     .help = "`local_mb = auto`: the least the tier keeps, unless `reserve_mb` needs it back.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "local_max_mb", NODE(local_max_mb), .type = CONFIG_U64, .min = 0,
     .max = CONFIG_MB_MAX, .def = "0", .def_doc = "0: a quarter of MemTotal",
     .help = "`local_mb = auto`: the most the tier keeps.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "nbd_socket", NODE(nbd_socket), .type = CONFIG_PATH, .max = CONFIG_SOCKET_MAX,
     .def_doc = "/run/ramster/nbd.sock when the file has exports",
     .help = "Unix socket for NBD clients.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "nbd_listen", NODE(nbd_listen), .type = CONFIG_ADDRESS, .max = CONFIG_NAME_MAX - 1,
     .def_doc = "none",
     .help = "Also serve NBD over TCP there. On an address other than loopback (127.0.0.0/8, "
	     "::1), `nbd_tls` must be set: `require`, or `off` written out to serve plaintext "
	     "NBD on the network (logged as a warning); unset, the node refuses to start.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "nbd_tls", NODE(nbd_tls), .type = CONFIG_ENUM, .choices = nbd_tls_choices,
     .def_doc = "off (unset)",
     .help = "TLS for NBD over TCP (NBD_OPT_STARTTLS, as nbdkit's --tls): `on` offers it and "
	     "lets plaintext clients in too; `require` answers every option but STARTTLS and "
	     "ABORT with NBD_REP_ERR_TLS_REQD until TLS is up (NBD_OPT_EXPORT_NAME closes the "
	     "connection). The `nbd_socket` stays plaintext (STARTTLS is offered there too). "
	     "`on` and `require` need exactly one of `nbd_tls_psk` and "
	     "`nbd_tls_certificates`.",
     .reload = CONFIG_RELOAD_RESTART, .check = config_check_nbd_tls},
    {.name = "nbd_tls_psk", NODE(nbd_tls_psk), .type = CONFIG_PATH, .max = CONFIG_PATH_MAX - 1,
     .def_doc = "none", .arg = "FILE",
     .help = "Pre-shared keys, one `username:hexkey` a line as psktool(1) writes them "
	     "(nbdkit's --tls-psk). Mode 0600 or 0400: a file readable by group or others "
	     "refuses to start. A relative path is relative to the cluster file's directory. "
	     "Clients: nbds://NAME@HOST:PORT/EXPORT?tls-psk-file=FILE.",
     .reload = CONFIG_RELOAD_TLS_KEYS},
    {.name = "nbd_tls_certificates", NODE(nbd_tls_certificates), .type = CONFIG_PATH,
     .max = CONFIG_PATH_MAX - 1, .def_doc = "none", .arg = "DIR",
     .help = "X.509, as nbdkit's --tls-certificates: DIR/server-cert.pem and "
	     "DIR/server-key.pem (mode 0600 or 0400, as above), and optionally DIR/ca-cert.pem. "
	     "A client certificate is not required (nbdkit without --tls-verify-peer); with "
	     "ca-cert.pem present one is asked for, and one that is sent must chain to it. A "
	     "relative path is relative to the cluster file's directory.",
     .reload = CONFIG_RELOAD_TLS_KEYS},
    {.name = "metrics_listen", NODE(metrics_listen), .type = CONFIG_ADDRESS,
     .max = sizeof(((struct config_node *)0)->metrics_listen) - 1, .def_doc = "none",
     .help = "Serve Prometheus metrics at /metrics there (docs/metrics.md).",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "crash_dir", NODE(crash_dir), .type = CONFIG_PATH, .max = CONFIG_PATH_MAX - 1,
     .def_doc = "none", .arg = "DIR",
     .help = "Keep the tier's frames and index in files under DIR (an absolute path on a "
	     "tmpfs with room for local_mb: /dev/shm/ramster, or a tmpfs of its own), so that a "
	     "crash or `kill -9` loses no persistent page held in this node's RAM: the next "
	     "start loads what they hold, checked, and a pool that lost pages (remote pages, an "
	     "operation the crash cut) answers -EIO for them, never 'no such page' "
	     "(docs/warm-restart.md, \"A crash\"). DIR is made mode 0700; one daemon a DIR. "
	     "Needs allocator = dense. NBD exports start empty after a crash.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "busy_poll_us", NODE(busy_poll_us), .type = CONFIG_U64, .min = 0,
     .max = CONFIG_BUSY_POLL_MAX_US, .def = STR(CONFIG_DEFAULT_BUSY_POLL_US),
     .help = "After work, the event loop may poll up to this long before it sleeps (0: off). "
	     "The window adapts: it opens while work comes within it and closes while the "
	     "loop's waits are longer (an idle node does not poll). `$RAMSTER_BUSY_POLL_US` "
	     "overrides it.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "donate_mb", NODE(donate_mb), .type = CONFIG_U64, .min = 0, .max = CONFIG_MB_MAX,
     .def = "0", .auto_ok = true,
     .help = "RAM lent to peers' pages, MiB. A reload applies it: more room at once; less "
	     "stops new peer pages until the store is below it (nothing held is dropped). "
	     "`auto`: the node lends what its host can spare, between `donate_min_mb` and "
	     "`donate_max_mb`, keeping `reserve_mb` free and the memory stall below "
	     "`pressure_target`; it gives pages back to their owners when it shrinks "
	     "(docs/elastic.md). A reload may not switch between `auto` and a number.",
     .reload = CONFIG_RELOAD_APPLY},
    {.name = "donate_min_mb", NODE(donate_min_mb), .type = CONFIG_U64, .min = 0,
     .max = CONFIG_MB_MAX, .def = "0",
     .help = "`donate_mb = auto`: the least it lends, unless `reserve_mb` needs it back.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "donate_max_mb", NODE(donate_max_mb), .type = CONFIG_U64, .min = 0,
     .max = CONFIG_MB_MAX, .def = "0", .def_doc = "0: half of MemTotal",
     .help = "`donate_mb = auto`: the most it lends.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "reserve_mb", NODE(reserve_mb), .type = CONFIG_U64, .min = 0, .max = CONFIG_MB_MAX,
     .def = "0", .def_doc = "0: a 16th of MemTotal, at least 256",
     .help = "`donate_mb = auto` and `local_mb = auto`: memory the host always keeps. When "
	     "MemAvailable (or, in a memory cgroup with a limit, the room below it) falls "
	     "under it, the node gives back at once what it takes.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "bring_home", NODE(bring_home), .type = CONFIG_BOOL, .def = "false",
     .help = "While this node's tier is 10 points under `low_watermark` and its host is calm "
	     "(memory stall under half of `pressure_target`), read its persistent pages on "
	     "peers back home, a batch of 64 a second (docs/elastic.md). The pages a workload "
	     "reads come home anyway when there is room.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "pressure_target", NODE(pressure_target), .type = CONFIG_U32, .min = 10,
     .max = 500000, .def = "1000",
     .help = "`donate_mb = auto` and `local_mb = auto`: the memory stall (PSI `some`, of the "
	     "host and of the node's own cgroup) it tolerates, in microseconds a second (1000: "
	     "0.1 % of wall time, senpai's target). Above it the node lends (and keeps) less, "
	     "in bounded steps; well below it for a while, more.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "allocator", NODE(allocator), .type = CONFIG_ENUM, .choices = allocator_choices,
     .def = "dense",
     .help = "The local tier's frame allocator: `dense` (size classes, as many pages a frame "
	     "as their sizes allow) or `zbud` (at most two a frame; the reference).",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "compressor", NODE(compressor), .type = CONFIG_ENUM, .choices = compressor_choices,
     .def = "lzo",
     .help = "The local tier's compressor: `lzo` (LZO1X-1) or `lz4`.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "log_level", NODE(log_level), .type = CONFIG_ENUM, .choices = log_level_choices,
     .def_doc = "info",
     .help = "Lines below it are dropped (`warning` is `warn`). `--log-level` wins over it.",
     .reload = CONFIG_RELOAD_LOG_LEVEL},

    /* ---- [export NAME] ---- */
    {.name = "size", EXPORT(size), .type = CONFIG_SIZE, .def_doc = "none (required)",
     .help = "The device's size in bytes, with an optional `K`, `M`, `G` or `T` suffix "
	     "(powers of 1024, any case); a positive multiple of 4096.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "backing", EXPORT(backing), .type = CONFIG_PATH, .max = CONFIG_PATH_MAX - 1,
     .def_doc = "none (a RAM disk, empty after a restart)",
     .help = "A file or device behind the export: pages the tier refuses go there, and a "
	     "FLUSH writes every block accepted since the last one to it. Under the shipped "
	     "systemd units, put it below /var/lib/ramster (or allow its path with "
	     "ReadWritePaths= in a drop-in).",
     .reload = CONFIG_RELOAD_RESTART},

    /* ---- [limits] ---- */
    {.name = "max_clients", LIMIT(max_clients), .type = CONFIG_U32, .min = 1,
     .max = CONFIG_CLIENTS_MAX, .def = "1024",
     .help = "Client connections at once. Root's and the daemon's own uid's connections are "
	     "neither counted nor refused.",
     .reload = CONFIG_RELOAD_USERS},
    {.name = "max_clients_per_uid", LIMIT(max_clients_per_uid), .type = CONFIG_U32, .min = 1,
     .max = CONFIG_CLIENTS_MAX, .def = "64",
     .help = "Client connections at once of one uid.",
     .reload = CONFIG_RELOAD_USERS},
    {.name = "max_pools_per_uid", LIMIT(max_pools_per_uid), .type = CONFIG_U32, .min = 1,
     .max = CONFIG_CLIENTS_MAX, .def = "4096",
     .help = "Pools one uid owns at once (a shared pool counts for its creator).",
     .reload = CONFIG_RELOAD_USERS},
    {.name = "default_weight", LIMIT(default_weight), .type = CONFIG_U32, .min = 1, .max = 10000,
     .def = "100",
     .help = "The weight of a uid without a rule.",
     .reload = CONFIG_RELOAD_USERS},
    {.name = "nbd_max_connections", LIMIT(nbd_max_connections), .type = CONFIG_U32, .min = 1,
     .max = 4096, .def = "64",
     .help = "NBD connections at once.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "nbd_handshake_timeout_ms", LIMIT(nbd_handshake_timeout_ms), .type = CONFIG_U32,
     .min = 100, .max = 600000, .def = "10000",
     .help = "An NBD handshake must end within this.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "nbd_idle_timeout_ms", LIMIT(nbd_idle_timeout_ms), .type = CONFIG_U32, .min = 1000,
     .max = CONFIG_LIMIT_MS_MAX, .def = "600000",
     .help = "An NBD connection without socket activity this long is closed.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "peer_unauth_max", LIMIT(peer_unauth_max), .type = CONFIG_U32, .min = 1, .max = 4096,
     .def = "32",
     .help = "Inbound peer links not yet authenticated, in all.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "peer_unauth_per_addr", LIMIT(peer_unauth_per_addr), .type = CONFIG_U32, .min = 1,
     .max = 4096, .def = "4",
     .help = "Inbound peer links not yet authenticated from one source address.",
     .reload = CONFIG_RELOAD_RESTART},
    {.name = "peer_handshake_timeout_ms", LIMIT(peer_handshake_timeout_ms), .type = CONFIG_U32,
     .min = 100, .max = 60000, .def = "3000",
     .help = "An inbound peer link's deadline to authenticate (the shorter of this and "
	     "max(100 ms, `dead_after_ms`)).",
     .reload = CONFIG_RELOAD_RESTART},

    {.name = "reattach_grace_ms", LIMIT(reattach_grace_ms), .type = CONFIG_U32, .min = 0,
     .max = CONFIG_LIMIT_MS_MAX, .def = "30000",
     .help = "How long the pools of a client whose connection ended are kept for it to "
	     "reconnect and attach them again (libramster does it on its own); past it they "
	     "are released. 0: released at once.",
     .reload = CONFIG_RELOAD_RESTART},

    /* ---- [uid N], [user NAME], [group NAME] ---- */
    {.name = "max_mb", USER(max_mb), .type = CONFIG_U64, .min = 1, .max = CONFIG_MB_MAX,
     .def_doc = "none (no quota)",
     .help = "MiB of pages the pools of a matched uid may hold, local and remote.",
     .reload = CONFIG_RELOAD_USERS},
    {.name = "weight", USER(weight), .type = CONFIG_U32, .min = 1, .max = 10000,
     .def_doc = "`default_weight` of [limits]",
     .help = "A matched uid's share of the tier under contention.",
     .reload = CONFIG_RELOAD_USERS},
    {.name = "max_connections", USER(max_connections), .type = CONFIG_U32, .min = 1,
     .max = CONFIG_CLIENTS_MAX, .def_doc = "`max_clients_per_uid` of [limits]",
     .help = "Client connections at once of a matched uid.",
     .reload = CONFIG_RELOAD_USERS},
    {.name = "max_pools", USER(max_pools), .type = CONFIG_U32, .min = 1, .max = CONFIG_CLIENTS_MAX,
     .def_doc = "`max_pools_per_uid` of [limits]",
     .help = "Pools a matched uid owns at once.",
     .reload = CONFIG_RELOAD_USERS},
};

/* clang-format on */

const size_t config_keys_n = ARRAY_SIZE(config_keys);

_Static_assert(ARRAY_SIZE(config_keys) <= CONFIG_KEYS_MAX, "raise CONFIG_KEYS_MAX");

const struct config_key *config_key_find(enum config_sec sec, const char *name)
{
	size_t i;

	for (i = 0; i < config_keys_n; i++)
		if (config_keys[i].sec == sec && !strcmp(config_keys[i].name, name))
			return &config_keys[i];
	return NULL;
}

const char *config_sec_name(enum config_sec sec)
{
	static const char *const names[] = {
	    [CONFIG_SEC_CLUSTER] = "cluster", [CONFIG_SEC_NODE] = "node",
	    [CONFIG_SEC_EXPORT] = "export",   [CONFIG_SEC_LIMITS] = "limits",
	    [CONFIG_SEC_USER] = "user",
	};

	return (unsigned)sec < CONFIG_SECS ? names[sec] : "?";
}

const char *config_reload_text(enum config_reload r)
{
	switch (r) {
	case CONFIG_RELOAD_RESTART:
		return "needs a restart";
	case CONFIG_RELOAD_APPLY:
		return "applied";
	case CONFIG_RELOAD_LOG_LEVEL:
		return "applied, unless --log-level was given";
	case CONFIG_RELOAD_TLS_KEYS:
		return "applied: while TLS is on, every reload reads the files again (from a new "
		       "path too); else a new path needs a restart";
	case CONFIG_RELOAD_USERS:
		return "applied to every uid's record";
	}
	return "?";
}

void *config_key_field(const struct config_key *k, void *base)
{
	return (char *)base + k->off;
}

const void *config_key_cfield(const struct config_key *k, const void *base)
{
	return (const char *)base + k->off;
}

uint64_t config_key_get(const struct config_key *k, const void *base)
{
	const void *f = config_key_cfield(k, base);
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64 = 0;

	switch (k->size) {
	case 1:
		memcpy(&u8, f, 1);
		return u8;
	case 2:
		memcpy(&u16, f, 2);
		return u16;
	case 4:
		memcpy(&u32, f, 4);
		return u32;
	case 8:
		memcpy(&u64, f, 8);
		return u64;
	}
	return 0;
}

/* Keep v in the field of k->size bytes (bool, uint16_t, uint32_t, int, an enum, uint64_t). */
static void config_key_put(const struct config_key *k, void *base, uint64_t v)
{
	void *f = config_key_field(k, base);
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (k->size) {
	case 1:
		memcpy(f, &u8, 1);
		break;
	case 2:
		memcpy(f, &u16, 2);
		break;
	case 4:
		memcpy(f, &u32, 4);
		break;
	case 8:
		memcpy(f, &v, 8);
		break;
	}
}

/* ---- values ----------------------------------------------------------------------- */

static int __attribute__((format(printf, 3, 4)))
config_why(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int config_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	char digits[32];
	size_t n = strspn(s, "0123456789");
	unsigned shift = 0;
	uint64_t v;

	if (n == 0 || n >= sizeof(digits))
		return -EINVAL;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (config_parse_u64(digits, &v))
		return -EINVAL;
	if (s[n]) {
		if (s[n + 1])
			return -EINVAL;
		switch (s[n]) {
		case 'k':
		case 'K':
			shift = 10;
			break;
		case 'm':
		case 'M':
			shift = 20;
			break;
		case 'g':
		case 'G':
			shift = 30;
			break;
		case 't':
		case 'T':
			shift = 40;
			break;
		default:
			return -EINVAL;
		}
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

static int config_number(const struct config_key *k, const char *value, uint64_t *out, char *why,
			 size_t len)
{
	uint64_t v;

	if (k->auto_ok && !strcmp(value, "auto")) {
		*out = CONFIG_AUTO;
		return 0;
	}
	if (config_parse_u64(value, &v))
		return config_why(why, len, "%s: '%s' is not a number%s", k->name, value,
				  k->auto_ok ? " or auto" : "");
	if (v < k->min || v > k->max)
		return config_why(why, len, "%s: %llu is out of range (%llu..%llu)", k->name,
				  (unsigned long long)v, (unsigned long long)k->min,
				  (unsigned long long)k->max);
	*out = v;
	return 0;
}

/* A percentage: "N" or "N%". */
static int config_percent(const struct config_key *k, const char *value, uint64_t *out, char *why,
			  size_t len)
{
	char num[16];
	size_t n = strlen(value);

	if (n && value[n - 1] == '%')
		n--;
	if (n >= sizeof(num))
		return config_why(why, len, "%s: '%s' is not a percentage", k->name, value);
	memcpy(num, value, n);
	num[n] = '\0';
	return config_number(k, num, out, why, len);
}

static int config_bool(const struct config_key *k, const char *value, uint64_t *out, char *why,
		       size_t len)
{
	static const char *const yes[] = {"true", "yes", "1"};
	static const char *const no[] = {"false", "no", "0"};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(value, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(value, no[i])) {
			*out = false;
			return 0;
		}
	}
	return config_why(why, len, "%s: '%s' is not a boolean (true/false/yes/no/1/0)", k->name,
			  value);
}

/* "N/M" (a fraction of a page) or a byte count 1..4096, as 1/1024ths of a page. */
static int config_fraction(const struct config_key *k, const char *value, uint64_t *out, char *why,
			   size_t len)
{
	const char *slash = strchr(value, '/');
	char num[32];
	uint64_t n, m, frac;

	if (slash) {
		if ((size_t)(slash - value) >= sizeof(num))
			goto bad;
		memcpy(num, value, (size_t)(slash - value));
		num[slash - value] = '\0';
		if (config_parse_u64(num, &n) || config_parse_u64(slash + 1, &m) || m == 0 ||
		    m > CONFIG_PAGE)
			goto bad;
		if (n == 0 || n > m)
			return config_why(why, len,
					  "%s: %s is out of range (a fraction above 0, at most 1)",
					  k->name, value);
		frac = (n * CONFIG_FRAC_ONE + m / 2) / m;
	} else {
		if (config_parse_u64(value, &n))
			goto bad;
		if (n < 1 || n > CONFIG_PAGE)
			return config_why(why, len, "%s: %s is out of range (1..4096 bytes)",
					  k->name, value);
		frac = (n * CONFIG_FRAC_ONE + CONFIG_PAGE / 2) / CONFIG_PAGE;
	}
	*out = frac ? frac : 1;
	return 0;
bad:
	return config_why(why, len, "%s: '%s' is neither a fraction N/M nor a byte count", k->name,
			  value);
}

static int config_size(const struct config_key *k, const char *value, uint64_t *out, char *why,
		       size_t len)
{
	uint64_t size;

	if (config_parse_size(value, &size))
		return config_why(why, len, "%s: '%s' is not a size (a number with K, M, G or T)",
				  k->name, value);
	if (size == 0 || size % CONFIG_PAGE)
		return config_why(why, len, "%s: %s is not a positive multiple of 4096 bytes",
				  k->name, value);
	*out = size;
	return 0;
}

/* "a, b or c": the choices that are not aliases. */
static void config_choices_text(const struct config_choice *c, char *buf, size_t len)
{
	size_t i, n = 0, shown = 0, at = 0;

	for (i = 0; c[i].name; i++)
		n += !c[i].alias;
	buf[0] = '\0';
	for (i = 0; c[i].name && at < len; i++) {
		if (c[i].alias)
			continue;
		shown++;
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
				       shown == 1   ? ""
				       : shown == n ? " or "
						    : ", ",
				       c[i].name);
	}
}

static int config_enum(const struct config_key *k, const char *value, uint64_t *out, char *why,
		       size_t len)
{
	char names[128];
	size_t i;

	for (i = 0; k->choices[i].name; i++) {
		if (!strcmp(value, k->choices[i].name)) {
			*out = (uint64_t)k->choices[i].value;
			return 0;
		}
	}
	config_choices_text(k->choices, names, sizeof(names));
	return config_why(why, len, "%s: '%s' is not %s", k->name, value, names);
}

/* A text that must be non-empty and at most k->max bytes. */
static int config_text(const struct config_key *k, const char *value, char *out, char *why,
		       size_t len)
{
	size_t n = strlen(value);

	if (!n)
		return config_why(why, len, "%s: empty value", k->name);
	if (n > k->max || n >= k->size)
		return config_why(why, len, "%s: too long (at most %llu bytes)", k->name,
				  (unsigned long long)k->max);
	memcpy(out, value, n + 1);
	return 0;
}

int config_key_set(const struct config_key *k, void *base, const char *value, char *why,
		   size_t whylen)
{
	uint64_t v = 0;
	int rc;

	switch (k->type) {
	case CONFIG_U32:
	case CONFIG_U64:
		rc = config_number(k, value, &v, why, whylen);
		break;
	case CONFIG_PERCENT:
		rc = config_percent(k, value, &v, why, whylen);
		break;
	case CONFIG_BOOL:
		rc = config_bool(k, value, &v, why, whylen);
		break;
	case CONFIG_FRACTION:
		rc = config_fraction(k, value, &v, why, whylen);
		break;
	case CONFIG_SIZE:
		rc = config_size(k, value, &v, why, whylen);
		break;
	case CONFIG_ENUM:
		rc = config_enum(k, value, &v, why, whylen);
		break;
	case CONFIG_ADDRESS:
	case CONFIG_HOSTPORT: {
		char host[CONFIG_NAME_MAX] = ""; /* kept whole: no stack bytes after the NUL */
		uint16_t port;
		const char *bad;

		if (sock_hostport_parse(value, host, sizeof(host), &port, &bad))
			return config_why(why, whylen, "%s: '%s' %s", k->name, value, bad);
		if (k->type == CONFIG_ADDRESS)
			return config_text(k, value, config_key_field(k, base), why, whylen);
		memcpy(config_key_field(k, base), host, sizeof(host));
		memcpy((char *)base + k->off2, &port, sizeof(port));
		return 0;
	}
	case CONFIG_TEXT:
	case CONFIG_PATH:
		return config_text(k, value, config_key_field(k, base), why, whylen);
	default:
		return config_why(why, whylen, "%s: no reader for its type", k->name);
	}
	if (!rc)
		config_key_put(k, base, v);
	return rc;
}

void config_key_defaults(enum config_sec sec, void *base)
{
	char why[CONFIG_ERR_MAX];
	size_t i;

	/* every default parses within its bounds: test_config checks each row */
	for (i = 0; i < config_keys_n; i++)
		if (config_keys[i].sec == sec && config_keys[i].def)
			(void)config_key_set(&config_keys[i], base, config_keys[i].def, why,
					     sizeof(why));
}
